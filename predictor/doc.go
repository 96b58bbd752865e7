// Package predictor predicts what co-located training jobs do to an inference
// service's latency on one GPU: workload profiles and their importers, the
// time-slicing simulation (virtual slice, switching overhead, hold-over),
// Poisson arrivals with tail-latency statistics, and calibration of the model
// against measurements. It imports nothing else from colocd.
package predictor
