//go:build !race

package admission

// raceEnabled lets slow numeric tests, which run on one goroutine and gain
// nothing from the race detector, skip under it (make test runs them
// again without).
const raceEnabled = false
