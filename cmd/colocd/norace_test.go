//go:build !race

package main

// raceEnabled is true when the race detector is on.
const raceEnabled = false
