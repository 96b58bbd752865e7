//go:build !race

package calibrate

// raceEnabled lets slow tests do less under the race detector.
const raceEnabled = false
