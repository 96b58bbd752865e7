// Package wiretest holds example values of the wire contract (api/v1) that
// the tests of its packages share: one lease, one decision, one admit
// request, each with every field that has a JSON key of its own set.
package wiretest

import (
	"encoding/json"
	"time"

	v1 "github.com/colocd/colocd/api/v1"
)

// AdmitExample is the admit request of docs/nats-api.md.
const AdmitExample = `{
  "request_id": "7f9c1e2a-launch-42",
  "job": {"id": "resnet50-ft-42", "owner": "vision-team", "priority": 1},
  "profile": {"format": "colocd.profile/v1", "name": "resnet50-train", "kind": "training",
              "summary": {"latency_ms": 95, "gpu_util": 0.6, "mem_util": 0.3}},
  "memory_mib": 12000,
  "processes": 1,
  "compute": {"min_pct": 10, "max_pct": 40},
  "lease_seconds": 900,
  "checkpointable": true
}`

// Expiry is the example lease's expiry.
var Expiry = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Lease is a granted lease.
func Lease() *v1.Lease {
	return &v1.Lease{
		ID: "l-1", JobID: "job-1", Owner: "team-a",
		ExpiresAt: Expiry, ActiveThreadPct: 30, PinnedMemLimitMiB: 8192,
		Env: map[string]string{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "30"},
	}
}

// Decision is a throttle with its lease.
func Decision() *v1.Decision {
	return &v1.Decision{
		Decision: v1.DecisionThrottle,
		Reason:   v1.Reason{Code: "slo_headroom", Message: "granted at 30 % to keep bert within its SLO"},
		Predictions: []v1.ServicePrediction{
			{Service: "bert", SLOP99MS: 15, SoloP99MS: 4.1, PredictedP99MS: 12.9},
		},
		Lease:   Lease(),
		Sidecar: "someone-else",
	}
}

// AdmitRequest is a complete admit request.
func AdmitRequest() *v1.AdmitRequest {
	return &v1.AdmitRequest{
		RequestID: "r-1",
		Job:       v1.Job{ID: "job-1", Owner: "team-a", Priority: 2},
		Profile:   json.RawMessage(`{"format":"colocd.profile/v1","name":"resnet-train","kind":"training"}`),
		MemoryMiB: 8192, Processes: 1,
		Compute:        v1.Compute{MinPct: 10, MaxPct: 50},
		LeaseSeconds:   600,
		Checkpointable: true,
	}
}
