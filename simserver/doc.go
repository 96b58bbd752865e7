// Package simserver is a simulated inference server: it takes request
// arrivals (a recorded trace or a Poisson rate), draws each request's
// latency from colocd's own predictor for the training jobs that run next
// to it, times an error factor (so that the predictor can be wrong and
// only observation catches it), and serves its metrics in a real server's
// Prometheus format. `colocd simserve` and `colocd demo` serve it over
// HTTP, next to a sidecar whose leases it follows; the guard's tests and
// replays run against it in process.
package simserver
