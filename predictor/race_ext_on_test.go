//go:build race

package predictor_test

// raceEnabled: see the package's own race_on_test.go.
const raceEnabled = true
