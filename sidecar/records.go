package sidecar

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/predictor"
	"github.com/colocd/colocd/predictor/calibrate"
)

// Bounds of the observations directory.
const (
	// maxObservationLog is one service's log; past it the log moves to
	// <service>.jsonl.1 (the one before is dropped), so a service keeps at
	// most twice this (some 20,000 one-minute windows).
	maxObservationLog = 4 << 20
	// maxObservedProfiles bounds the profiles folder, across restarts; a
	// window whose job's profile would be one more is not recorded.
	maxObservedProfiles = 256
)

// logName is the form of a service name that may name a file.
var logName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// observationLog records, for each service, one window in each span of its
// metrics window in which the leases did not change (a measurement), with
// the jobs that ran: <data_dir>/observations/<service>.jsonl, one
// calibrate.Observation a line, and the profiles they name in profiles/.
// `colocd calibrate --from-observations` turns them into measurements. It
// is used by the guard loop alone.
type observationLog struct {
	dir    string
	device predictor.Device
	log    *slog.Logger

	last     map[string]time.Time // per service: the end of the window last recorded
	profiles map[predictor.ProfileKey]string
	files    map[string]bool // the profiles folder's files, read once
	failed   bool            // a write failed: logged once until one succeeds
}

func newObservationLog(dataDir string, device predictor.Device, log *slog.Logger) *observationLog {
	return &observationLog{dir: filepath.Join(dataDir, "observations"), device: device, log: log,
		last: map[string]time.Time{}, profiles: map[predictor.ProfileKey]string{}}
}

// record writes m, the service's latest measurement, unless its window
// overlaps the one recorded before. An engine's windows are not written:
// their figures are steps', and an observation (colocd.observation/v1)
// is a request service's, which calibrate fits as Poisson requests.
func (r *observationLog) record(svc admission.ServiceSpec, m admission.Measurement) {
	if svc.BurstSteps > 0 || !logName.MatchString(svc.Name) || m.Window.Since.Before(r.last[svc.Name]) {
		return
	}
	o := calibrate.Observation{Format: calibrate.ObservationFormat, Time: m.Window.End.UTC(), WindowS: m.Window.End.Sub(m.Window.Since).Seconds(),
		Service: svc.Name, Device: r.device, Mode: m.Mode, RateRPS: m.Window.RateRPS, Requests: m.Window.Requests,
		LatencyMS: map[string]float64{}, PredictedP99MS: m.PredictedP99MS}
	for k, v := range map[string]float64{"mean": m.Window.MeanMS, "p50": m.Window.P50MS, "p90": m.Window.P90MS, "p99": m.Window.P99MS} {
		if v > 0 && !math.IsInf(v, 0) {
			o.LatencyMS[k] = v
		}
	}
	var err error
	if o.Inference, err = r.profile(svc.Profile, svc.Key); err == nil {
		for _, t := range m.Trainers {
			var name string
			if name, err = r.profile(t.Profile, t.Key); err != nil {
				break
			}
			o.Training = append(o.Training, calibrate.ObservedJob{Profile: name, Pct: t.Pct})
		}
	}
	if err == nil {
		err = r.append(svc.Name, o)
	}
	if err != nil {
		if !r.failed {
			r.log.Warn("record an observed window (later failures are not logged)", "service", svc.Name, "err", err)
		}
		r.failed = true
		return
	}
	r.last[svc.Name] = m.Window.End
	r.failed = false
}

// profile returns the file name of p in profiles/, writing it once.
func (r *observationLog) profile(p *predictor.Profile, key predictor.ProfileKey) (string, error) {
	if key == (predictor.ProfileKey{}) {
		key = p.Key()
	}
	if name, ok := r.profiles[key]; ok {
		return name, nil
	}
	name := calibrate.ProfileFile(key)
	folder := filepath.Join(r.dir, calibrate.ObservationsProfiles)
	if r.files == nil { // what earlier runs wrote counts against the bound
		r.files = map[string]bool{}
		entries, err := os.ReadDir(folder)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		for _, e := range entries {
			r.files[e.Name()] = true
		}
	}
	if !r.files[name] {
		if len(r.files) >= maxObservedProfiles {
			return "", fmt.Errorf("the observations folder holds %d profiles already, the most it keeps", maxObservedProfiles)
		}
		if err := os.MkdirAll(folder, 0o755); err != nil {
			return "", err
		}
		if err := predictor.SaveProfile(filepath.Join(folder, name), p); err != nil {
			return "", err
		}
		r.files[name] = true
	}
	r.profiles[key] = name
	return name, nil
}

// append adds o to the service's log, moving a full log aside first.
func (r *observationLog) append(service string, o calibrate.Observation) error {
	line, err := json.Marshal(o)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	path := filepath.Join(r.dir, service+".jsonl")
	if st, err := os.Stat(path); err == nil && st.Size()+int64(len(line)) > maxObservationLog {
		if err := os.Rename(path, path+".1"); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	// A line cut off by a crash is ended first, so that it costs only itself.
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err == nil && last[0] != '\n' {
			line = append([]byte{'\n'}, line...)
		}
	}
	_, err = f.Write(line)
	return errors.Join(err, f.Close())
}
