// Package v1 is colocd's wire contract, version 1, owned once: what a
// launcher and a sidecar must agree on (docs/nats-api.md), with no import of
// NATS, of the decision or of the predictor, so that any package may name
// it:
//
//   - the messages and their JSON keys: an admit, its decision and lease, a
//     renew, release and register, the status, the events, a watch;
//   - their names: the service, the subjects and endpoints, the events
//     stream and lease bucket of a sidecar, the two accounts and the
//     subjects the launchers' account may use, the inboxes;
//   - the outcomes, event types and reason codes, and the error codes with
//     their mapping to and from a Go error;
//   - the shape of a request, checked once: strict decoding, the bounds of
//     every field ([DecodeAdmitRequest] and the other decoders);
//   - the lease token and its digest, profile references;
//   - the environment a grant gives a training job's processes.
//
// The policy's own checks (whether a request fits this GPU) are the
// decision's, not the wire's.
package v1
