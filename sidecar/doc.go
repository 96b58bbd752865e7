// Package sidecar wires colocd together: it builds every component from the
// configuration (GPU, MPS daemon, predictor, admission, NATS), runs their
// loops, serves /healthz, /readyz and /metrics, traces each decision with
// OpenTelemetry, and shuts down without losing a lease.
package sidecar
