package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/internal/atomicfile"
)

// An operator drains a sidecar on its host (colocd drain, as colocd
// launcher add changes the launchers directory): the order is a file in
// the data directory, read at start and every launcherPoll, so it
// survives a restart and needs no key (docs/operations.md#drain).
const (
	DrainFile = "drain.json"
	// drainFileMax bounds the file: a time and a sentence.
	drainFileMax = 64 << 10
	// MaxDrainReason bounds the reason an operator gives.
	MaxDrainReason = 512
)

// DrainOrder is the drain file's content.
type DrainOrder struct {
	Since  time.Time `json:"since"`
	Reason string    `json:"reason,omitempty"`
}

// DrainPath is the drain file of a sidecar whose data directory is dir.
func DrainPath(dir string) string { return filepath.Join(dir, DrainFile) }

// WriteDrain orders the sidecar of data directory dir drained, with
// reason; a drain already in force keeps its time and takes the new
// reason. It returns the order written.
func WriteDrain(dir, reason string) (DrainOrder, error) {
	reason = strings.TrimSpace(reason)
	if len(reason) > MaxDrainReason {
		return DrainOrder{}, fmt.Errorf("--reason: %d bytes, want at most %d", len(reason), MaxDrainReason)
	}
	o := DrainOrder{Since: time.Now().UTC().Truncate(time.Second), Reason: reason}
	if old, ok, err := ReadDrain(dir); err == nil && ok {
		o.Since = old.Since
	}
	data, err := json.Marshal(o)
	if err != nil {
		return DrainOrder{}, err
	}
	if err := atomicfile.Write(DrainPath(dir), append(data, '\n'), 0o644); err != nil {
		return DrainOrder{}, fmt.Errorf("drain: %w", err)
	}
	return o, nil
}

// RemoveDrain opens the sidecar of data directory dir again; it reports
// whether it was drained.
func RemoveDrain(dir string) (bool, error) {
	err := os.Remove(DrainPath(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("undrain: %w", err)
	}
	return true, nil
}

// ReadDrain reads the drain order of data directory dir: ok is false when
// there is none.
func ReadDrain(dir string) (DrainOrder, bool, error) {
	var o DrainOrder
	err := readJSONFile(DrainPath(dir), drainFileMax, &o)
	if errors.Is(err, fs.ErrNotExist) {
		return DrainOrder{}, false, nil
	}
	if err != nil {
		return DrainOrder{}, false, err
	}
	if o.Since.IsZero() {
		return DrainOrder{}, false, fmt.Errorf("%s: since: want the time of the drain", DrainPath(dir))
	}
	if len(o.Reason) > MaxDrainReason {
		return DrainOrder{}, false, fmt.Errorf("%s: reason: %d bytes, want at most %d", DrainPath(dir), len(o.Reason), MaxDrainReason)
	}
	return o, true, nil
}

// applyDrain reads the drain file and drains or opens admission to match.
// A file that cannot be read counts as a drain: an operator meant one,
// and a sidecar that admits when told not to is the worse mistake; the
// log says why.
func (s *Sidecar) applyDrain(ctx context.Context) {
	o, ok, err := ReadDrain(s.cfg.Sidecar.DataDir)
	if err != nil {
		o, ok = DrainOrder{Since: time.Now().UTC(), Reason: "the drain file cannot be read: " + err.Error()}, true
		if err.Error() != s.drainErr {
			s.log.Error("drain: the file cannot be read; the sidecar stays drained until it can or is removed (colocd undrain)", "err", err)
			s.drainErr = err.Error()
		}
	} else {
		s.drainErr = ""
	}
	cur, drained := s.adm.Draining()
	switch {
	case ok && (!drained || cur.Reason != o.Reason || !cur.Since.Equal(o.Since)):
		evs, err := s.adm.Drain(ctx, admission.Drain{Since: o.Since, Reason: o.Reason})
		if err != nil {
			s.log.Error("drain: revoking the leases", "err", err)
		}
		if !drained {
			s.log.Warn("drained by the operator: admits are denied and the leases revoked until colocd undrain", "since", o.Since, "reason", o.Reason, "revoked", len(evs))
		}
		s.afterLeaseChange()
	case !ok && drained:
		s.adm.Undrain()
		s.log.Info("undrained by the operator: admitting again")
		s.afterLeaseChange()
	}
}

// watchDrain applies the drain file every launcherPoll.
func (s *Sidecar) watchDrain(ctx context.Context) error {
	return every(ctx, launcherPoll, func() { s.applyDrain(ctx) })
}

// checkDrain is /readyz's "draining": told, never a failure (a drained
// sidecar still guards the leases it revoked, and the inference server
// beside it serves).
func (s *Sidecar) checkDrain() error {
	if d, ok := s.adm.Draining(); ok {
		msg := "drained by the operator since " + d.Since.UTC().Format(time.RFC3339)
		if d.Reason != "" {
			msg += ": " + d.Reason
		}
		return errors.New(msg)
	}
	return nil
}
