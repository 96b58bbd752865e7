package predictor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/colocd/colocd/internal/atomicfile"
	"github.com/colocd/colocd/internal/strictjson"
)

// The predictor's documents (profiles, calibrations) are parsed, loaded and
// saved alike: decoded strictly and validated, with errors that name the
// document and, once it is read, its file.

// parseDocument decodes data as a what ("profile", …) and validates it.
// Unknown keys are errors, so that a misspelt key is caught instead of
// silently ignored.
func parseDocument[T any, PT interface {
	*T
	Validate() error
}](what string, data []byte) (*T, error) {
	var v T
	if err := strictjson.Decode(what, data, &v); err != nil {
		return nil, err
	}
	if err := PT(&v).Validate(); err != nil {
		return nil, err
	}
	return &v, nil
}

// loadDocument reads the what at path and parses it with parse.
func loadDocument[T any](what, path string, parse func([]byte) (*T, error)) (*T, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", what, err)
	}
	v, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("load %s %s: %w", what, path, err)
	}
	return v, nil
}

// saveDocument validates the what v and writes it to path atomically.
func saveDocument(what, path string, v interface{ Validate() error }) error {
	if err := v.Validate(); err != nil {
		return fmt.Errorf("save %s: %w", what, err)
	}
	return writeJSONAtomic(path, v)
}

// writeJSONAtomic writes v as indented JSON to path, whole or not at all.
func writeJSONAtomic(path string, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // kernel names are full of < and >
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return atomicfile.Write(path, buf.Bytes(), 0o644) // profiles are shared files
}

// FileCheck is what CheckProfiles found of one file.
type FileCheck struct {
	File  string `json:"file"`
	OK    bool   `json:"ok"`
	Name  string `json:"name,omitempty"`
	Kind  string `json:"kind,omitempty"`
	Error string `json:"error,omitempty"`
}

// CheckProfiles loads each profile file and says whether it is valid, in
// order, and how many are not.
func CheckProfiles(paths []string) (checks []FileCheck, failed int) {
	for _, path := range paths {
		p, err := LoadProfile(path)
		if err != nil {
			failed++
			checks = append(checks, FileCheck{File: path, Error: err.Error()})
			continue
		}
		checks = append(checks, FileCheck{File: path, OK: true, Name: p.Name, Kind: string(p.Kind)})
	}
	return checks, failed
}
