// Package simserver is a simulated inference server: it takes request
// arrivals (a recorded trace or a Poisson rate), draws each request's
// latency from colocd's own predictor for the training jobs that run next
// to it, times an error factor (so that the predictor can be wrong and
// only observation catches it), and serves its metrics in a real server's
// Prometheus format. The guard's tests and replays, and `colocd simserve`,
// run against it.
package simserver
