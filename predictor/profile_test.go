package predictor

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestProfileValidateNamesEveryField(t *testing.T) {
	doc := `{"format":"colocd.profile/v0","name":"x","kind":"serving","device":{"sms":-1},"memory_mib":-5,
		"ops":[{"dur_us":-1,"gap_us":2,"sm":1.5,"occupancy":0.5},{"dur_us":3,"gap_us":-2,"sm":0.5,"occupancy":-0.1,"dram":2,"l2":0.3}]}`
	_, err := ParseProfile([]byte(doc))
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v, want a ValidationError", err)
	}
	var got []string
	for _, f := range ve.Fields {
		got = append(got, f.Field)
	}
	want := []string{"format", "kind", "device.sms", "memory_mib", "ops[0].dur_us", "ops[0].sm", "ops[1].gap_us", "ops[1].occupancy", "ops[1].dram"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fields %v, want %v", got, want)
	}
	if msg := err.Error(); !strings.Contains(msg, `format: want "colocd.profile/v1", got "colocd.profile/v0"`) ||
		!strings.Contains(msg, "ops[0].dur_us: want a duration ≥ 0 and ≤ 3.6e9 µs (one hour), got -1") ||
		!strings.Contains(msg, "ops[0].sm: want a fraction in (0,1]: the share of the SMs the kernel fills alone, got 1.5") {
		t.Errorf("message does not say what was expected: %s", msg)
	}
}

func TestProfileParseErrors(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"empty ops no summary", `{"format":"colocd.profile/v1","name":"x","kind":"inference"}`, "ops: want at least one op, or a summary"},
		{"all ops zero", `{"format":"colocd.profile/v1","name":"x","kind":"inference","ops":[{"dur_us":0,"gap_us":1,"sm":1,"occupancy":1}]}`, "at least one op with dur_us > 0"},
		{"inference summary without latency", `{"format":"colocd.profile/v1","name":"x","kind":"inference","summary":{"gpu_util":0.5,"mem_util":0.1}}`, "summary.latency_ms: want the solo latency"},
		{"util zero", `{"format":"colocd.profile/v1","name":"x","kind":"training","summary":{"gpu_util":0,"mem_util":0.1}}`, "summary.gpu_util: want a fraction in (0,1]"},
		{"unknown key", `{"format":"colocd.profile/v1","name":"x","kind":"inference","latency":3}`, `unknown field "latency"`},
		{"wrong type", `{"format":"colocd.profile/v1","name":"x","kind":"inference","ops":[{"dur_us":"3"}]}`, "ops.dur_us: want a JSON number, got a JSON string"},
		{"truncated", `{"format":"colocd.profile/v1","name":`, "truncated"},
		{"trailing", `{"format":"colocd.profile/v1","name":"x","kind":"inference","summary":{"latency_ms":1,"gpu_util":1,"mem_util":0}} {}`, "trailing data"},
		{"no name", `{"format":"colocd.profile/v1","kind":"inference","summary":{"latency_ms":1,"gpu_util":1,"mem_util":0}}`, "name: want a non-empty name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseProfile([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// The documented summary rule: T = latency or iteration time; busy time
// gpu_util·T in n = clamp(ceil(busy/250 µs), 1, 200) equal kernels, each after
// an equal share of the idle time.
func TestSummaryExpansion(t *testing.T) {
	tests := []struct {
		name      string
		p         Profile
		n         int
		dur, gap  float64
		dram      float64
		solo      float64
		iterKnown bool
	}{
		{"inference", Profile{Kind: KindInference, Summary: &Summary{LatencyMS: 6, GPUUtil: 0.7, MemUtil: 0.25}},
			17, 4200.0 / 17, 1800.0 / 17, 0.25 / 0.7, 6000, true},
		{"training with iteration", Profile{Kind: KindTraining, Summary: &Summary{IterationMS: 0.1, GPUUtil: 1, MemUtil: 1}},
			1, 100, 0, 1, 100, true},
		{"stream trainer capped at 200 kernels", Profile{Kind: KindTraining, Summary: &Summary{GPUUtil: 0.6, MemUtil: 0.9}},
			200, 60000.0 / 200, 40000.0 / 200, 1, 100000, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops := tt.p.Expanded()
			if len(ops) != tt.n {
				t.Fatalf("%d ops, want %d", len(ops), tt.n)
			}
			for i, op := range ops {
				if math.Abs(op.DurUS-tt.dur) > 1e-9 || math.Abs(op.GapUS-tt.gap) > 1e-9 || math.Abs(*op.DRAM-tt.dram) > 1e-12 || op.SM != 1 {
					t.Fatalf("op %d = %+v (dram %v), want dur %v gap %v dram %v sm 1", i, op, *op.DRAM, tt.dur, tt.gap, tt.dram)
				}
			}
			if got := tt.p.SoloUS(); math.Abs(got-tt.solo) > 1e-6 {
				t.Errorf("solo %v µs, want %v", got, tt.solo)
			}
			if got := tt.p.IterationKnown(); got != tt.iterKnown {
				t.Errorf("IterationKnown = %v, want %v", got, tt.iterKnown)
			}
		})
	}
}

func TestProfileSaveLoadRoundTrip(t *testing.T) {
	d := 0.3
	p := &Profile{Format: ProfileFormat, Name: "rt <a>", Kind: KindTraining, Device: Device{Name: "NVIDIA H200", SMs: 132},
		Ops: []Op{{Name: "k<float>", DurUS: 10.5, GapUS: 1, SM: 0.5, Occupancy: 0.25, DRAM: &d}}}
	path := filepath.Join(t.TempDir(), "p.json")
	if err := SaveProfile(path, p); err != nil {
		t.Fatal(err)
	}
	got, err := LoadProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, p) {
		t.Errorf("round trip changed the profile:\n got %+v\nwant %+v", got, p)
	}
	raw, _ := os.ReadFile(path)
	if !strings.Contains(string(raw), "k<float>") {
		t.Errorf("saved file escapes kernel names: %s", raw)
	}
	// An invalid profile is refused and leaves the old file untouched.
	bad := *p
	bad.Kind = "serving"
	if err := SaveProfile(path, &bad); err == nil {
		t.Fatal("SaveProfile accepted kind serving")
	}
	if again, _ := os.ReadFile(path); string(again) != string(raw) {
		t.Error("a refused save changed the file")
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*tmp*")); len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

func FuzzParseProfile(f *testing.F) {
	f.Add([]byte(`{"format":"colocd.profile/v1","name":"x","kind":"inference","summary":{"latency_ms":4,"gpu_util":0.8,"mem_util":0.2}}`))
	f.Add([]byte(`{"format":"colocd.profile/v1","name":"t","kind":"training","ops":[{"dur_us":5,"gap_us":1,"sm":1,"occupancy":0.5,"dram":0.1}]}`))
	f.Add([]byte(`{"format":"colocd.profile/v1","name":"t","kind":"training","summary":{"gpu_util":1e-300,"mem_util":1}}`))
	f.Add([]byte(`{"ops":[{"dur_us":1e308,"gap_us":1e308}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseProfile(data)
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("parsed profile does not validate: %v", err)
		}
		ops := p.Expanded()
		if len(ops) == 0 || len(ops) > max(len(p.Ops), SummaryMaxKernels) {
			t.Fatalf("expanded to %d ops", len(ops))
		}
		for _, op := range ops {
			if op.DurUS < 0 || op.GapUS < 0 || math.IsNaN(op.DurUS) || math.IsNaN(op.GapUS) {
				t.Fatalf("expanded op %+v", op)
			}
		}
	})
}
