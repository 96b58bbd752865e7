//go:build race

package sidecar

// raceEnabled is true when the race detector is on.
const raceEnabled = true
