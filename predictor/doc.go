// Package predictor is the model: what co-located training jobs do to an
// inference service's latency on one GPU. It owns the profile format and its
// identity (Profile.Key), the scenario, the two simulations — time slicing
// (virtual slice, switching overhead, hold-over) and MPS (SM shares under
// concurrency, then memory-bandwidth and L2 contention) — Poisson arrivals
// and tail percentiles, and the calibration file with its per-GPU presets.
// Importers live in predictor/kineto, fitting in predictor/calibrate.
package predictor
