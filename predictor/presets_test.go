package predictor

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCalibrationPreset(t *testing.T) {
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
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
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
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tt.wantErr)
				}
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
