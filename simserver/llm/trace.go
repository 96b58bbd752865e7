package llm

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/colocd/colocd/field"
)

// Request is one request of a trace: when it arrives (an offset from the
// trace's first arrival) and its tokens. A count of 0 is unknown: the
// engine uses its config's default.
type Request struct {
	Arrival      time.Duration
	PromptTokens int
	OutputTokens int
}

// Bounds on a trace: its file, its requests, a line of the plain format,
// a token count and the time from its first arrival to its last.
const (
	MaxTraceBytes    = 256 << 20
	MaxTraceRequests = 10_000_000
	MaxTraceLine     = 4096
	MaxTraceTokens   = 1 << 20
	MaxTraceSpan     = 366 * 24 * time.Hour
)

// ErrTrace is matched (errors.Is) by every error about a trace's content.
var ErrTrace = errors.New("invalid trace")

// limits are the bounds a parse enforces (tests lower them).
type limits struct {
	bytes    int64
	requests int
}

// ParseTrace reads a trace in one of two formats, told apart by its first
// line, and returns its requests in order of arrival, as offsets from the
// first.
//
// The Azure LLM inference traces' CSV: a header naming a TIMESTAMP column
// (any case, an optional byte order mark) and, optionally, ContextTokens
// (the prompt) and GeneratedTokens (the output); timestamps like
// 2023-11-16 18:15:46.6805900 or RFC 3339.
//
// A plain list: one arrival per line, in seconds (a number) or as an RFC
// 3339 timestamp (every line alike), optionally followed by the prompt's
// and the output's token counts, separated by spaces, tabs or commas;
// blank lines and everything after a '#' are ignored.
//
// Token counts are in [0, MaxTraceTokens] (0, or absent: the engine's
// default). An error is a *field.List (ErrTrace) naming the line and the
// column, and saying what was expected.
func ParseTrace(r io.Reader) ([]Request, error) {
	return parseTrace(r, limits{bytes: MaxTraceBytes, requests: MaxTraceRequests})
}

func parseTrace(r io.Reader, lim limits) ([]Request, error) {
	lr := &io.LimitedReader{R: r, N: lim.bytes + 1}
	br := bufio.NewReaderSize(lr, 64<<10)
	first, _ := br.Peek(MaxTraceLine)
	if i := bytes.IndexByte(first, '\n'); i >= 0 {
		first = first[:i]
	}
	p := &parser{lr: lr, lim: lim}
	var err error
	if isAzureHeader(string(first)) {
		err = p.csv(br)
	} else {
		err = p.plain(br)
	}
	if err != nil {
		return nil, err
	}
	return p.finish()
}

// isAzureHeader reports whether line is a CSV header with a TIMESTAMP
// column.
func isAzureHeader(line string) bool {
	return slices.ContainsFunc(strings.Split(strings.TrimPrefix(line, "\ufeff"), ","), func(h string) bool {
		return strings.EqualFold(strings.TrimSpace(h), "timestamp")
	})
}

// parser collects a trace's requests with their offsets from the first
// line's arrival (which later lines may precede).
type parser struct {
	lr  *io.LimitedReader
	lim limits
	out []Request
	// firstTime is the first timestamp, firstLine its line; seconds says
	// the plain format's arrivals are numbers (known after the first).
	firstTime time.Time
	firstLine int
	seconds   bool
}

// fail is the error of one field at line and column (1-based; 0: the
// line as a whole).
func fail(line, col int, name, want, got string) error {
	path := name
	if col > 0 {
		path = fmt.Sprintf("column %d (%s)", col, name)
	}
	return &field.List{Doc: "trace", Kind: ErrTrace, Errors: []*field.Error{{Line: line, Path: path, Want: want, Got: got}}}
}

func (p *parser) tooLarge() error {
	return &field.List{Doc: "trace", Kind: ErrTrace, Errors: []*field.Error{{
		Want: fmt.Sprintf("at most %d bytes", p.lim.bytes), Got: "more"}}}
}

func (p *parser) add(line int, r Request) error {
	if len(p.out) == p.lim.requests {
		return fail(line, 0, "", fmt.Sprintf("at most %d requests", p.lim.requests), "more")
	}
	p.out = append(p.out, r)
	return nil
}

// timestamp returns t's offset from the first timestamp of the trace.
func (p *parser) timestamp(line, col int, name string, t time.Time) (time.Duration, error) {
	if p.firstLine == 0 {
		p.firstTime, p.firstLine = t, line
		return 0, nil
	}
	d := t.Sub(p.firstTime)
	if d < -MaxTraceSpan || d > MaxTraceSpan {
		return 0, fail(line, col, name, fmt.Sprintf("a time within %s of line %d's", MaxTraceSpan, p.firstLine), t.Format(time.RFC3339Nano))
	}
	return d, nil
}

// tokens parses a token count.
func tokens(line, col int, name, s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 || n > MaxTraceTokens {
		return 0, fail(line, col, name, fmt.Sprintf("a token count in [0, %d]", MaxTraceTokens), strconv.Quote(clip(s)))
	}
	return n, nil
}

// azureLayouts are the forms of the Azure traces' TIMESTAMP (a fraction
// of a second after the seconds is accepted by the first).
var azureLayouts = []string{"2006-01-02 15:04:05", time.RFC3339Nano}

func (p *parser) csv(r io.Reader) error {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err != nil {
		return p.csvErr(err)
	}
	cols := map[string]int{"timestamp": -1, "contexttokens": -1, "generatedtokens": -1}
	names := map[string]string{}
	for i, h := range head {
		k := strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		if j, ok := cols[k]; ok && j < 0 {
			cols[k] = i
			names[k] = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		}
	}
	for {
		rec, err := cr.Read()
		if p.lr.N <= 0 {
			return p.tooLarge()
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return p.csvErr(err)
		}
		line, _ := cr.FieldPos(0)
		var req Request
		for _, k := range []string{"timestamp", "contexttokens", "generatedtokens"} {
			i := cols[k]
			if i < 0 {
				continue
			}
			if i >= len(rec) {
				return fail(line, i+1, names[k], "a field", fmt.Sprintf("a record of %d fields", len(rec)))
			}
			switch k {
			case "timestamp":
				t, err := parseTime(strings.TrimSpace(rec[i]), azureLayouts)
				if err != nil {
					return fail(line, i+1, names[k], "a time like 2023-11-16 18:15:46.6805900 or RFC 3339", strconv.Quote(clip(rec[i])))
				}
				if req.Arrival, err = p.timestamp(line, i+1, names[k], t); err != nil {
					return err
				}
			case "contexttokens":
				if req.PromptTokens, err = tokens(line, i+1, names[k], rec[i]); err != nil {
					return err
				}
			case "generatedtokens":
				if req.OutputTokens, err = tokens(line, i+1, names[k], rec[i]); err != nil {
					return err
				}
			}
		}
		if err := p.add(line, req); err != nil {
			return err
		}
	}
}

func (p *parser) csvErr(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return fail(pe.Line, pe.Column, "CSV", "a CSV record", pe.Err.Error())
	}
	if p.lr.N <= 0 {
		return p.tooLarge()
	}
	return fmt.Errorf("trace: %w", err)
}

func parseTime(s string, layouts []string) (time.Time, error) {
	var err error
	for _, l := range layouts {
		var t time.Time
		if t, err = time.Parse(l, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, err
}

// plainNames name the plain format's columns.
var plainNames = [...]string{"arrival", "prompt tokens", "output tokens"}

func (p *parser) plain(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), MaxTraceLine)
	line := 0
	for sc.Scan() {
		line++
		if p.lr.N <= 0 {
			return p.tooLarge()
		}
		s := sc.Text()
		if line == 1 {
			s = strings.TrimPrefix(s, "\ufeff")
		}
		if i := strings.IndexByte(s, '#'); i >= 0 {
			s = s[:i]
		}
		fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
		if len(fields) == 0 {
			continue
		}
		if len(fields) > len(plainNames) {
			return fail(line, len(plainNames)+1, "extra", "at most 3 fields: arrival, prompt tokens, output tokens", strconv.Quote(clip(fields[3])))
		}
		var req Request
		var err error
		if req.Arrival, err = p.arrival(line, fields[0]); err != nil {
			return err
		}
		if len(fields) > 1 {
			if req.PromptTokens, err = tokens(line, 2, plainNames[1], fields[1]); err != nil {
				return err
			}
		}
		if len(fields) > 2 {
			if req.OutputTokens, err = tokens(line, 3, plainNames[2], fields[2]); err != nil {
				return err
			}
		}
		if err := p.add(line, req); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fail(line+1, 0, "", fmt.Sprintf("a line of at most %d bytes", MaxTraceLine), "a longer one")
		}
		return fmt.Errorf("trace: %w", err)
	}
	if p.lr.N <= 0 {
		return p.tooLarge()
	}
	return nil
}

// arrival parses the plain format's first field: seconds, or an RFC 3339
// time, as the trace's first arrival was.
func (p *parser) arrival(line int, s string) (time.Duration, error) {
	v, numErr := strconv.ParseFloat(s, 64)
	if len(p.out) == 0 {
		p.seconds = numErr == nil
	}
	maxS := MaxTraceSpan.Seconds()
	if p.seconds {
		if numErr != nil || !finite(v) || v < 0 || v > maxS {
			return 0, fail(line, 1, plainNames[0], fmt.Sprintf("seconds in [0, %g], as on the first line", maxS), strconv.Quote(clip(s)))
		}
		return time.Duration(math.Round(v * float64(time.Second))), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fail(line, 1, plainNames[0], "an RFC 3339 time like 2023-11-16T18:15:46.68Z, as on the first line", strconv.Quote(clip(s)))
	}
	return p.timestamp(line, 1, plainNames[0], t)
}

// finish sorts the requests by arrival and makes the first arrive at 0.
func (p *parser) finish() ([]Request, error) {
	if len(p.out) == 0 {
		return nil, &field.List{Doc: "trace", Kind: ErrTrace, Errors: []*field.Error{{Want: "at least one request", Got: "none"}}}
	}
	slices.SortStableFunc(p.out, func(a, b Request) int { return cmp.Compare(a.Arrival, b.Arrival) })
	lo, hi := p.out[0].Arrival, p.out[len(p.out)-1].Arrival
	if hi-lo > MaxTraceSpan {
		return nil, &field.List{Doc: "trace", Kind: ErrTrace, Errors: []*field.Error{{
			Want: fmt.Sprintf("arrivals within %s", MaxTraceSpan), Got: (hi - lo).String()}}}
	}
	for i := range p.out {
		p.out[i].Arrival -= lo
	}
	return p.out, nil
}

// clip shortens a value quoted in an error.
func clip(s string) string {
	if len(s) > 64 {
		return strings.ToValidUTF8(s[:64], "") + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// finite reports whether v is neither NaN nor infinite.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
