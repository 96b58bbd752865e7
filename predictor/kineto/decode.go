package kineto

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/colocd/colocd/predictor"
)

// kinetoTrace is what the importer keeps of a trace: the kernels, the launch
// time of each correlation id, the annotations and the device properties.
// Every other event is decoded, looked at and dropped.
type kinetoTrace struct {
	events      int                    // trace events seen
	kernels     []kinetoKernel         // in file order
	launches    map[int64]int64        // correlation → start of the launching CPU event, ns
	annotations []kinetoAnnotation     // user annotations, ProfilerSteps included
	devices     map[int64]kinetoDevice // deviceProperties by id
}

type kinetoKernel struct {
	name          string
	start, end    int64 // ns
	correlation   int64
	hasCorr       bool
	stream        int64
	device        int64
	blocksPerSM   float64
	hasBlocks     bool
	occupancyPct  float64
	hasOccupancy  bool
	gridBlocks    float64
	hasGrid       bool
	blockThreads  float64 // threads per block (block x·y·z); 0: unknown
	launch        int64   // start of the launching CPU event, or start
	launchUnknown bool    // no launching event: launch is the kernel's start
}

type kinetoAnnotation struct {
	name       string
	start, end int64 // ns
	step       int   // N of ProfilerStep#N; -1 when not a step
	user       bool  // cat "user_annotation" (ProfilerSteps may also be "cpu_op")
}

type kinetoDevice struct {
	name string
	sms  int
	// warps is the most warps an SM holds (maxThreadsPerMultiprocessor /
	// warpSize) and warpSize their threads; 0: unknown.
	warps, warpSize float64
}

// kinetoEvent holds the fields of one trace event the importer needs.
type kinetoEvent struct {
	Ph   string      `json:"ph"`
	Cat  string      `json:"cat"`
	Name string      `json:"name"`
	Ts   json.Number `json:"ts"`
	Dur  json.Number `json:"dur"`
	Args struct {
		Correlation *int64    `json:"correlation"`
		Stream      *int64    `json:"stream"`
		Device      *int64    `json:"device"`
		BlocksPerSM *float64  `json:"blocks per SM"`
		Occupancy   *float64  `json:"est. achieved occupancy %"`
		Grid        []float64 `json:"grid"`
		Block       []float64 `json:"block"`
	} `json:"args"`
}

type kinetoDeviceProps struct {
	ID              *int64  `json:"id"`
	Name            string  `json:"name"`
	NumSms          int     `json:"numSms"`
	MaxThreadsPerSM float64 `json:"maxThreadsPerMultiprocessor"`
	WarpSize        float64 `json:"warpSize"`
}

// readKineto decodes a (possibly gzipped) Kineto trace, streaming through
// traceEvents one event at a time.
func readKineto(r io.Reader) (*kinetoTrace, error) {
	in, err := kinetoInput(r)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(in)
	dec.UseNumber()
	tr := &kinetoTrace{launches: map[int64]int64{}, devices: map[int64]kinetoDevice{}}
	if err := tr.readTop(dec); err != nil {
		return nil, err
	}
	// Read to the end, so that trailing garbage and a damaged gzip trailer
	// (checksum, length) are reported rather than ignored.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err == nil {
			return nil, invalidTrace("trailing data after the JSON document")
		}
		return nil, jsonReadError(err)
	}
	if len(tr.kernels) == 0 {
		return nil, invalidTrace("no GPU kernel events (\"cat\": \"kernel\") among %d trace events; was the profiler run with CUDA activities?", tr.events)
	}
	tr.resolveLaunches()
	return tr, nil
}

// jsonReadError explains an error from the JSON decoder: truncation, broken
// gzip data or a syntax error.
func jsonReadError(err error) error {
	var se *json.SyntaxError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return invalidTrace("truncated: the data ends in the middle of the JSON document (%w)", err)
	case errors.As(err, &se):
		return invalidTrace("not valid JSON at byte %d: %w", se.Offset, err)
	}
	return invalidTrace("read: %w", err)
}

func (tr *kinetoTrace) readTop(dec *json.Decoder) error {
	tok, err := dec.Token()
	if errors.Is(err, io.EOF) {
		return invalidTrace("empty: no JSON document")
	}
	if err != nil {
		return jsonReadError(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return invalidTrace("want a JSON object with \"traceEvents\" (a Kineto trace), got %s", describeToken(tok))
	}
	sawEvents := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return jsonReadError(err)
		}
		key, _ := tok.(string)
		switch key {
		case "traceEvents":
			sawEvents = true
			err = tr.readEvents(dec)
		case "deviceProperties":
			err = tr.readDevices(dec)
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return jsonReadError(err)
			}
		}
		if err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return jsonReadError(err)
	}
	if !sawEvents {
		return invalidTrace("no \"traceEvents\" array: not a Kineto (Chrome trace) file")
	}
	return nil
}

func describeToken(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		return "'" + v.String() + "'"
	case string:
		return "a JSON string"
	case nil:
		return "null"
	case bool:
		return "a JSON boolean"
	}
	return "a JSON number"
}

func (tr *kinetoTrace) readDevices(dec *json.Decoder) error {
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return jsonReadError(err)
	}
	var props []kinetoDeviceProps
	if err := json.Unmarshal(raw, &props); err != nil {
		return invalidTrace("deviceProperties: want an array of {id, name, numSms}: %w", err)
	}
	for i, p := range props {
		id := int64(i)
		if p.ID != nil {
			id = *p.ID
		}
		if _, dup := tr.devices[id]; !dup {
			d := kinetoDevice{name: p.Name, sms: max(0, p.NumSms)}
			if p.WarpSize >= 1 && p.WarpSize <= 1024 && p.MaxThreadsPerSM >= p.WarpSize && p.MaxThreadsPerSM <= 1<<16 {
				d.warps, d.warpSize = math.Floor(p.MaxThreadsPerSM/p.WarpSize), p.WarpSize
			}
			tr.devices[id] = d
		}
	}
	return nil
}

func (tr *kinetoTrace) readEvents(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return jsonReadError(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return invalidTrace("traceEvents: want an array, got %s", describeToken(tok))
	}
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return jsonReadError(err)
		}
		i := tr.events
		tr.events++
		var ev kinetoEvent
		uerr := json.Unmarshal(raw, &ev)
		if ev.Ph != "X" || !kinetoWanted(&ev) {
			continue // not an event the importer uses, whatever its shape
		}
		if uerr != nil {
			return invalidTrace("traceEvents[%d] (%s %q): %v", i, ev.Cat, predictor.ShortKernelName(ev.Name), uerr)
		}
		if err := tr.add(&ev); err != nil {
			return invalidTrace("traceEvents[%d] (%s %q): %v", i, ev.Cat, predictor.ShortKernelName(ev.Name), err)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing ']'
		return jsonReadError(err)
	}
	return nil
}

// kinetoWanted says whether an event is one the importer keeps.
func kinetoWanted(ev *kinetoEvent) bool {
	switch ev.Cat {
	case "kernel", "cuda_runtime", "cuda_driver", "user_annotation":
		return true
	case "cpu_op":
		return profilerStep(ev.Name) >= 0
	}
	return false
}

// profilerStep returns N for a "ProfilerStep#N" name, else -1.
func profilerStep(name string) int {
	s, ok := strings.CutPrefix(name, "ProfilerStep#")
	if !ok || s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return -1
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

func (tr *kinetoTrace) add(ev *kinetoEvent) error {
	a := &ev.Args
	switch ev.Cat {
	case "cuda_runtime", "cuda_driver":
		if a.Correlation == nil {
			return nil
		}
		ts, err := parseTraceUS(ev.Ts, "ts")
		if err != nil {
			return err
		}
		if _, dup := tr.launches[*a.Correlation]; !dup {
			tr.launches[*a.Correlation] = ts
		}
		return nil
	case "kernel":
		start, end, err := eventSpan(ev)
		if err != nil {
			return err
		}
		k := kinetoKernel{name: ev.Name, start: start, end: end}
		if a.Correlation != nil {
			k.correlation, k.hasCorr = *a.Correlation, true
		}
		if a.Stream != nil {
			k.stream = *a.Stream
		}
		if a.Device != nil {
			k.device = *a.Device
		}
		if a.BlocksPerSM != nil {
			k.blocksPerSM, k.hasBlocks = *a.BlocksPerSM, true
		}
		if a.Occupancy != nil {
			k.occupancyPct, k.hasOccupancy = *a.Occupancy, true
		}
		if len(a.Block) > 0 {
			k.blockThreads = 1
			for _, b := range a.Block {
				k.blockThreads *= math.Max(0, b)
			}
		}
		if len(a.Grid) > 0 {
			k.gridBlocks, k.hasGrid = 1, true
			for _, g := range a.Grid {
				k.gridBlocks *= math.Max(0, g)
			}
		}
		tr.kernels = append(tr.kernels, k)
		return nil
	}
	// user_annotation, or a cpu_op ProfilerStep.
	start, end, err := eventSpan(ev)
	if err != nil {
		return err
	}
	tr.annotations = append(tr.annotations, kinetoAnnotation{
		name: ev.Name, start: start, end: end, step: profilerStep(ev.Name), user: ev.Cat == "user_annotation",
	})
	return nil
}

// eventSpan returns a complete event's [start, end] in ns.
func eventSpan(ev *kinetoEvent) (start, end int64, err error) {
	if start, err = parseTraceUS(ev.Ts, "ts"); err != nil {
		return 0, 0, err
	}
	dur, err := parseTraceUS(ev.Dur, "dur")
	if err != nil {
		return 0, 0, err
	}
	if dur < 0 || dur > maxDurUS*1000 {
		return 0, 0, fmt.Errorf("dur: want a duration in [0, %g] µs, got %s", maxDurUS, ev.Dur)
	}
	return start, start + dur, nil
}

// resolveLaunches sets each kernel's launch time from its launching CPU event.
func (tr *kinetoTrace) resolveLaunches() {
	for i := range tr.kernels {
		k := &tr.kernels[i]
		if ts, ok := tr.launches[k.correlation]; ok && k.hasCorr {
			k.launch = ts
		} else {
			k.launch, k.launchUnknown = k.start, true
		}
	}
}

// maxTraceUS bounds timestamps (about 127 years in µs) and maxDurUS
// durations (about 32 years), so that the difference of any two starts or
// ends, in ns, fits in an int64.
const (
	maxTraceUS = 4e15
	maxDurUS   = 1e15
)

// parseTraceUS converts a trace time in µs to integer ns, rounding half away
// from zero. Integer arithmetic on the decimal text keeps the nanoseconds of
// 16-digit epoch timestamps, which a float64 would round to 0.25 µs.
func parseTraceUS(n json.Number, field string) (int64, error) {
	s := string(n)
	if s == "" {
		return 0, fmt.Errorf("%s: missing", field)
	}
	bad := fmt.Errorf("%s: want a time in µs of magnitude ≤ %g, got %s", field, maxTraceUS, s)
	if strings.ContainsAny(s, "eE") {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || !(math.Abs(f) <= maxTraceUS) {
			return 0, bad
		}
		return int64(math.Round(f * 1000)), nil
	}
	neg := strings.HasPrefix(s, "-")
	whole, frac, _ := strings.Cut(strings.TrimPrefix(s, "-"), ".")
	v, err := strconv.ParseUint(whole, 10, 64)
	if err != nil || v > maxTraceUS {
		return 0, bad
	}
	ns := int64(v) * 1000
	for i, scale := range []int64{100, 10, 1} {
		if i < len(frac) {
			d := frac[i]
			if d < '0' || d > '9' {
				return 0, bad
			}
			ns += int64(d-'0') * scale
		}
	}
	if len(frac) > 3 && frac[3] >= '5' {
		ns++
	}
	if neg {
		ns = -ns
	}
	return ns, nil
}
