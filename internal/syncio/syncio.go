// Package syncio holds writers that several goroutines may share: one
// that serialises writes to another writer, and a buffer that can be read
// while others write to it (a test's log).
package syncio

import (
	"bytes"
	"io"
	"sync"
)

// Writer serialises writes to W.
type Writer struct {
	mu sync.Mutex
	W  io.Writer
}

// Write writes p to W, one writer at a time.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.W.Write(p)
}

// Buffer is a bytes.Buffer safe for concurrent writes and reads.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
