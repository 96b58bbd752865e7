package configs

import (
	"errors"
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
