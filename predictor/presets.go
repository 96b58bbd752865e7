package predictor

import (
	"embed"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

//go:embed presets/*.json
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
// merged over the built-in default. None of the presets is fitted on
// measurements; each says so in its source.
func CalibrationPreset(device string) (*Calibration, error) {
	fam := presetFamily.FindString(strings.ToLower(device))
	if fam == "" {
		return nil, fmt.Errorf("%w: %q (presets: %s)", ErrNoPreset, device, strings.Join(PresetFamilies, ", "))
	}
	data, err := presetFiles.ReadFile("presets/" + fam + ".json")
	if err != nil {
		return nil, fmt.Errorf("read preset %s: %w", fam, err)
	}
	c, err := ParseCalibration(data)
	if err != nil {
		return nil, fmt.Errorf("preset %s: %w", fam, err)
	}
	return DefaultCalibration().Merge(c), nil
}

// ResolveCalibration is the one rule for which calibration a prediction
// uses: the preset for the device's family, else the built-in default; and
// when path is set, that file merged over it, so that a file with only a
// timeslice or only an mps section keeps the preset's values for the other.
// A file that cannot be read or is invalid is an error, never a silent
// fallback; so is a shipped preset that does not load.
func ResolveCalibration(path, device string) (*Calibration, error) {
	base, err := CalibrationPreset(device)
	switch {
	case errors.Is(err, ErrNoPreset):
		base = DefaultCalibration()
	case err != nil:
		return nil, fmt.Errorf("resolve calibration: %w", err)
	}
	if path == "" {
		return base, nil
	}
	c, err := readCalibration(path)
	if err != nil {
		return nil, err
	}
	return base.Merge(c), nil
}
