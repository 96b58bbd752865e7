package calibrate

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/colocd/colocd/internal/strictjson"
	"github.com/colocd/colocd/predictor"
)

// ObservationFormat is the format of one line of an observations log.
const ObservationFormat = "colocd.observation/v1"

// ObservationsProfiles is the folder, inside an observations directory,
// that holds the profiles the logs name.
const ObservationsProfiles = "profiles"

// MaxObservationLine bounds one line of an observations log.
const MaxObservationLine = 64 << 10

// Observation is one window of an inference server's own metrics, with the
// training jobs that ran next to it all through the window: what a sidecar
// records, one JSON object per line, in <data_dir>/observations/<service>.jsonl.
type Observation struct {
	Format string `json:"format"`
	// Time is the end of the window; WindowS its length in seconds.
	Time    time.Time        `json:"time"`
	WindowS float64          `json:"window_s"`
	Service string           `json:"service"`
	Device  predictor.Device `json:"device"`
	Mode    predictor.Mode   `json:"mode"`
	// Inference names the service's profile in the profiles folder.
	Inference string        `json:"inference"`
	Training  []ObservedJob `json:"training"`
	// RateRPS and Requests are the window's completed requests a second,
	// and in all.
	RateRPS  float64 `json:"rate_rps"`
	Requests float64 `json:"requests"`
	// LatencyMS holds the observed mean and percentiles (keys of
	// predictor.PercentileKeys) that the window could give.
	LatencyMS map[string]float64 `json:"latency_ms"`
	// PredictedP99MS is what colocd predicted for the window.
	PredictedP99MS float64 `json:"predicted_p99_ms,omitempty"`
}

// ObservedJob is a training job of an Observation: its profile (in the
// profiles folder) and the percentage its processes ran at.
type ObservedJob struct {
	Profile string `json:"profile"`
	Pct     int    `json:"pct"`
}

// ProfileFile is the file name a profile has in an observations
// directory's profiles folder.
func ProfileFile(key predictor.ProfileKey) string { return hex.EncodeToString(key[:12]) + ".json" }

// Skipped counts the observed windows FromObservations left out, by why.
type Skipped map[string]int

// The reasons of Skipped.
const (
	SkipUnreadable = "unreadable line"
	SkipSolo       = "no training job"
	SkipMixed      = "training jobs at different percentages (a record has one)"
	SkipProfile    = "a profile missing or invalid"
	SkipDevice     = "another device than most windows'"
	SkipInvalid    = "figures out of range"
)

// FromObservations turns an observations directory (every *.jsonl log in
// it, with its profiles folder) into measurement records, one per window
// that had training jobs next to the service, all at one percentage (a
// record has one training_pct). A line that cannot be read (a log cut off
// by a crash) is skipped, like the other windows that cannot be records,
// and counted in Skipped; no window at all is an error.
func FromObservations(dir string) (*Measurements, Skipped, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("observations: %w", err)
	}
	var logs []string
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && (strings.HasSuffix(n, ".jsonl") || strings.HasSuffix(n, ".jsonl.1")) {
			logs = append(logs, filepath.Join(dir, n))
		}
	}
	m := &Measurements{Format: MeasurementsFormat}
	skipped := Skipped{}
	profiles := map[string]*ProfileRef{}
	profile := func(name string, kind predictor.Kind) *ProfileRef {
		if p, ok := profiles[name]; ok {
			return p
		}
		var ref *ProfileRef
		if filepath.Base(name) == name && strings.HasSuffix(name, ".json") {
			path, err := filepath.Abs(filepath.Join(dir, ObservationsProfiles, name))
			if q, lerr := predictor.LoadProfile(path); err == nil && lerr == nil && q.Kind == kind {
				ref = &ProfileRef{Path: path, Profile: q}
			}
		}
		profiles[name] = ref
		return ref
	}
	seen := 0
	byDevice := map[predictor.Device][]Record{}
	for _, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			return nil, nil, fmt.Errorf("observations: %w", err)
		}
		err = eachLine(f, func(line []byte) {
			seen++
			o, err := ParseObservation(line)
			if err != nil {
				skipped[SkipUnreadable]++
				return
			}
			r, why := o.record(profile)
			if why != "" {
				skipped[why]++
				return
			}
			byDevice[o.Device] = append(byDevice[o.Device], r)
		})
		f.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("observations %s: %w", path, err)
		}
	}
	// One device's records: the one most windows were observed on.
	for dev, recs := range byDevice {
		if len(recs) > len(m.Records) || len(recs) == len(m.Records) && dev.Name < m.Device.Name {
			if len(m.Records) > 0 {
				skipped[SkipDevice] += len(m.Records)
			}
			m.Device, m.Records = dev, recs
		} else {
			skipped[SkipDevice] += len(recs)
		}
	}
	if len(m.Records) == 0 {
		return nil, skipped, fmt.Errorf("observations %s: %w: %d windows, none with training jobs at one percentage and its profiles (%v)", dir, ErrNoRecords, seen, skipped)
	}
	m.Source = fmt.Sprintf("observed by colocd: %d windows of the inference servers' own metrics in %s", len(m.Records), dir)
	return m, skipped, nil
}

// eachLine calls fn with each line of r; a line longer than
// MaxObservationLine is passed on cut (and so fails to parse).
func eachLine(r io.Reader, fn func([]byte)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		for errors.Is(err, bufio.ErrBufferFull) { // too long: skip the rest
			_, err = br.ReadSlice('\n')
			line = []byte("{")
		}
		if len(bytes.TrimSpace(line)) > 0 {
			fn(line)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// ParseObservation decodes and checks one line of an observations log.
func ParseObservation(line []byte) (*Observation, error) {
	if len(line) > MaxObservationLine {
		return nil, fmt.Errorf("observation: a line of %d bytes, want at most %d", len(line), MaxObservationLine)
	}
	var o Observation
	if err := strictjson.Decode("observation", line, &o); err != nil {
		return nil, err
	}
	var c checker
	if o.Format != ObservationFormat {
		c.Add("format", fmt.Sprintf("%q", ObservationFormat), fmt.Sprintf("%q", o.Format))
	}
	if o.Mode != predictor.ModeMPS && o.Mode != predictor.ModeTimeslice {
		c.Add("mode", `"timeslice" or "mps"`, fmt.Sprintf("%q", o.Mode))
	}
	if !(o.RateRPS >= predictor.MinRateRPS && o.RateRPS <= 1e9) {
		c.Add("rate_rps", "a rate in [0.001, 1e9] req/s", fmtFloat(o.RateRPS))
	}
	if o.Device.SMs < 0 || o.Device.SMs > 100000 {
		c.Add("device.sms", "an SM count in [0, 100000] (0: unknown)", fmt.Sprint(o.Device.SMs))
	}
	if len(o.Training) > 64 {
		c.Add("training", "at most 64 jobs", fmt.Sprint(len(o.Training)))
	}
	for i, j := range o.Training {
		if j.Pct < 1 || j.Pct > 100 {
			c.Add(fmt.Sprintf("training[%d].pct", i), "a percentage in [1, 100]", fmt.Sprint(j.Pct))
		}
	}
	checkPercentileMap(&c, "latency_ms", o.LatencyMS)
	if len(o.LatencyMS) == 0 {
		c.Add("latency_ms", "at least one observed figure", "none")
	}
	if err := c.Err("observation"); err != nil {
		return nil, err
	}
	return &o, nil
}

// record is the observation as a measurement record, or why it cannot be
// one.
func (o *Observation) record(profile func(string, predictor.Kind) *ProfileRef) (Record, string) {
	if len(o.Training) == 0 {
		return Record{}, SkipSolo
	}
	pct := o.Training[0].Pct
	for _, j := range o.Training[1:] {
		if j.Pct != pct {
			return Record{}, SkipMixed
		}
	}
	inf := profile(o.Inference, predictor.KindInference)
	if inf == nil {
		return Record{}, SkipProfile
	}
	r := Record{Name: fmt.Sprintf("%s@%s", o.Service, o.Time.UTC().Format(time.RFC3339)), Mode: o.Mode, Inference: *inf,
		RateRPS: o.RateRPS, Measured: Measured{LatencyMS: o.LatencyMS}}
	if o.Mode == predictor.ModeMPS {
		r.TrainingPct = float64(pct)
	}
	for _, j := range o.Training {
		p := profile(j.Profile, predictor.KindTraining)
		if p == nil {
			return Record{}, SkipProfile
		}
		r.Training = append(r.Training, *p)
	}
	var c checker
	r.check(&c, "record", "")
	if c.Err("record") != nil {
		return Record{}, SkipInvalid
	}
	return r, ""
}
