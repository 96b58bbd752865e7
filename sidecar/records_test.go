package sidecar

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/predictor"
	"github.com/colocd/colocd/predictor/calibrate"
)

func testMeasurement(t *testing.T, end time.Time, tr *predictor.Profile) admission.Measurement {
	t.Helper()
	return admission.Measurement{Window: admission.ObservedWindow{Since: end.Add(-time.Minute), End: end, Requests: 480, RateRPS: 8, MeanMS: 50, P50MS: 40, P90MS: 80, P99MS: 120},
		PredictedP99MS: 110, RateRPS: 8, Mode: predictor.ModeMPS, Trainers: []admission.Trainer{{Profile: tr, Pct: 50}}}
}

// A line cut off by a crash costs only itself; the profiles folder is
// bounded across restarts.
func TestObservationLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	inf, tr, _ := testModel(t)
	svc := admission.ServiceSpec{Name: "chat", Profile: inf}
	dev := predictor.Device{Name: "NVIDIA H200", SMs: 132}
	r := newObservationLog(dir, dev, slog.New(slog.DiscardHandler))
	end := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	r.record(svc, testMeasurement(t, end, tr))
	r.record(svc, testMeasurement(t, end.Add(30*time.Second), tr)) // overlaps: not recorded
	log := filepath.Join(dir, "observations", "chat.jsonl")
	f, err := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f, `{"format": "colocd.observation/v1", "ti`) // the crash
	f.Close()
	r = newObservationLog(dir, dev, slog.New(slog.DiscardHandler)) // the restart
	r.record(svc, testMeasurement(t, end.Add(2*time.Minute), tr))
	m, skipped, err := calibrate.FromObservations(filepath.Join(dir, "observations"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Records) != 2 || skipped[calibrate.SkipUnreadable] != 1 {
		t.Errorf("%d records, skipped %v; want 2 and the torn line", len(m.Records), skipped)
	}
	// A folder full from earlier runs takes no new profile.
	for i := range maxObservedProfiles {
		os.WriteFile(filepath.Join(dir, "observations", "profiles", fmt.Sprintf("old%03d.json", i)), []byte("{}"), 0o644)
	}
	other := *tr
	other.Name = "another-job"
	r = newObservationLog(dir, dev, slog.New(slog.DiscardHandler))
	r.record(svc, testMeasurement(t, end.Add(4*time.Minute), &other))
	entries, _ := os.ReadDir(filepath.Join(dir, "observations", "profiles"))
	if len(entries) > maxObservedProfiles+2 {
		t.Errorf("%d profiles in the folder, want at most %d and the two already there", len(entries), maxObservedProfiles)
	}
}

// An engine's windows (steps, not requests) are not logged for calibration.
func TestObservationLogSkipsEngines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	inf, tr, _ := testModel(t)
	r := newObservationLog(dir, predictor.Device{Name: "NVIDIA H200", SMs: 132}, slog.New(slog.DiscardHandler))
	end := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	r.record(admission.ServiceSpec{Name: "llama", Profile: inf, BurstSteps: 128}, testMeasurement(t, end, tr))
	if _, err := os.Stat(filepath.Join(dir, "observations", "llama.jsonl")); !os.IsNotExist(err) {
		t.Errorf("an engine's window was logged (stat: %v)", err)
	}
	r.record(admission.ServiceSpec{Name: "chat", Profile: inf}, testMeasurement(t, end, tr))
	if _, err := os.Stat(filepath.Join(dir, "observations", "chat.jsonl")); err != nil {
		t.Errorf("a request service's window was not logged: %v", err)
	}
}
