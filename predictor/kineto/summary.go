package kineto

import (
	"fmt"
	"io"

	"github.com/colocd/colocd/predictor"
)

// Summary is what an import made (profile import --json): the profile's
// name, kind, ops, span and device, the unit imported, the file written and
// the importer's notes.
type Summary struct {
	Name   string   `json:"name"`
	Kind   string   `json:"kind"`
	Ops    int      `json:"ops"`
	SpanMS float64  `json:"span_ms"`
	Device string   `json:"device,omitempty"`
	SMs    int      `json:"sms,omitempty"`
	Unit   string   `json:"unit,omitempty"`
	Out    string   `json:"out"`
	Notes  []string `json:"notes"`
}

// Summarize is p's summary, written to out.
func Summarize(p *predictor.Profile, out string) Summary {
	s := Summary{Name: p.Name, Kind: string(p.Kind), Ops: len(p.Ops), SpanMS: p.SoloUS() / 1000,
		Device: p.Device.Name, SMs: p.Device.SMs, Out: out, Notes: append([]string{}, p.Notes...)}
	if p.Source != nil {
		s.Unit = p.Source.Unit
	}
	return s
}

// WriteText writes one line about the profile to stdout and its notes to
// stderr.
func (s Summary) WriteText(stdout, stderr io.Writer) {
	dev := "device unknown"
	if s.Device != "" {
		dev = s.Device
	}
	if s.SMs > 0 {
		dev += fmt.Sprintf(" (%d SMs)", s.SMs)
	}
	unit := ""
	if s.Unit != "" {
		unit = ", " + s.Unit
	}
	fmt.Fprintf(stdout, "%s: %s, %d ops, span %.3f ms, %s%s → %s\n",
		s.Name, s.Kind, s.Ops, s.SpanMS, dev, unit, s.Out)
	for _, n := range s.Notes {
		fmt.Fprintf(stderr, "note: %s\n", n)
	}
}
