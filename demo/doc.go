// Package demo is colocd's scripted scenario on a simulated GPU (`colocd
// demo`, `make demo`): a sidecar with an embedded NATS server, a simulated
// inference server whose latency follows the jobs beside it, and a
// launcher whose four jobs are granted, throttled and denied; then the
// load rises, the guard throttles and a lease expires. Each Step says what
// was asked, predicted and decided, and why.
package demo
