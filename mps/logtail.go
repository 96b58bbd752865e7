package mps

import (
	"bytes"
	"os"
	"regexp"
	"strings"
)

// maxTailRead bounds what one probe reads of a log file: if more was
// written since the last probe, only the newest part is read.
const maxTailRead = 64 << 10

// logTail follows one log file across probes. It survives truncation and
// rotation (a new file is read from its start).
type logTail struct {
	path  string
	off   int64
	file  os.FileInfo
	ready bool
}

// skipToEnd makes the next read start at the current end: what the log
// said before colocd looked is history, not news.
func (t *logTail) skipToEnd() {
	t.off, t.file, t.ready = 0, nil, true
	if fi, err := os.Stat(t.path); err == nil {
		t.off, t.file = fi.Size(), fi
	}
}

// newLines returns the complete lines appended since the last call. A
// missing file has no lines.
func (t *logTail) newLines() []string {
	if !t.ready {
		t.skipToEnd()
		return nil
	}
	f, err := os.Open(t.path)
	if err != nil {
		t.off, t.file = 0, nil
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	if t.file != nil && !os.SameFile(t.file, fi) || fi.Size() < t.off {
		t.off = 0 // rotated or truncated
	}
	t.file = fi
	start, cut := t.off, false
	if fi.Size()-start > maxTailRead {
		start, cut = fi.Size()-maxTailRead, true
	}
	buf := make([]byte, fi.Size()-start)
	n, _ := f.ReadAt(buf, start)
	buf = buf[:n]
	last := bytes.LastIndexByte(buf, '\n')
	if last < 0 {
		if cut {
			t.off = start + int64(n) // one huge line: skip it
		}
		return nil
	}
	t.off = start + int64(last) + 1
	lines := strings.Split(string(buf[:last]), "\n")
	if cut {
		lines = lines[1:] // the first line was cut in the middle
	}
	return lines
}

// faultPattern matches log lines that report a fault: a FAULT state, a fatal
// exception or error, a server that exited with a non-zero status or on a
// signal. Words are matched whole, so "default" is not "fault". The exact
// wording of the real logs varies by driver; see docs/mps.md.
var faultPattern = regexp.MustCompile(`(?i)\bfault\b|\bfatal\b|exited with status [1-9]|(killed by|exited on|terminated by) signal|\bxid\b`)

// isFaultLine reports whether a log line reports a fault.
func isFaultLine(line string) bool { return faultPattern.MatchString(line) }
