package kineto

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/colocd/colocd/internal/fieldtest"
	"github.com/colocd/colocd/predictor"
)

const kinetoDir = "../../testdata/kineto"

// kinetoExpect is one case of testdata/kineto/expected.json, computed by
// testdata/kineto/expected.py independently of the importer.
type kinetoExpect struct {
	Name         string         `json:"name"`
	Trace        string         `json:"trace"`
	Step         int            `json:"step"`
	Annotation   string         `json:"annotation"`
	MaxOps       int            `json:"max_ops"`
	Unit         string         `json:"unit"`
	Kind         predictor.Kind `json:"kind"`
	Kernels      int            `json:"kernels"`
	KernelTimeUS float64        `json:"kernel_time_us"`
	SpanUS       float64        `json:"span_us"`
	BusyUS       float64        `json:"busy_us"`
	Overlapped   int            `json:"overlapped"`
	Streams      int            `json:"streams"`
	DeviceName   string         `json:"device_name"`
	SMs          int            `json:"sms"`
}

// fixtureTraces caches the decoded fixtures: decoding the V100 trace takes a
// few seconds under the race detector, and the tests import it many times.
var fixtureTraces = struct {
	sync.Mutex
	m map[string]*kinetoTrace
}{m: map[string]*kinetoTrace{}}

// importFixture imports testdata/kineto/file as ImportFile does, from a
// cached decoding (TestImportKinetoFileMatchesFixture checks the two agree).
func importFixture(t testing.TB, file string, opts Options) (*predictor.Profile, error) {
	t.Helper()
	fixtureTraces.Lock()
	tr, ok := fixtureTraces.m[file]
	if !ok {
		f, err := os.Open(filepath.Join(kinetoDir, file))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if tr, err = readKineto(f); err != nil {
			t.Fatal(err)
		}
		fixtureTraces.m[file] = tr
	}
	fixtureTraces.Unlock()
	if opts.Name == "" {
		opts.Name = traceStem(file)
	}
	imp := importer(opts)
	if err := imp.Check(); err != nil {
		return nil, err
	}
	return imp.Build(tr, file)
}

func TestImportKinetoFileMatchesFixture(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		file string
	}{
		{"v100", "v100-training-5steps.json.gz"},
		{"multistream", "multistream-training-2steps.json.gz"},
		{"a100", "a100-small-benchmark.json.gz"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ImportFile(filepath.Join(kinetoDir, tt.file), Options{})
			if err != nil {
				t.Fatal(err)
			}
			want, err := importFixture(t, tt.file, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("ImportFile and the cached import differ:\n got %+v\nwant %+v", got.Source, want.Source)
			}
		})
	}
}

// stepPtr turns an expectation's step number into Options.Step: 0 in
// expected.json means "the default", the median step.
func stepPtr(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}

func closeTo(got, want float64) bool {
	return math.Abs(got-want) <= 1e-6*math.Max(math.Abs(want), 1e-9)
}

func TestImportKinetoExpected(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(kinetoDir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tests []kinetoExpect
	if err := json.Unmarshal(data, &tests); err != nil {
		t.Fatal(err)
	}
	if len(tests) < 5 {
		t.Fatalf("expected.json has %d cases, want at least 5", len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			opts := Options{Step: stepPtr(tt.Step), Annotation: tt.Annotation, MaxOps: tt.MaxOps}
			p, err := importFixture(t, tt.Trace, opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
			src := p.Source
			checks := []struct {
				what      string
				got, want any
			}{
				{"unit", src.Unit, tt.Unit},
				{"kind", p.Kind, tt.Kind},
				{"kernels", src.Kernels, tt.Kernels},
				{"ops", len(p.Ops), tt.Kernels},
				{"streams", src.Streams, tt.Streams},
				{"device name", p.Device.Name, tt.DeviceName},
				{"device sms", p.Device.SMs, tt.SMs},
				{"format", src.Format, "kineto"},
				{"trace", src.Trace, tt.Trace},
				{"name", p.Name, traceStem(tt.Trace)},
				{"first gap", p.Ops[0].GapUS, 0.0},
			}
			for _, c := range checks {
				if c.got != c.want {
					t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
				}
			}
			var busy, solo float64
			for _, op := range p.Ops {
				busy += op.DurUS
				solo += op.GapUS + op.DurUS
			}
			floats := []struct {
				what      string
				got, want float64
			}{
				{"kernel_time_us", src.KernelTimeUS, tt.KernelTimeUS},
				{"span_us", src.SpanUS, tt.SpanUS},
				{"sum of op dur_us (busy)", busy, tt.BusyUS},
				{"sum of gap_us+dur_us (span)", solo, tt.SpanUS},
				{"SoloUS", p.SoloUS(), tt.SpanUS},
			}
			for _, c := range floats {
				if !closeTo(c.got, c.want) {
					t.Errorf("%s: got %.6f, want %.6f", c.what, c.got, c.want)
				}
			}
			gotMerged := slices.ContainsFunc(p.Notes, func(n string) bool { return strings.Contains(n, "overlapped") })
			if gotMerged != (tt.Overlapped > 0) {
				t.Errorf("overlap note: got %v, want %v (%d overlapped kernels); notes %q", gotMerged, tt.Overlapped > 0, tt.Overlapped, p.Notes)
			}
			gotNoDevice := slices.ContainsFunc(p.Notes, func(n string) bool { return strings.Contains(n, "no deviceProperties") })
			if gotNoDevice != (tt.DeviceName == "") {
				t.Errorf("device note: got %v, want %v; notes %q", gotNoDevice, tt.DeviceName == "", p.Notes)
			}
		})
	}
}

// TestImportKinetoOpsV100 spot-checks ops against the trace's first kernel
// of ProfilerStep#104 (launched in the step, a CatArrayBatchedCopy).
func TestImportKinetoOpsV100(t *testing.T) {
	t.Parallel()
	p, err := importFixture(t, "v100-training-5steps.json.gz", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, op := range p.Ops {
		if len(op.Name) > predictor.KernelNameMax {
			t.Fatalf("ops[%d].name is %d bytes, want ≤ %d", i, len(op.Name), predictor.KernelNameMax)
		}
		if op.DRAM != nil || op.L2 != nil {
			t.Fatalf("ops[%d]: dram/l2 set, want nil (not in Kineto traces)", i)
		}
		if r := op.DurUS * 1000; r != math.Round(r) && math.Abs(r-math.Round(r)) > 1e-6 {
			t.Fatalf("ops[%d].dur_us = %v, want whole ns", i, op.DurUS)
		}
	}
	if len(p.Notes) != 0 {
		t.Errorf("notes: got %q, want none (one stream, every field present)", p.Notes)
	}
}

// traceStem drops a trace file's .json or .json.gz ending, and only that.
func TestTraceStem(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"v100.json.gz": "v100",
		"a.b.json":     "a.b",
		"trace":        "trace", // bare
		".json":        ".json", // only the ending: kept
	} {
		if got := traceStem(in); got != want {
			t.Errorf("traceStem(%q) = %q, want %q", in, got, want)
		}
	}
}

// parseTraceUS reads a µs timestamp as whole ns, rounded half away from
// zero, and refuses one that is missing or out of int64's range (0 then).
func TestParseTraceUS(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{
		"12":                   12000,
		"1712195495505543.247": 1712195495505543247, // three decimals
		"1.0005":               1001,                // rounds up
		"1.00049":              1000,                // rounds down
		"-1.0005":              -1001,               // negative: rounds away from zero
		"1.5e3":                1500000,             // exponent
	} {
		if got, err := parseTraceUS(json.Number(in), "ts"); err != nil || got != want {
			t.Errorf("parseTraceUS(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"5000000000000000", "1e300", ""} { // too big, too big by exponent, missing
		if got, err := parseTraceUS(json.Number(in), "ts"); err == nil || got != 0 {
			t.Errorf("parseTraceUS(%q) = %d, %v; want 0 and an error", in, got, err)
		}
	}
}

// Small synthetic traces for the rules the real traces do not exercise.
const (
	synthDevice = `"deviceProperties": [{"id": 0, "name": "Test GPU", "numSms": 10}]`
	// Two steps; the kernel of step 2 runs after step 2 ends on the CPU but
	// was launched inside it.
	synthSteps = `{` + synthDevice + `, "traceEvents": [
	 {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 100},
	 {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "ts": 100, "dur": 300},
	 {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "ts": 400, "dur": 200},
	 {"ph": "X", "cat": "user_annotation", "name": "forward", "ts": 110, "dur": 50},
	 {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 10, "dur": 5, "args": {"correlation": 1}},
	 {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 120, "dur": 5, "args": {"correlation": 2}},
	 {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "ts": 130, "dur": 5, "args": {"correlation": 3}},
	 {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 450, "dur": 5, "args": {"correlation": 4}},
	 {"ph": "X", "cat": "kernel", "name": "k1", "ts": 20, "dur": 10, "args": {"correlation": 1, "stream": 7, "device": 0, "blocks per SM": 0.5, "est. achieved occupancy %": 50}},
	 {"ph": "X", "cat": "kernel", "name": "k2", "ts": 500, "dur": 10, "args": {"correlation": 2, "stream": 7, "device": 0, "blocks per SM": 2, "est. achieved occupancy %": 25}},
	 {"ph": "X", "cat": "kernel", "name": "k3", "ts": 505, "dur": 20, "args": {"correlation": 3, "stream": 9, "device": 0, "grid": [2, 2, 1], "est. achieved occupancy %": 130}},
	 {"ph": "X", "cat": "kernel", "name": "k4", "ts": 530.0004, "dur": 1.0006, "args": {"correlation": 4, "stream": 7, "device": 0}},
	 {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": 526, "dur": 3, "args": {"stream": 7}}
	]}`
)

func TestImportKinetoSynthetic(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		trace     string
		opts      Options
		wantUnit  string
		wantKind  predictor.Kind
		wantOps   []predictor.Op
		wantNotes []string // substrings, one per note, in order
	}{
		{
			name: "median step by launch time, overlap merged", trace: synthSteps,
			wantUnit: "ProfilerStep#3", wantKind: predictor.KindTraining,
			// Step 3 (dur 200) is the median of 100, 200, 300. k4 launched in it.
			wantOps:   []predictor.Op{{Name: "k4", DurUS: 1.001, GapUS: 0, SM: 1, Occupancy: 1}},
			wantNotes: []string{`had neither "blocks per SM"`, `no "est. achieved occupancy %"`},
		},
		{
			name: "step 2: kernels launched inside it, two streams", trace: synthSteps, opts: Options{Step: stepPtr(2), Kind: predictor.KindInference},
			wantUnit: "ProfilerStep#2", wantKind: predictor.KindInference,
			wantOps: []predictor.Op{
				{Name: "k2", DurUS: 10, GapUS: 0, SM: 1, Occupancy: 0.25},
				// k3 starts under k2: it adds only 505+20-510 = 15 µs; grid 4 / 10 SMs.
				{Name: "k3", DurUS: 15, GapUS: 0, SM: 0.4, Occupancy: 1},
			},
			wantNotes: []string{"1 of 2 kernels overlapped", "computed from grid size", "outside 0–100 %"},
		},
		{
			name: "annotation", trace: synthSteps, opts: Options{Annotation: "forw", Name: "fwd"},
			wantUnit: "annotation forward", wantKind: predictor.KindTraining,
			wantOps: []predictor.Op{
				{Name: "k2", DurUS: 10, GapUS: 0, SM: 1, Occupancy: 0.25},
				{Name: "k3", DurUS: 15, GapUS: 0, SM: 0.4, Occupancy: 1},
			},
			wantNotes: []string{"1 of 2 kernels overlapped", "computed from grid size", "outside 0–100 %"},
		},
		{
			// PyTorch numbers steps from 0: step 0 is a step, not "the default".
			name: "step 0", trace: strings.Replace(synthSteps, "ProfilerStep#1", "ProfilerStep#0", 1), opts: Options{Step: new(int)},
			wantUnit: "ProfilerStep#0", wantKind: predictor.KindTraining,
			wantOps: []predictor.Op{{Name: "k1", DurUS: 10, GapUS: 0, SM: 0.5, Occupancy: 0.5}},
		},
		{
			name: "max ops", trace: synthSteps, opts: Options{Step: stepPtr(2), MaxOps: 1},
			wantUnit: "ProfilerStep#2 (first 1 kernels)", wantKind: predictor.KindTraining,
			wantOps: []predictor.Op{{Name: "k2", DurUS: 10, GapUS: 0, SM: 1, Occupancy: 0.25}},
		},
		{
			name: "whole trace, no steps, no launch events, no device properties, cpu_op ignored",
			trace: `{"traceEvents": [
			 {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 1000},
			 {"ph": "X", "cat": "kernel", "name": "b", "ts": 30, "dur": 5, "args": {"stream": 1, "blocks per SM": 0.25, "est. achieved occupancy %": 10}},
			 {"ph": "X", "cat": "kernel", "name": "a", "ts": 10, "dur": 10, "args": {"stream": 1, "blocks per SM": 0.5, "est. achieved occupancy %": 20}},
			 {"ph": "X", "cat": "kernel", "name": "c", "ts": 10, "dur": 2, "args": {"stream": 2, "blocks per SM": 1, "est. achieved occupancy %": 30}}
			]}`,
			wantUnit: "whole trace", wantKind: predictor.KindInference,
			wantOps: []predictor.Op{
				{Name: "c", DurUS: 2, GapUS: 0, SM: 1, Occupancy: 0.3},
				{Name: "a", DurUS: 8, GapUS: 0, SM: 0.5, Occupancy: 0.2},
				{Name: "b", DurUS: 5, GapUS: 10, SM: 0.25, Occupancy: 0.1},
			},
			wantNotes: []string{"no deviceProperties for device 0", "1 of 3 kernels overlapped"},
		},
		{
			name: "cpu_op ProfilerStep, kernel without launch event falls back to its own ts",
			trace: `{"traceEvents": [
			 {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#7", "ts": 0, "dur": 50},
			 {"ph": "X", "cat": "kernel", "name": "in", "ts": 40, "dur": 5, "args": {"correlation": 9, "blocks per SM": 1, "est. achieved occupancy %": 100}},
			 {"ph": "X", "cat": "kernel", "name": "out", "ts": 60, "dur": 5, "args": {"blocks per SM": 1, "est. achieved occupancy %": 100}}
			], ` + synthDevice + `}`,
			wantUnit: "ProfilerStep#7", wantKind: predictor.KindTraining,
			wantOps:   []predictor.Op{{Name: "in", DurUS: 5, GapUS: 0, SM: 1, Occupancy: 1}},
			wantNotes: []string{"1 kernels had no launching runtime event"},
		},
		{
			name: "two devices: the busier one is kept",
			trace: `{` + synthDevice + `, "traceEvents": [
			 {"ph": "X", "cat": "kernel", "name": "d1", "ts": 0, "dur": 5, "args": {"device": 1, "blocks per SM": 1, "est. achieved occupancy %": 100}},
			 {"ph": "X", "cat": "kernel", "name": "d0a", "ts": 0, "dur": 5, "args": {"device": 0, "blocks per SM": 1, "est. achieved occupancy %": 100}},
			 {"ph": "X", "cat": "kernel", "name": "d0b", "ts": 10, "dur": 5, "args": {"device": 0, "blocks per SM": 1, "est. achieved occupancy %": 100}}
			]}`,
			wantUnit: "whole trace", wantKind: predictor.KindInference,
			wantOps: []predictor.Op{
				{Name: "d0a", DurUS: 5, GapUS: 0, SM: 1, Occupancy: 1},
				{Name: "d0b", DurUS: 5, GapUS: 5, SM: 1, Occupancy: 1},
			},
			wantNotes: []string{"kept device 0 (2 kernels), dropped 1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Import(strings.NewReader(tt.trace), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := p.Source.Unit, tt.wantUnit; got != want {
				t.Errorf("unit: got %q, want %q", got, want)
			}
			if got, want := p.Kind, tt.wantKind; got != want {
				t.Errorf("kind: got %q, want %q", got, want)
			}
			if got, want := p.Name, tt.opts.Name; want != "" && got != want || want == "" && got != "kineto" {
				t.Errorf("name: got %q, want %q (or \"kineto\" by default)", got, want)
			}
			if !slices.EqualFunc(p.Ops, tt.wantOps, opEqual) {
				t.Errorf("ops:\n got %+v\nwant %+v", p.Ops, tt.wantOps)
			}
			if len(p.Notes) != len(tt.wantNotes) {
				t.Fatalf("notes: got %q, want %d notes containing %q", p.Notes, len(tt.wantNotes), tt.wantNotes)
			}
			for i, want := range tt.wantNotes {
				if !strings.Contains(p.Notes[i], want) {
					t.Errorf("notes[%d]: got %q, want it to contain %q", i, p.Notes[i], want)
				}
			}
		})
	}
}

func opEqual(a, b predictor.Op) bool {
	return a.Name == b.Name && closeTo(a.DurUS, b.DurUS) && closeTo(a.GapUS, b.GapUS) &&
		closeTo(a.SM, b.SM) && closeTo(a.Occupancy, b.Occupancy) && a.DRAM == nil && a.L2 == nil
}

func TestImportKinetoLongName(t *testing.T) {
	t.Parallel()
	long := "void " + strings.Repeat("é", 200)
	trace := `{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "` + long + `", "ts": 0, "dur": 1}]}`
	p, err := Import(strings.NewReader(trace), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := p.Ops[0].Name
	if len(got) > predictor.KernelNameMax || !strings.HasSuffix(got, "…") || !strings.HasPrefix(long, strings.TrimSuffix(got, "…")) {
		t.Errorf("name: got %q (%d bytes), want a ≤ %d-byte prefix of the kernel name ending in …", got, len(got), predictor.KernelNameMax)
	}
}

func gz(t testing.TB, data []byte) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestImportKinetoErrors(t *testing.T) {
	t.Parallel()
	// A real trace's gzip stream cut a third of the way in: the cut falls
	// among its events, wherever it is (the smaller trace decodes faster).
	multi, err := os.ReadFile(filepath.Join(kinetoDir, "multistream-training-2steps.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	smallGz := gz(t, []byte(synthSteps))
	kernelOnly := func(args string) string {
		return `{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", ` + args + `}]}`
	}
	tests := []struct {
		name     string
		file     string // a file under testdata/kineto (decoded by ImportFile), or
		fixture  string // a file under testdata/kineto (decoded once, cached), or
		data     []byte // the trace itself
		opts     Options
		wantIs   error
		wantText []string
	}{
		{name: "truncated gzip file", file: "a100-truncated.json.gz", wantIs: ErrInvalidTrace, wantText: []string{"truncated"}},
		{name: "multistream cut in the middle", data: multi[:len(multi)/3], wantIs: ErrInvalidTrace, wantText: []string{"truncated"}},
		{name: "gzip trailer missing", data: smallGz[:len(smallGz)-4], wantIs: ErrInvalidTrace, wantText: []string{"unexpected EOF"}},
		{name: "gzip with a bad checksum", data: append(slices.Clone(smallGz[:len(smallGz)-8]), 0, 0, 0, 0, 0, 0, 0, 0), wantIs: ErrInvalidTrace, wantText: []string{"checksum"}},
		{name: "garbage bytes", data: []byte("\x00\x01garbage\xff"), wantIs: ErrInvalidTrace, wantText: []string{"not valid JSON"}},
		{name: "empty input", data: nil, wantIs: ErrInvalidTrace, wantText: []string{"empty"}},
		{name: "only whitespace", data: []byte(" \n"), wantIs: ErrInvalidTrace, wantText: []string{"empty"}},
		{name: "cut after the opening brace", data: []byte(`{"traceEvents": [`), wantIs: ErrInvalidTrace, wantText: []string{"truncated"}},
		{name: "empty JSON object", data: []byte(`{}`), wantIs: ErrInvalidTrace, wantText: []string{`no "traceEvents"`}},
		{name: "JSON array", data: []byte(`[{"ph": "X"}]`), wantIs: ErrInvalidTrace, wantText: []string{`want a JSON object with "traceEvents"`}},
		{name: "traceEvents not an array", data: []byte(`{"traceEvents": {}}`), wantIs: ErrInvalidTrace, wantText: []string{"traceEvents: want an array"}},
		{name: "no kernels", data: []byte(`{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2}, 3, "x"]}`), wantIs: ErrInvalidTrace, wantText: []string{"no GPU kernel events", "3 trace events"}},
		{name: "trailing data", data: []byte(kernelOnly(`"ts": 1, "dur": 2`) + ` {}`), wantIs: ErrInvalidTrace, wantText: []string{"trailing data"}},
		{name: "kernel with negative dur", data: []byte(kernelOnly(`"ts": 1, "dur": -2`)), wantIs: ErrInvalidTrace, wantText: []string{"traceEvents[0]", "dur"}},
		{name: "kernel without ts", data: []byte(kernelOnly(`"dur": 2`)), wantIs: ErrInvalidTrace, wantText: []string{"ts: missing"}},
		{name: "kernel with a string stream", data: []byte(kernelOnly(`"ts": 1, "dur": 2, "args": {"stream": "s7"}`)), wantIs: ErrInvalidTrace, wantText: []string{"traceEvents[0]", "stream"}},
		{name: "kernel with a huge ts", data: []byte(kernelOnly(`"ts": 1e20, "dur": 2`)), wantIs: ErrInvalidTrace, wantText: []string{"ts: want a time in µs"}},
		{name: "kernel with a huge dur", data: []byte(kernelOnly(`"ts": 1, "dur": 2e15`)), wantIs: ErrInvalidTrace, wantText: []string{"dur: want a duration in [0, 1e+15] µs"}},
		{name: "zero-length unit", data: []byte(kernelOnly(`"ts": 1, "dur": 0`)), wantIs: ErrInvalidTrace, wantText: []string{"whole trace", "zero total duration"}},
		{name: "step without kernels", data: []byte(`{"traceEvents": [
			{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 10},
			{"ph": "X", "cat": "kernel", "name": "k", "ts": 20, "dur": 2}]}`), wantIs: ErrInvalidTrace, wantText: []string{"ProfilerStep#1 launched no GPU kernels"}},
		{name: "bad deviceProperties", data: []byte(`{"deviceProperties": {"id": 0}, "traceEvents": []}`), wantIs: ErrInvalidTrace, wantText: []string{"deviceProperties"}},
		{name: "unknown step", fixture: "v100-training-5steps.json.gz", opts: Options{Step: stepPtr(7)}, wantIs: ErrUnitNotFound,
			wantText: []string{"no ProfilerStep#7", `"ProfilerStep#101", "ProfilerStep#102", "ProfilerStep#103", "ProfilerStep#104", "ProfilerStep#105"`}},
		{name: "step in a trace without steps", fixture: "a100-small-benchmark.json.gz", opts: Options{Step: stepPtr(1)}, wantIs: ErrUnitNotFound, wantText: []string{"no ProfilerStep#1; the trace has none"}},
		{name: "unknown annotation", fixture: "v100-training-5steps.json.gz", opts: Options{Annotation: "nope"}, wantIs: ErrUnitNotFound,
			wantText: []string{`no user annotation whose name contains "nope"`, `"nccl:all_reduce"`, "(13 names)"}},
		{name: "bad kind", data: []byte(synthSteps), opts: Options{Kind: "batch"}, wantText: []string{"kind: want"}},
		{name: "negative step", data: []byte(synthSteps), opts: Options{Step: stepPtr(-1)}, wantText: []string{"step: want"}},
		{name: "step and annotation", data: []byte(synthSteps), opts: Options{Step: stepPtr(1), Annotation: "x"}, wantText: []string{"not both"}},
		{name: "blank name", data: []byte(synthSteps), opts: Options{Name: " "}, wantText: []string{"name: want a non-empty name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p *predictor.Profile
			var err error
			switch {
			case tt.file != "":
				p, err = ImportFile(filepath.Join(kinetoDir, tt.file), tt.opts)
			case tt.fixture != "":
				p, err = importFixture(t, tt.fixture, tt.opts)
			default:
				p, err = Import(bytes.NewReader(tt.data), tt.opts)
			}
			if err == nil {
				t.Fatalf("got profile %q with %d ops, want an error", p.Name, len(p.Ops))
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("got %v, want an error wrapping %v", err, tt.wantIs)
			}
			if tt.wantIs == nil && (errors.Is(err, ErrInvalidTrace) || errors.Is(err, ErrUnitNotFound)) {
				t.Errorf("got %v, want an options error, not a trace error", err)
			}
			fieldtest.WantText(t, err, tt.wantText...)
		})
	}
}

func TestImportKinetoFileMissing(t *testing.T) {
	t.Parallel()
	_, err := ImportFile(filepath.Join(t.TempDir(), "none.json"), Options{})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("got %v, want an error wrapping os.ErrNotExist", err)
	}
}

func FuzzImportKineto(f *testing.F) {
	seeds := []string{
		synthSteps,
		`{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2}]}`,
		`{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1.0005, "dur": 2e1, "args": {"grid": [1, 2, 3], "device": 3}}], "deviceProperties": [{"id": 3, "numSms": 2}]}`,
		`{"traceEvents": [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 1}, {"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": 0}]}`,
		`{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": -5, "dur": 1, "args": {"blocks per SM": -1, "est. achieved occupancy %": 1e9}}]}`,
		`{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": -4e15, "dur": 1e15}, {"ph": "X", "cat": "kernel", "ts": 4e15, "dur": 1e15}]}`,
		`{}`, `[]`, `{"traceEvents": 1}`, `null`, "\x1f\x8b", "",
	}
	for _, s := range seeds {
		f.Add([]byte(s), -1, "")
	}
	f.Add(gz(f, []byte(synthSteps)), 2, "")
	f.Add([]byte(synthSteps), -1, "forward")
	f.Add([]byte(synthSteps), 0, "")
	f.Fuzz(func(t *testing.T, data []byte, step int, annotation string) {
		opts := Options{Annotation: annotation}
		if step >= 0 {
			opts.Step = &step
		}
		p, err := Import(bytes.NewReader(data), opts)
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("imported profile does not validate: %v", err)
		}
		if p.Source == nil || p.Source.Kernels != len(p.Ops) {
			t.Fatalf("source %+v does not match %d ops", p.Source, len(p.Ops))
		}
		if !closeTo(p.SoloUS(), p.Source.SpanUS) {
			t.Fatalf("ops add up to %v µs, span is %v µs", p.SoloUS(), p.Source.SpanUS)
		}
	})
}

// TestGenerateProfiles builds the profiles committed under testdata/profiles
// from the Kineto fixtures. With -update it rewrites them; without, it checks
// that the committed files are exactly what it would write.
func TestGenerateProfiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		trace string
		opts  Options
	}{
		{"v100-train-step", "v100-training-5steps.json.gz", Options{Kind: predictor.KindTraining, Name: "v100-train-step"}},
		{"v100-infer-200", "v100-training-5steps.json.gz", Options{Kind: predictor.KindInference, Name: "v100-infer-200", MaxOps: 200}},
		// One real decode step of vLLM (an LLM engine), for the engine model.
		{"mi300x-vllm-decode-step", "mi300x-vllm-decode-step.json.gz", Options{Kind: predictor.KindInference, Name: "mi300x-vllm-decode-step"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := importFixture(t, tt.trace, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("..", "..", "testdata", "profiles", tt.name+".json")
			if *update {
				if err := predictor.SaveProfile(golden, p); err != nil {
					t.Fatal(err)
				}
			}
			fresh := filepath.Join(t.TempDir(), tt.name+".json")
			if err := predictor.SaveProfile(fresh, p); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./predictor/kineto -run TestGenerateProfiles -update)", err)
			}
			want, err := os.ReadFile(fresh)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from what the importer writes now; run go test ./predictor/kineto -run TestGenerateProfiles -update", golden)
			}
			if _, err := predictor.LoadProfile(golden); err != nil {
				t.Error(err)
			}
		})
	}
}

var update = flag.Bool("update", false, "rewrite the profiles under testdata/profiles")

// A kernel's waves are its blocks per SM over the blocks an SM holds at
// once (achieved occupancy × the SM's warps / a block's warps, at least
// one); a kernel of one partial round is one wave; a missing figure leaves
// them unknown.
func TestWaves(t *testing.T) {
	t.Parallel()
	k := func(bps, occ, threads float64) kinetoKernel {
		return kinetoKernel{blocksPerSM: bps, hasBlocks: true, occupancyPct: occ, hasOccupancy: true, blockThreads: threads}
	}
	tests := []struct {
		name         string
		k            kinetoKernel
		warps, width float64
		want         float64
	}{
		{"10 blocks per SM, 2 resident (50 % of 64 warps, 16-warp blocks)", k(10, 50, 512), 64, 32, 5},
		{"the device's warps: 48 per SM, 3 resident at 100 %", k(9, 100, 512), 48, 32, 3},
		{"64-thread wavefronts: 32 per SM, 8 blocks of 256 resident", k(16, 100, 256), 32, 64, 2},
		{"unknown device: 64 warps of 32", k(10, 50, 512), 0, 0, 5},
		{"one partial round", k(0.8, 20, 512), 64, 32, 1},
		{"occupancy 0 %: one block resident", k(2.5, 0, 128), 64, 32, 2.5},
		{"partial warp blocks round up: 33 threads are 2 warps", k(64, 100, 33), 64, 32, 2},
		{"no occupancy", kinetoKernel{blocksPerSM: 4, hasBlocks: true, blockThreads: 256}, 64, 32, 0},
		{"no block size", kinetoKernel{blocksPerSM: 4, hasBlocks: true, occupancyPct: 50, hasOccupancy: true}, 64, 32, 0},
		{"no blocks per SM", kinetoKernel{occupancyPct: 50, hasOccupancy: true, blockThreads: 256}, 64, 32, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := waves(tt.k, tt.warps, tt.width); got != tt.want {
				t.Errorf("waves = %g, want %g", got, tt.want)
			}
		})
	}
	// The real V100 trace: every kernel has the figures, so every op has
	// waves, and the profile validates.
	p, err := importFixture(t, "v100-training-5steps.json.gz", Options{Kind: predictor.KindTraining, Waves: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, op := range p.Ops {
		if !(op.Waves >= 1) {
			t.Fatalf("op %d (%s): waves %g, want ≥ 1", i, op.Name, op.Waves)
		}
	}
	// Not asked for: none.
	if p, err = importFixture(t, "v100-training-5steps.json.gz", Options{Kind: predictor.KindTraining}); err != nil {
		t.Fatal(err)
	}
	for i, op := range p.Ops {
		if op.Waves != 0 {
			t.Fatalf("op %d: waves %g without Options.Waves", i, op.Waves)
		}
	}
}
