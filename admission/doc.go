// Package admission decides whether a training job may share this GPU with
// its inference services: health, memory and job-count constraints, then a
// search for the largest MPS percentage that keeps every service's predicted
// p99 within its SLO; and it keeps the leases of admitted jobs. The decisions
// are a policy's (policy*.go), the leases the Controller's book. It defines
// the interfaces it consumes; docs/admission.md describes it for users.
package admission
