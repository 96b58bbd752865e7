package predictor

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
)

// CalibrationFormat is the format string of a calibration document.
const CalibrationFormat = "colocd.calibration/v1"

// Calibration holds a device's fitted model parameters (colocd.calibration/v1).
// A file may hold only some sections; Merge keeps the base's values for the rest.
type Calibration struct {
	Format string `json:"format"`
	Device Device `json:"device"`
	// Source says where the values come from; values not fitted on real
	// measurements must say so here.
	Source    string           `json:"source"`
	Timeslice *TimesliceParams `json:"timeslice,omitempty"`
	MPS       *MPSCalibration  `json:"mps,omitempty"`
	Fit       *FitReport       `json:"fit,omitempty"`
	// Blend mixes the time-slicing simulator with the naive slowdown, as
	// the fit's cross-validation chose (absent: the simulator alone).
	Blend *Blend `json:"blend,omitempty"`
}

// MPSCalibration holds the MPS model's stage-2 contention coefficients by
// feature (dram, l2, kernels) and, when fitted, the fit's report.
type MPSCalibration struct {
	Coefficients map[string]float64 `json:"coefficients"`
	Fit          *FitReport         `json:"fit,omitempty"`
	// Blend mixes the MPS simulator with the naive slowdown (absent: the
	// simulator alone).
	Blend *Blend `json:"blend,omitempty"`
}

// DefaultCalibration is the built-in fallback when no calibration is given.
// It is not fitted on measurements, and says so.
func DefaultCalibration() *Calibration {
	return &Calibration{
		Format: CalibrationFormat,
		Source: "built-in default, not fitted on measurements: slice_us is the open-source NVIDIA " +
			"kernel driver's default time slice (1024 µs); switch_us and holdover_us are placeholders " +
			"of the magnitude reported for NVIDIA GPUs. Run `colocd calibrate` on your device.",
		Timeslice: &TimesliceParams{SliceUS: 1024, SwitchUS: 60, HoldoverUS: 500},
	}
}

// Validate names every bad field.
func (c *Calibration) Validate() error {
	var fc fieldChecker
	if c.Format != CalibrationFormat {
		fc.add("format", fmt.Sprintf("%q", CalibrationFormat), fmt.Sprintf("%q", c.Format))
	}
	if c.Device.SMs < 0 {
		fc.add("device.sms", "an SM count ≥ 0 (0: unknown)", fmt.Sprint(c.Device.SMs))
	}
	if c.Timeslice == nil && c.MPS == nil {
		fc.add("timeslice", "a timeslice or an mps section", "neither")
	}
	if c.Timeslice != nil {
		if err := c.Timeslice.Validate(); err != nil {
			fc.Nested("", err)
		}
	}
	if c.MPS != nil {
		keys := make([]string, 0, len(c.MPS.Coefficients))
		for k := range c.MPS.Coefficients {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !slices.Contains(MPSFeatures, k) {
				fc.add("mps.coefficients."+k, "one of dram, l2, kernels", fmt.Sprintf("%q", k))
				continue
			}
			if v := c.MPS.Coefficients[k]; !(v >= 0 && v <= MaxCoefficient) {
				fc.add("mps.coefficients."+k, "a coefficient in [0, 1000]", fmtFloat(v))
			}
		}
	}
	// A fit's parameter intervals widen predictions: checked like the values.
	if c.Fit != nil {
		checkParameters(&fc, "fit.parameters", c.Fit.Parameters, []string{"slice_us", "switch_us", "holdover_us"})
	}
	if c.MPS != nil && c.MPS.Fit != nil {
		checkParameters(&fc, "mps.fit.parameters", c.MPS.Fit.Parameters, MPSFeatures)
	}
	// A blend belongs to its mode's section: it moves every prediction.
	if c.Blend != nil {
		if c.Timeslice == nil {
			fc.add("blend", "a blend only beside a timeslice section", "a blend and no timeslice")
		}
		c.Blend.check(&fc, "blend")
	}
	if c.MPS != nil && c.MPS.Blend != nil {
		c.MPS.Blend.check(&fc, "mps.blend")
	}
	return fc.err("calibration")
}

// checkParameters names every parameter report that is not one of names
// with a finite value ≥ 0 inside its finite interval and a known pinned_by.
func checkParameters(fc *fieldChecker, at string, ps []ParameterFit, names []string) {
	finite := func(v float64) bool { return v >= 0 && v <= math.MaxFloat64 }
	for i, p := range ps {
		f := fmt.Sprintf("%s[%d]", at, i)
		if !slices.Contains(names, p.Name) {
			fc.add(f+".name", "one of "+strings.Join(names, ", "), fmt.Sprintf("%q", p.Name))
		}
		if !finite(p.Value) {
			fc.add(f+".value", "a finite value ≥ 0", fmtFloat(p.Value))
		}
		if p.Low != nil && !(finite(*p.Low) && *p.Low <= p.Value) {
			fc.add(f+".low", "a finite value ≥ 0, at most the value", fmtFloat(*p.Low))
		}
		if p.High != nil && !(finite(*p.High) && *p.High >= p.Value) {
			fc.add(f+".high", "a finite value, at least the value", fmtFloat(*p.High))
		}
		if !slices.Contains([]string{PinnedByRecords, PinnedByPrior, PinnedByNone}, p.PinnedBy) {
			fc.add(f+".pinned_by", "records, prior or none", fmt.Sprintf("%q", p.PinnedBy))
		}
	}
}

// Merge returns c with what over sets laid over it, so that what over
// leaves out keeps c's value: the device's name and SM count one by one, the
// timeslice section whole (with its fit report and blend), and the MPS
// coefficients one by one (the fit report and blend with the section that
// brings them). When over brings a source but leaves a section to c, the
// source says where that section comes from, so that values not fitted on
// measurements still say so.
func (c *Calibration) Merge(over *Calibration) *Calibration {
	out := *c
	if over.Device.Name != "" {
		out.Device.Name = over.Device.Name
	}
	if over.Device.SMs > 0 {
		out.Device.SMs = over.Device.SMs
	}
	if over.Timeslice != nil {
		out.Timeslice, out.Fit, out.Blend = over.Timeslice, over.Fit, over.Blend
	}
	if over.MPS != nil {
		m := MPSCalibration{Coefficients: maps.Clone(over.MPS.Coefficients), Fit: over.MPS.Fit, Blend: over.MPS.Blend}
		if c.MPS != nil {
			m.Coefficients = maps.Clone(c.MPS.Coefficients)
			maps.Copy(m.Coefficients, over.MPS.Coefficients)
		}
		out.MPS = &m
	}
	if over.Source != "" {
		var kept []string
		if over.Timeslice == nil && c.Timeslice != nil {
			kept = append(kept, "timeslice")
		}
		if c.MPS != nil && (over.MPS == nil || len(over.MPS.Coefficients) < len(MPSFeatures)) {
			kept = append(kept, "mps")
		}
		out.Source = over.Source
		if len(kept) > 0 && c.Source != "" {
			out.Source += "; " + strings.Join(kept, " and ") + " otherwise from: " + c.Source
		}
	}
	return &out
}

// ParseCalibration decodes and validates a calibration document.
func ParseCalibration(data []byte) (*Calibration, error) {
	return parseDocument[Calibration]("calibration", data)
}

// LoadCalibration reads the calibration at path and merges it over the
// built-in default, so a file with only some sections is complete.
// ResolveCalibration merges it over the device's preset instead.
func LoadCalibration(path string) (*Calibration, error) {
	c, err := readCalibration(path)
	if err != nil {
		return nil, err
	}
	return DefaultCalibration().Merge(c), nil
}

// readCalibration reads and validates the calibration file at path.
func readCalibration(path string) (*Calibration, error) {
	return loadDocument("calibration", path, ParseCalibration)
}

// SaveCalibration validates c and writes it atomically.
func SaveCalibration(path string, c *Calibration) error { return saveDocument("calibration", path, c) }

// FitReport says how well calibrated parameters reproduce the measurements.
type FitReport struct {
	Records int `json:"records"`
	Metrics int `json:"metrics"`
	// MAPE is the mean absolute percentage error (a fraction) of the fitted
	// model over every measured metric.
	MAPE float64 `json:"mape"`
	// CVMAPE is the same error on each record predicted by a fit that never
	// saw its training workload (CV says "leave-one-workload-out"), or, for
	// time slicing with one workload, never saw the record
	// ("leave-one-record-out"); absent when there is nothing to leave out.
	CVMAPE *float64 `json:"cv_mape,omitempty"`
	CV     string   `json:"cv,omitempty"`
	// Unidentified lists parameters that even a ±50 % change does not
	// visibly move: the measurements cannot tell their value.
	Unidentified []string `json:"unidentified,omitempty"`
	Evaluations  int      `json:"evaluations"`
	// Weights are the objective's weight of each metric key, Seeds the
	// arrival seeds each record was simulated with (their mean compared).
	Weights map[string]float64 `json:"weights,omitempty"`
	Seeds   int                `json:"seeds,omitempty"`
	// Prior is the prior each parameter was fitted under (absent: none).
	Prior map[string]PriorTerm `json:"prior,omitempty"`
	// Parameters say how well the records pin each fitted parameter.
	Parameters []ParameterFit `json:"parameters,omitempty"`
	// Warnings say why the fit may not be trusted (too few records for its
	// parameters).
	Warnings  []string    `json:"warnings,omitempty"`
	PerRecord []RecordFit `json:"per_record,omitempty"`
}

// PriorTerm is a log-normal prior on one parameter: its median and the
// standard deviation of its logarithm.
type PriorTerm struct {
	Centre float64 `json:"centre"`
	LogSD  float64 `json:"log_sd"`
}

// How a fitted parameter is pinned (ParameterFit.PinnedBy).
const (
	PinnedByRecords = "records" // the records narrow it well inside the prior
	PinnedByPrior   = "prior"   // the records say little: the prior sets it
	PinnedByNone    = "none"    // neither: any value in a wide range fits
)

// ParameterFit is one fitted parameter with its 95 % profile-likelihood
// interval: the values at which the best fit of the other parameters is
// still as likely, given the records' residual error.
type ParameterFit struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	// Low and High bound the interval; absent, it reaches the end of the
	// range searched (a factor of 8) on that side.
	Low      *float64 `json:"low,omitempty"`
	High     *float64 `json:"high,omitempty"`
	PinnedBy string   `json:"pinned_by"`
}

// RecordFit is one record's measured and predicted metrics.
type RecordFit struct {
	Name    string      `json:"name"`
	Metrics []MetricFit `json:"metrics"`
}

// MetricFit compares one measured value with the fitted model's prediction
// and, when cross-validated, with the prediction of the fit that left the
// record out; Naive and CVNaive are the naive slowdown's, with ratios
// fitted on every record and on the records of the other folds (written
// when the fit chose a blend: Blend.BlendedFit reads them).
type MetricFit struct {
	Field       string   `json:"field"`
	Measured    float64  `json:"measured"`
	Predicted   float64  `json:"predicted"`
	CVPredicted *float64 `json:"cv_predicted,omitempty"`
	Naive       *float64 `json:"naive,omitempty"`
	CVNaive     *float64 `json:"cv_naive,omitempty"`
}
