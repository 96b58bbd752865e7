package calibrate

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/colocd/colocd/predictor"
	"github.com/google/go-cmp/cmp"
)

// observationsDir writes an observations directory: the two profiles, and
// a log with one window of each kind FromObservations must tell apart.
func observationsDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	profiles := filepath.Join(dir, ObservationsProfiles)
	if err := os.Mkdir(profiles, 0o755); err != nil {
		t.Fatal(err)
	}
	// store copies a testdata profile into the folder, under the name the
	// observation log gives it.
	store := func(path string) string {
		p, err := predictor.LoadProfile(path)
		if err != nil {
			t.Fatal(err)
		}
		name := ProfileFile(p.Key())
		if err := predictor.SaveProfile(filepath.Join(profiles, name), p); err != nil {
			t.Fatal(err)
		}
		return name
	}
	infName := store("../../testdata/profiles/v100-infer-200.json")
	trName := store("../../testdata/profiles/v100-train-step.json")
	dev := predictor.Device{Name: "NVIDIA H200", SMs: 132}
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	window := func(jobs ...ObservedJob) Observation {
		at = at.Add(time.Minute)
		return Observation{Format: ObservationFormat, Time: at, WindowS: 60, Service: "chat", Device: dev, Mode: predictor.ModeMPS,
			Inference: infName, Training: jobs, RateRPS: 8, Requests: 480, LatencyMS: map[string]float64{"mean": 50, "p99": 120}, PredictedP99MS: 110}
	}
	other := window(ObservedJob{Profile: trName, Pct: 40})
	other.Device.Name = "NVIDIA A100"
	var lines []string
	for _, o := range []Observation{
		window(ObservedJob{Profile: trName, Pct: 50}), // a record
		window(), // solo
		window(ObservedJob{Profile: trName, Pct: 50}, ObservedJob{Profile: trName, Pct: 30}), // mixed
		window(ObservedJob{Profile: "gone.json", Pct: 50}),                                   // no profile
		window(ObservedJob{Profile: "../" + trName, Pct: 50}),                                // not in the folder
		window(ObservedJob{Profile: trName, Pct: 30}, ObservedJob{Profile: trName, Pct: 30}), // a record
		other,
	} {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	lines = append(lines, `{"format": "colocd.observation/v1", "time": "2026-12-01T13:`) // cut off by a crash
	if err := os.WriteFile(filepath.Join(dir, "chat.jsonl"), []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestFromObservations(t *testing.T) {
	t.Parallel()
	dir := observationsDir(t)
	m, skipped, err := FromObservations(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := Skipped{SkipSolo: 1, SkipMixed: 1, SkipProfile: 2, SkipDevice: 1, SkipUnreadable: 1}
	if diff := cmp.Diff(want, skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	if len(m.Records) != 2 || m.Records[0].TrainingPct != 50 || m.Records[1].TrainingPct != 30 || len(m.Records[1].Training) != 2 {
		t.Fatalf("records %+v", m.Records)
	}
	if r := m.Records[0]; r.RateRPS != 8 || r.Measured.LatencyMS["p99"] != 120 || r.Mode != predictor.ModeMPS || r.Name != "chat@2026-12-01T12:02:00Z" {
		t.Errorf("record %+v", r)
	}
	// Written out, they read back as a measurements file.
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseMeasurements(data, dir)
	if err != nil {
		t.Fatalf("written measurements do not read back: %v", err)
	}
	if len(back.Records) != 2 || back.Device != m.Device {
		t.Errorf("read back %d records on %+v", len(back.Records), back.Device)
	}
}

func TestFromObservationsWithNothingUsable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "chat.jsonl"), []byte("not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, skipped, err := FromObservations(dir)
	if !errors.Is(err, ErrNoRecords) || skipped[SkipUnreadable] != 1 {
		t.Fatalf("err %v, skipped %v; want ErrNoRecords and the line counted", err, skipped)
	}
}

func TestParseObservationNamesTheField(t *testing.T) {
	t.Parallel()
	_, err := ParseObservation([]byte(`{"format": "colocd.observation/v1", "mode": "mps", "rate_rps": 8, "training": [{"profile": "a.json", "pct": 0}], "latency_ms": {"p99": 12}}`))
	if err == nil || !strings.Contains(err.Error(), "training[0].pct: want a percentage in [1, 100]") {
		t.Fatalf("err = %v", err)
	}
}

func FuzzParseObservation(f *testing.F) {
	f.Add([]byte(`{"format": "colocd.observation/v1", "time": "2026-12-01T12:00:00Z", "window_s": 60, "service": "chat", "device": {"name": "NVIDIA H200", "sms": 132}, "mode": "mps", "inference": "a.json", "training": [{"profile": "b.json", "pct": 50}], "rate_rps": 8, "requests": 480, "latency_ms": {"mean": 50, "p99": 120}}`))
	f.Add([]byte(`{"latency_ms": {"p99": -1}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		o, err := ParseObservation(line)
		if err != nil {
			return
		}
		for _, j := range o.Training {
			if j.Pct < 1 || j.Pct > 100 {
				t.Fatalf("accepted pct %d", j.Pct)
			}
		}
	})
}
