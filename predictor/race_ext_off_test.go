//go:build !race

package predictor_test

// raceEnabled: see the package's own race_off_test.go.
const raceEnabled = false
