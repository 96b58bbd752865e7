package sidecar

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/internal/atomicfile"
	"github.com/colocd/colocd/internal/strictjson"
)

// What the guard learned of the servers' response to training
// (admission.learn_response) is kept in the data directory, so that a
// restart starts from the measurement instead of from min_pct again
// (docs/guard.md#the-learned-response).
const (
	learnedFile = "learned-response.json"
	// learnedFileMax bounds the file's size: admission.MaxResponsePoints
	// points of a few hundred bytes each.
	learnedFileMax = 8 << 20
	learnedVersion = 1
)

// learnedDoc is the file's content.
type learnedDoc struct {
	Version int                       `json:"version"`
	Points  []admission.ResponsePoint `json:"points"`
}

func (s *Sidecar) learnedPath() string { return filepath.Join(s.cfg.Sidecar.DataDir, learnedFile) }

// restoreLearned gives admission what an earlier run learned. A file
// that cannot be read back is set aside as <file>.bad, and said, so that
// the next save does not overwrite what someone may want to look at; the
// sidecar starts all the same, learning again.
func (s *Sidecar) restoreLearned() {
	path := s.learnedPath()
	points, err := readLearned(path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var n int
	if err == nil {
		n, err = s.adm.RestoreResponse(points)
	}
	if err != nil {
		bad := path + ".bad"
		if rerr := os.Rename(path, bad); rerr != nil {
			bad = path
		}
		s.log.Warn("the guard's learned response was not restored; it learns again", "file", bad, "err", err)
		return
	}
	s.learnedSaved = learnedMark(points)
	s.log.Info("restored the guard's learned response", "file", path, "points", n)
}

// readLearned reads the file at path.
func readLearned(path string) ([]admission.ResponsePoint, error) {
	var doc learnedDoc
	if err := readJSONFile(path, learnedFileMax, &doc); err != nil {
		return nil, err
	}
	if doc.Version != learnedVersion {
		return nil, fmt.Errorf("%s: version %d, want %d", path, doc.Version, learnedVersion)
	}
	return doc.Points, nil
}

// readJSONFile decodes the file at path, at most max bytes, strictly into
// v; a missing file is fs.ErrNotExist.
func readJSONFile(path string, max int64, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return err
	}
	if int64(len(data)) > max {
		return fmt.Errorf("%s: over %d bytes", path, max)
	}
	return strictjson.Decode(path, data, v)
}

// saveLearned writes what admission learned when it changed since the
// last save (or restore): once per window learned, not once per tick.
func (s *Sidecar) saveLearned() {
	points := s.adm.Response()
	mark := learnedMark(points)
	if mark == s.learnedSaved {
		return
	}
	data, err := json.MarshalIndent(learnedDoc{Version: learnedVersion, Points: points}, "", "  ")
	if err == nil {
		err = atomicfile.Write(s.learnedPath(), append(data, '\n'), 0o600)
	}
	if err != nil {
		s.log.Warn("could not save the guard's learned response", "file", s.learnedPath(), "err", err)
		return
	}
	s.learnedSaved = mark
}

// learnedMark changes whenever a point is learned: how many there are and
// how many windows they were learned from.
func learnedMark(points []admission.ResponsePoint) [2]int {
	w := 0
	for _, p := range points {
		w += p.Windows
	}
	return [2]int{len(points), w}
}
