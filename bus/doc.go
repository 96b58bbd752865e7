// Package bus is colocd's NATS side: the v1 wire types, the micro service a
// sidecar serves ("colocd"), the Go client launchers use, the JetStream KV
// store that keeps a sidecar's leases, the JetStream stream of lease events,
// an embedded nats-server, and the carrier that moves W3C trace context in
// NATS headers. docs/nats-api.md is the user-facing reference.
package bus
