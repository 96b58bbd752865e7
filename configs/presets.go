package configs

import (
	"embed"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/colocd/colocd/predictor"
)

//go:embed calibration/*.json
var presetFiles embed.FS

// ErrNoPreset is returned when no preset matches a device name.
var ErrNoPreset = errors.New("no calibration preset for this device")

// presetFamily finds the GPU family in a device name as NVML or PyTorch
// reports it ("NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3"); "GH200"
// and other longer words do not match.
var presetFamily = regexp.MustCompile(`\b(a100|h100|h200)\b`)

// PresetFamilies lists the GPU families with a shipped preset.
var PresetFamilies = []string{"a100", "h100", "h200"}

// CalibrationPreset returns the shipped calibration for the device's family,
// merged over the predictor's built-in default. None of the presets is
// fitted on measurements; each says so in its source.
func CalibrationPreset(device string) (*predictor.Calibration, error) {
	fam := presetFamily.FindString(strings.ToLower(device))
	if fam == "" {
		return nil, fmt.Errorf("%w: %q (presets: %s)", ErrNoPreset, device, strings.Join(PresetFamilies, ", "))
	}
	data, err := presetFiles.ReadFile("calibration/" + fam + ".json")
	if err != nil {
		return nil, fmt.Errorf("read preset %s: %w", fam, err)
	}
	c, err := predictor.ParseCalibration(data)
	if err != nil {
		return nil, fmt.Errorf("preset %s: %w", fam, err)
	}
	return predictor.DefaultCalibration().Merge(c), nil
}
