package calibrate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/colocd/colocd/predictor"

	"github.com/colocd/colocd/internal/strictjson"
)

// MeasurementsFormat is the format string of a measurements document.
const MeasurementsFormat = "colocd.measurements/v1"

// Measurements is a set of measured co-location runs on one device
// (colocd.measurements/v1), the input of calibration.
type Measurements struct {
	Format string `json:"format"`
	// Source says how the records were obtained (hardware, harness, or
	// generated): nothing synthetic may pose as measured.
	Source  string           `json:"source,omitempty"`
	Device  predictor.Device `json:"device"`
	Records []Record         `json:"records"`
}

// Record is one measured co-location run.
type Record struct {
	Name      string         `json:"name"`
	Mode      predictor.Mode `json:"mode"`
	Inference ProfileRef     `json:"inference"`
	Training  []ProfileRef   `json:"training"`
	RateRPS   float64        `json:"rate_rps"`
	// TrainingPct is the training clients' MPS active-thread percentage and
	// InferencePct the inference server's (0: 100); MPS records only.
	TrainingPct  float64 `json:"training_pct,omitempty"`
	InferencePct float64 `json:"inference_pct,omitempty"`
	// Requests and Seed, when set, replace the calibration's defaults for
	// this record's simulation.
	Requests int      `json:"requests,omitempty"`
	Seed     uint64   `json:"seed,omitempty"`
	Measured Measured `json:"measured"`
}

// Measured holds what was observed. Any subset of the percentile keys may be
// present; missing ones are skipped by the fit, never taken as zero.
type Measured struct {
	LatencyMS map[string]float64 `json:"latency_ms,omitempty"`
	ServiceMS map[string]float64 `json:"service_ms,omitempty"`
	// TrainingIterationMS is one iteration time per training job, in order;
	// a single number is accepted for one job.
	TrainingIterationMS FloatList `json:"training_iteration_ms,omitempty"`
}

// FloatList is a JSON number or array of numbers.
type FloatList []float64

// UnmarshalJSON accepts a number or an array of numbers.
func (f *FloatList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var xs []float64
		if err := json.Unmarshal(b, &xs); err != nil {
			return err
		}
		*f = xs
		return nil
	}
	var x float64
	if err := json.Unmarshal(b, &x); err != nil {
		return err
	}
	*f = FloatList{x}
	return nil
}

// ProfileRef is a profile given inline or as a path relative to the
// measurements file.
type ProfileRef struct {
	Path    string             `json:"-"`
	Profile *predictor.Profile `json:"-"`
}

// UnmarshalJSON accepts a path string or an inline profile object.
func (r *ProfileRef) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &r.Path)
	}
	var p predictor.Profile
	if err := strictjson.Decode("profile", b, &p); err != nil {
		return err
	}
	r.Profile = &p
	return nil
}

// MarshalJSON writes the path, or the inline profile.
func (r ProfileRef) MarshalJSON() ([]byte, error) {
	if r.Profile != nil && r.Path == "" {
		return json.Marshal(r.Profile)
	}
	return json.Marshal(r.Path)
}

// ParseMeasurements decodes and validates a measurements document; relative
// profile paths are resolved against dir and loaded.
func ParseMeasurements(data []byte, dir string) (*Measurements, error) {
	var m Measurements
	if err := strictjson.Decode("measurements", data, &m); err != nil {
		return nil, err
	}
	if err := m.validate(dir); err != nil {
		return nil, err
	}
	return &m, nil
}

// LoadMeasurements reads, validates and resolves the measurements at path.
func LoadMeasurements(path string) (*Measurements, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load measurements: %w", err)
	}
	m, err := ParseMeasurements(data, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("load measurements %s: %w", path, err)
	}
	return m, nil
}

func (m *Measurements) validate(dir string) error {
	var c checker
	if m.Format != MeasurementsFormat {
		c.Add("format", fmt.Sprintf("%q", MeasurementsFormat), fmt.Sprintf("%q", m.Format))
	}
	if len(m.Records) == 0 {
		c.Add("records", "at least one record", "none")
	}
	if m.Device.SMs < 0 {
		c.Add("device.sms", "an SM count ≥ 0 (0: unknown)", fmt.Sprint(m.Device.SMs))
	}
	for i := range m.Records {
		m.Records[i].check(&c, fmt.Sprintf("records[%d]", i), dir)
	}
	return c.Err("measurements")
}

func (r *Record) check(c *checker, at, dir string) {
	if r.Name == "" {
		c.Add(at+".name", "a non-empty name", `""`)
	}
	if r.Mode != predictor.ModeTimeslice && r.Mode != predictor.ModeMPS {
		c.Add(at+".mode", `"timeslice" or "mps"`, fmt.Sprintf("%q", r.Mode))
	}
	r.Inference.resolve(c, at+".inference", dir, predictor.KindInference)
	for i := range r.Training {
		r.Training[i].resolve(c, fmt.Sprintf("%s.training[%d]", at, i), dir, predictor.KindTraining)
	}
	if !(r.RateRPS >= predictor.MinRateRPS && r.RateRPS <= 1e9) {
		c.Add(at+".rate_rps", "a rate in [0.001, 1e9] req/s", fmtFloat(r.RateRPS))
	}
	if r.Mode == predictor.ModeMPS && !(r.TrainingPct > 0 && r.TrainingPct <= 100) {
		c.Add(at+".training_pct", "an active-thread percentage in (0,100]", fmtFloat(r.TrainingPct))
	}
	if !(r.InferencePct >= 0 && r.InferencePct <= 100) {
		c.Add(at+".inference_pct", "an active-thread percentage in (0,100] (0 or absent: 100)", fmtFloat(r.InferencePct))
	}
	if r.Requests < 0 {
		c.Add(at+".requests", "a count ≥ 1 (0: the default)", fmt.Sprint(r.Requests))
	}
	checkPercentileMap(c, at+".measured.latency_ms", r.Measured.LatencyMS)
	checkPercentileMap(c, at+".measured.service_ms", r.Measured.ServiceMS)
	it := r.Measured.TrainingIterationMS
	if len(it) > 0 && len(it) != len(r.Training) {
		c.Add(at+".measured.training_iteration_ms", fmt.Sprintf("one iteration time per training job (%d)", len(r.Training)), fmt.Sprintf("%d values", len(it)))
	}
	for i, v := range it {
		c.positive(fmt.Sprintf("%s.measured.training_iteration_ms[%d]", at, i), v)
		if i < len(r.Training) && r.Training[i].Profile != nil && !r.Training[i].Profile.IterationKnown() {
			c.Add(fmt.Sprintf("%s.measured.training_iteration_ms[%d]", at, i), "no value: the training profile has no iteration (a summary without iteration_ms), so none is predicted", fmtFloat(v))
		}
	}
	if len(r.Measured.LatencyMS) == 0 && len(r.Measured.ServiceMS) == 0 && len(it) == 0 {
		c.Add(at+".measured", "at least one of latency_ms, service_ms, training_iteration_ms", "none")
	}
}

func checkPercentileMap(c *checker, at string, m map[string]float64) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(predictor.PercentileKeys, k) {
			c.Add(at+"."+k, "one of mean, p50, p90, p95, p99", fmt.Sprintf("%q", k))
			continue
		}
		c.positive(at+"."+k, m[k])
	}
}

// resolve loads a path reference and checks the profile's kind.
func (r *ProfileRef) resolve(c *checker, at, dir string, kind predictor.Kind) {
	switch {
	case r.Profile == nil && r.Path == "":
		c.Add(at, "a profile path or an inline profile", "nothing")
		return
	case r.Profile == nil:
		path := r.Path
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		p, err := predictor.LoadProfile(path)
		if err != nil {
			c.Add(at, "a readable, valid profile", err.Error())
			return
		}
		r.Profile = p
	default:
		if err := r.Profile.Validate(); err != nil {
			c.Add(at, "a valid inline profile", err.Error())
			return
		}
	}
	if r.Profile.Kind != kind {
		c.Add(at+".kind", fmt.Sprintf("%q", kind), fmt.Sprintf("%q", r.Profile.Kind))
	}
}

// metric is one measured value of one record that a prediction is scored on.
type metric struct {
	record   int
	quantity string // "latency_ms", "service_ms" or "training_iteration_ms"
	key      string // percentile key for latency and service
	job      int    // training job index for training_iteration_ms
	value    float64
}

// field names the metric as it appears in the measurements file.
func (m metric) field() string {
	if m.quantity == "training_iteration_ms" {
		return fmt.Sprintf("training_iteration_ms[%d]", m.job)
	}
	return m.quantity + "." + m.key
}

// metrics lists what the record measured, in a fixed order.
func (r *Record) metrics(i int) []metric {
	var out []metric
	for _, k := range predictor.PercentileKeys {
		if v, ok := r.Measured.LatencyMS[k]; ok {
			out = append(out, metric{record: i, quantity: "latency_ms", key: k, value: v})
		}
	}
	for _, k := range predictor.PercentileKeys {
		if v, ok := r.Measured.ServiceMS[k]; ok {
			out = append(out, metric{record: i, quantity: "service_ms", key: k, value: v})
		}
	}
	for j, v := range r.Measured.TrainingIterationMS {
		out = append(out, metric{record: i, quantity: "training_iteration_ms", job: j, value: v})
	}
	return out
}

// predicted returns the prediction's value of the metric, NaN when the
// prediction has none (a stream trainer has no iteration time).
func (m metric) predicted(p *predictor.Prediction) float64 {
	return m.of(p, p.Inference.LatencyMS, p.Inference.ServiceMS, func(t predictor.TrainingPrediction) *float64 { return t.IterationMS })
}

// of is m's value among a prediction's figures: latency or service, or the
// iteration of m's training job (iter of it); NaN when there is none.
func (m metric) of(p *predictor.Prediction, latency, service predictor.Percentiles, iter func(predictor.TrainingPrediction) *float64) float64 {
	switch m.quantity {
	case "latency_ms":
		v, _ := latency.Get(m.key)
		return v
	case "service_ms":
		v, _ := service.Get(m.key)
		return v
	}
	if m.job < len(p.Training) {
		if v := iter(p.Training[m.job]); v != nil {
			return *v
		}
	}
	return math.NaN()
}
