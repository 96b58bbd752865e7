package calibrate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
)

// Load reads the measurements file at measPath, or turns a sidecar's
// observations directory obsDir into measurements, saying on w what it
// left out and writing them to measOut when set.
func Load(w io.Writer, measPath, obsDir, measOut string) (*Measurements, error) {
	if measPath != "" {
		if measOut != "" {
			return nil, errors.New("--measurements-out: want it only with --from-observations")
		}
		return LoadMeasurements(measPath)
	}
	m, skipped, err := FromObservations(obsDir)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "%d measurement records from %s", len(m.Records), obsDir)
	for _, why := range slices.Sorted(maps.Keys(skipped)) {
		fmt.Fprintf(w, "; %d windows left out: %s", skipped[why], why)
	}
	fmt.Fprintln(w)
	if measOut != "" {
		data, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(measOut, append(data, '\n'), 0o644); err != nil {
			return nil, fmt.Errorf("--measurements-out: %w", err)
		}
	}
	return m, nil
}
