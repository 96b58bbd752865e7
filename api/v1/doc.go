// Package v1 is colocd's wire contract, version 1, owned once: what a
// launcher and a sidecar must agree on, with no import of NATS, of the
// decision or of the predictor, so that any package may name it. It holds
// the environment a grant gives a training job's processes; the message
// types, subjects and codes of docs/nats-api.md follow here from bus and
// admission.
package v1
