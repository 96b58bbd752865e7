//go:build !race

package predictor

// raceEnabled lets slow tests do less under the race detector.
const raceEnabled = false
