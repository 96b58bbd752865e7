//go:build !race

package demo

// raceEnabled is true when the race detector is on.
const raceEnabled = false
