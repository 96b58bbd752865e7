// Package fleet is what colocd knows of many sidecars at once: the capacity
// summary each sidecar publishes (Capacity, colocd.capacity/v1), the
// JetStream KV bucket that keeps them (Capacities, one key a sidecar, a TTL
// that drops a dead one), reading them all in one direct get and decoding
// each as untrusted (ReadCapacities, DecodeCapacity), the ranking of the
// sidecars that could take a job (RankCapacities), and placement: quote the
// best few, admit at the best quote (Place). It speaks api/v1 over nats.go
// and knows nothing of the client: Place asks through Quoter, which the
// launcher's bus.Client is; bus carries the summaries on colocd.v1.fleet.
// docs/fleet.md is the user-facing reference.
package fleet
