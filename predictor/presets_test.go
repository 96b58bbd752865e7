package predictor

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/colocd/colocd/internal/fieldtest"
	"github.com/colocd/colocd/internal/testfiles"
)

func TestCalibrationPreset(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, device string
		wantSMs      int
		wantErr      error
	}{
		{"a100 sxm", "NVIDIA A100-SXM4-40GB", 108, nil},
		{"h100 hbm3", "NVIDIA H100 80GB HBM3", 132, nil},
		{"h200", "NVIDIA H200", 132, nil},
		{"h200 from the NVML mock", "NVIDIA H200 141GB HBM3e", 132, nil},
		{"grace hopper is not h200", "NVIDIA GH200 480GB", 0, ErrNoPreset},
		{"v100", "Tesla V100-SXM2-32GB", 0, ErrNoPreset},
		{"empty", "", 0, ErrNoPreset},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := CalibrationPreset(tt.device)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if c.Device.SMs != tt.wantSMs {
				t.Errorf("sms = %d, want %d", c.Device.SMs, tt.wantSMs)
			}
			if !strings.Contains(c.Source, "NOT fitted on measurements") {
				t.Errorf("preset source does not say it is unfitted: %q", c.Source)
			}
			if c.Timeslice == nil || c.MPS == nil || c.MPS.Params().DRAM == 0 {
				t.Errorf("preset lacks a section: %+v", c)
			}
		})
	}
}

// Every shipped preset parses and validates.
func TestEveryPresetLoads(t *testing.T) {
	t.Parallel()
	for _, fam := range PresetFamilies {
		if _, err := CalibrationPreset("NVIDIA " + strings.ToUpper(fam)); err != nil {
			t.Errorf("%s: %v", fam, err)
		}
	}
}

// TestResolveCalibration: the preset for the device, else the default; a
// file merged over it, so that its absent section keeps the preset's; a bad
// file is an error naming it, never a fallback.
func TestResolveCalibration(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string { return testfiles.Write(t, dir, name, body) }
	mpsOnly := write("mps.json", `{"format":"colocd.calibration/v1","source":"fitted here","mps":{"coefficients":{"dram":0.7}}}`)
	bad := write("bad.json", `{"format":"colocd.calibration/v1","timeslice":{"slice_us":-1,"switch_us":1,"holdover_us":1}}`)
	h200, err := CalibrationPreset("NVIDIA H200")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, device string
		wantSlice          float64
		wantDRAM           float64
		wantErr            string
	}{
		{"preset", "", "NVIDIA H200", h200.Timeslice.SliceUS, h200.MPS.Params().DRAM, ""},
		{"no preset: default", "", "Tesla V100", DefaultCalibration().Timeslice.SliceUS, 0, ""},
		{"file over preset", mpsOnly, "NVIDIA H200", h200.Timeslice.SliceUS, 0.7, ""},
		{"file over default", mpsOnly, "", DefaultCalibration().Timeslice.SliceUS, 0.7, ""},
		{"missing file", filepath.Join(dir, "none.json"), "NVIDIA H200", 0, 0, "none.json"},
		{"invalid file", bad, "NVIDIA H200", 0, 0, "timeslice.slice_us"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ResolveCalibration(tt.path, tt.device)
			if tt.wantErr != "" {
				fieldtest.WantText(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Timeslice.SliceUS != tt.wantSlice || c.MPS.Params().DRAM != tt.wantDRAM {
				t.Errorf("slice %g µs, dram %g; want %g, %g", c.Timeslice.SliceUS, c.MPS.Params().DRAM, tt.wantSlice, tt.wantDRAM)
			}
		})
	}
}

// TestPredictChoosesTheModel: Predict runs the model of its mode, and names
// what is wrong with an unknown mode or a calibration without the section.
func TestPredictChoosesTheModel(t *testing.T) {
	t.Parallel()
	sc := &Scenario{Inference: uniformProfile("inf", KindInference, 4, 100, 10), Training: []*Profile{uniformProfile("train", KindTraining, 4, 200, 5)}, Load: 0.3, Requests: 200, Seed: 1}
	cal := DefaultCalibration()
	var pr Predictor
	for _, mode := range []Mode{ModeTimeslice, ModeMPS} {
		p, err := pr.Predict(sc, mode, cal)
		if err != nil || p.Mode != mode {
			t.Errorf("%s: got %v, %v", mode, p, err)
		}
	}
	if _, err := pr.Predict(sc, "spatial", cal); err == nil || !strings.Contains(err.Error(), "mode") {
		t.Errorf("unknown mode: %v", err)
	}
	if _, err := pr.Predict(sc, ModeTimeslice, &Calibration{Format: CalibrationFormat}); err == nil || !strings.Contains(err.Error(), "timeslice") {
		t.Errorf("no timeslice section: %v", err)
	}
}

// TestMergeKeepsWhatTheFileLeavesOut: a file that names the device without
// its SM count, fits one MPS coefficient, or brings only one section keeps
// the base's other values, and its source says where they come from.
func TestMergeKeepsWhatTheFileLeavesOut(t *testing.T) {
	t.Parallel()
	base, err := CalibrationPreset("NVIDIA H100 80GB HBM3")
	if err != nil {
		t.Fatal(err)
	}
	over := &Calibration{Format: CalibrationFormat, Source: "fitted on my-h100.json (12 records)",
		Device: Device{Name: "NVIDIA H100 80GB HBM3"},
		MPS:    &MPSCalibration{Coefficients: map[string]float64{"dram": 2}}}
	got := base.Merge(over)
	if got.Device.SMs != base.Device.SMs || got.Device.Name != over.Device.Name {
		t.Errorf("device %+v, want the file's name and the preset's %d SMs", got.Device, base.Device.SMs)
	}
	want := base.MPS.Params()
	want.DRAM = 2
	if got.MPS.Params() != want {
		t.Errorf("coefficients %+v, want %+v", got.MPS.Params(), want)
	}
	if *got.Timeslice != *base.Timeslice {
		t.Errorf("timeslice %+v, want the preset's %+v", got.Timeslice, base.Timeslice)
	}
	if !strings.HasPrefix(got.Source, over.Source) || !strings.Contains(got.Source, "timeslice and mps otherwise from: "+base.Source) {
		t.Errorf("source %q does not say what the preset still gives", got.Source)
	}
	if base.MPS.Params().DRAM == 2 {
		t.Error("Merge changed its receiver")
	}
	whole := base.Merge(&Calibration{Source: "fitted", Timeslice: &TimesliceParams{SliceUS: 900, SwitchUS: 40, HoldoverUS: 200},
		MPS: &MPSCalibration{Coefficients: map[string]float64{"dram": 1, "l2": 1, "kernels": 1}}})
	if whole.Source != "fitted" {
		t.Errorf("a file with every value: source %q", whole.Source)
	}
}

// A fit's parameter intervals widen predictions, so a calibration's are
// checked like its values: every bad field named.
func TestCalibrationParametersChecked(t *testing.T) {
	t.Parallel()
	doc := `{"format":"colocd.calibration/v1","timeslice":{"slice_us":1024,"switch_us":60,"holdover_us":300},
	 "fit":{"records":1,"metrics":1,"mape":0,"evaluations":0,"parameters":[
	   {"name":"switch_us","value":60,"low":-5,"high":1e300,"pinned_by":"x"},
	   {"name":"nope","value":1,"pinned_by":"none"},
	   {"name":"slice_us","value":1024,"low":2000,"pinned_by":"records"}]},
	 "mps":{"coefficients":{"dram":0.5},"fit":{"records":1,"metrics":1,"mape":0,"evaluations":0,"parameters":[
	   {"name":"slice_us","value":0.5,"high":0.1,"pinned_by":"none"}]}}}`
	_, err := ParseCalibration([]byte(doc))
	fieldtest.WantText(t, err,
		"fit.parameters[0].low: want a finite value ≥ 0, at most the value, got -5",
		`fit.parameters[0].pinned_by: want records, prior or none, got "x"`,
		`fit.parameters[1].name: want one of slice_us, switch_us, holdover_us, got "nope"`,
		"fit.parameters[2].low: want a finite value ≥ 0, at most the value, got 2000",
		`mps.fit.parameters[0].name: want one of dram, l2, kernels, got "slice_us"`,
		"mps.fit.parameters[0].high: want a finite value, at least the value, got 0.1",
	)
}
