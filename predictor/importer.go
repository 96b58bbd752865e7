package predictor

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Importer is one outside format's way to a profile, for its package's
// ImportFile and Import: the options are checked before any input is read,
// the input parsed to a T, and the profile built of it.
type Importer[T any] struct {
	// What names the format in errors ("kineto trace").
	What string
	// Check validates the importer's options.
	Check func() error
	// Parse reads the input.
	Parse func(r io.Reader) (T, error)
	// Build makes the profile of what Parse read; base is the file's base
	// name (an importer's source.trace), "" for a reader.
	Build func(t T, base string) (*Profile, error)
}

// ImportFile makes the profile of the file at path. Errors say
// "import <what> <path>: …" ("import <what>: …" when the file cannot be
// opened).
func (im Importer[T]) ImportFile(path string) (*Profile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", im.What, err)
	}
	defer f.Close()
	p, err := im.read(f, filepath.Base(path))
	if err != nil {
		return nil, fmt.Errorf("import %s %s: %w", im.What, path, err)
	}
	return p, nil
}

// Import makes the profile of r. Errors say "import <what>: …".
func (im Importer[T]) Import(r io.Reader) (*Profile, error) {
	p, err := im.read(r, "")
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", im.What, err)
	}
	return p, nil
}

func (im Importer[T]) read(r io.Reader, base string) (*Profile, error) {
	if err := im.Check(); err != nil {
		return nil, err
	}
	t, err := im.Parse(r)
	if err != nil {
		return nil, err
	}
	return im.Build(t, base)
}
