// Package bus is colocd's NATS side, on nats.go alone: the micro service a
// sidecar serves ("colocd") with its per-launcher fair queues, rates and
// deadlines (service, fair, tenant); the Go client launchers use (client,
// connect), with profile uploads, event watches and the quotes placement
// asks for; the fleet's capacity summaries carried on colocd.v1.fleet
// (their record, bucket and the placement that ranks them are fleet's);
// and the JetStream stores: the lease bucket, the events stream, the
// profile object store. The wire contract it speaks is api/v1; the
// embedded nats-server, its accounts, launcher identities and leaf nodes
// are natsserver's. docs/nats-api.md is the user-facing reference.
package bus
