package predictor

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/colocd/colocd/field"
	"github.com/colocd/colocd/internal/fieldtest"
)

func TestProfileValidateNamesEveryField(t *testing.T) {
	t.Parallel()
	doc := `{"format":"colocd.profile/v0","name":"x","kind":"serving","device":{"sms":-1},"memory_mib":-5,
		"ops":[{"dur_us":-1,"gap_us":2,"sm":1.5,"occupancy":0.5},{"dur_us":3,"gap_us":-2,"sm":0.5,"occupancy":-0.1,"dram":2,"l2":0.3}]}`
	_, err := ParseProfile([]byte(doc))
	var ve *field.List
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v, want a field.List", err)
	}
	fieldtest.WantPaths(t, err, "format", "kind", "device.sms", "memory_mib", "ops[0].dur_us", "ops[0].sm", "ops[1].gap_us", "ops[1].occupancy", "ops[1].dram")
	fieldtest.WantText(t, err, `format: want "colocd.profile/v1", got "colocd.profile/v0"`,
		"ops[0].dur_us: want a duration ≥ 0 and ≤ 3.6e9 µs (one hour), got -1",
		"ops[0].sm: want a fraction in (0,1]: the share of the SMs the kernel fills alone, got 1.5")
}

func TestProfileParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, doc, want string
	}{
		{"empty ops no summary", `{"format":"colocd.profile/v1","name":"x","kind":"inference"}`, "ops: want at least one op, or a summary"},
		{"all ops zero", `{"format":"colocd.profile/v1","name":"x","kind":"inference","ops":[{"dur_us":0,"gap_us":1,"sm":1,"occupancy":1}]}`, "at least one op with dur_us > 0"},
		{"inference summary without latency", `{"format":"colocd.profile/v1","name":"x","kind":"inference","summary":{"gpu_util":0.5,"mem_util":0.1}}`, "summary.latency_ms: want the solo latency"},
		{"util zero", `{"format":"colocd.profile/v1","name":"x","kind":"training","summary":{"gpu_util":0,"mem_util":0.1}}`, "summary.gpu_util: want a fraction in (0,1]"},
		{"unknown key", `{"format":"colocd.profile/v1","name":"x","kind":"inference","latency":3}`, "latency: want a known key, got an unknown key"},
		{"wrong type", `{"format":"colocd.profile/v1","name":"x","kind":"inference","ops":[{"dur_us":"3"}]}`, `ops[0].dur_us: want a number, got the string "3"`},
		{"truncated", `{"format":"colocd.profile/v1","name":`, "name: want valid JSON: a value, got the end of the document (cut off)"},
		{"trailing", `{"format":"colocd.profile/v1","name":"x","kind":"inference","summary":{"latency_ms":1,"gpu_util":1,"mem_util":0}} {}`, "want one JSON document, got more data after it"},
		{"case-differing key", `{"format":"colocd.profile/v1","name":"x","kind":"inference","MEMORY_MIB":3}`, `MEMORY_MIB: want the key "memory_mib" (keys are case-sensitive)`},
		{"duplicate key", "{\"format\":\"colocd.profile/v1\",\n\"name\":\"x\",\n\"name\":\"y\"}", "line 3: name: want each key once per object, got it again (first on line 2)"},
		{"no name", `{"format":"colocd.profile/v1","kind":"inference","summary":{"latency_ms":1,"gpu_util":1,"mem_util":0}}`, "name: want a non-empty name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseProfile([]byte(tt.doc))
			fieldtest.WantText(t, err, tt.want)
		})
	}
}

// The bounds that keep every number of a profile finite and the simulation's
// events per simulated second bounded: each violation names its field and
// says what was expected; a value at the bound is valid.
func TestProfileValidateBounds(t *testing.T) {
	t.Parallel()
	neg := -1.0
	ops := func(n int, dur, gap float64) []Op {
		out := make([]Op, n)
		for i := range out {
			out[i] = Op{DurUS: dur, GapUS: gap, SM: 1, Occupancy: 1}
		}
		return out
	}
	tests := []struct {
		name  string
		edit  func(p *Profile)
		field string // "": valid
		want  string // in what the error says was expected
		got   string
	}{
		{"memory at 16 TiB", func(p *Profile) { p.MemoryMiB = MaxMemoryMiB }, "", "", ""},
		{"memory past 16 TiB", func(p *Profile) { p.MemoryMiB = math.Nextafter(MaxMemoryMiB, math.Inf(1)) }, "memory_mib", "MiB in [0, 16777216] (16 TiB", "1.6777216000000004e+07"},
		{"memory 1e300", func(p *Profile) { p.MemoryMiB = 1e300 }, "memory_mib", "MiB in [0, 16777216]", "1e+300"},
		{"memory 1e19 (past int64)", func(p *Profile) { p.MemoryMiB = 1e19 }, "memory_mib", "MiB in [0, 16777216]", "1e+19"},
		{"memory NaN", func(p *Profile) { p.MemoryMiB = math.NaN() }, "memory_mib", "MiB in [0, 16777216]", "NaN"},
		{"memory -Inf", func(p *Profile) { p.MemoryMiB = math.Inf(-1) }, "memory_mib", "MiB in [0, 16777216]", "-Inf"},
		{"device with 10,000 SMs", func(p *Profile) { p.Device.SMs = MaxDeviceSMs }, "", "", ""},
		{"device with 10,001 SMs", func(p *Profile) { p.Device.SMs = MaxDeviceSMs + 1 }, "device.sms", "an SM count in [0, 10000]", "10001"},
		{"op duration NaN", func(p *Profile) { p.Ops[0].DurUS = math.NaN() }, "ops[0].dur_us", "≤ 3.6e9 µs (one hour)", "NaN"},
		{"op gap +Inf", func(p *Profile) { p.Ops[0].GapUS = math.Inf(1) }, "ops[0].gap_us", "≤ 3.6e9 µs (one hour)", "+Inf"},
		{"op gap past an hour", func(p *Profile) { p.Ops[0].GapUS = MaxDurationUS * 2 }, "ops[0].gap_us", "≤ 3.6e9 µs (one hour)", "7.2e+09"},
		{"op l2 NaN", func(p *Profile) { v := math.NaN(); p.Ops[0].L2 = &v }, "ops[0].l2", "a fraction in [0,1]", "NaN"},
		// The probe: a vanishing kernel after a 1 µs gap is harmless (one
		// event per µs); what the bound stops is many ops in a short unit.
		{"op of 1e-300 µs after a 1 µs gap", func(p *Profile) { p.Ops = []Op{{DurUS: 1e-300, GapUS: 1, SM: 1, Occupancy: 1}} }, "", "", ""},
		{"zero-length ops among long ones", func(p *Profile) { p.Ops = append(ops(99, 0, 0), ops(1, 1, 0)...) }, "", "", ""},
		{"1,000 ops in 1 µs", func(p *Profile) { p.Ops = append(ops(999, 0, 0), ops(1, 1, 0)...) }, "ops", "0.01 µs per op (1000 ops: 10 µs)", "1"},
		{"10,000 ops of 1e-300 µs", func(p *Profile) { p.Ops = ops(10_000, 1e-300, 1e-4) }, "ops", "(10000 ops: 100 µs)", "0.9999999999999062"},
		{"source with negative figures", func(p *Profile) {
			p.Source = &Source{Kernels: -1, KernelTimeUS: neg, SpanUS: 1, Streams: 1}
		}, "source.kernels", "a count ≥ 0", "-1"},
		{"source with a NaN span", func(p *Profile) { p.Source = &Source{SpanUS: math.NaN()} }, "source.span_us", "a finite number ≥ 0", "NaN"},
		{"summary latency past an hour", func(p *Profile) {
			p.Ops, p.Summary = nil, &Summary{IterationMS: 3.6e6 * 2, GPUUtil: 1}
		}, "summary.iteration_ms", "(1 µs to one hour)", "7.2e+06"},
		{"summary util NaN", func(p *Profile) { p.Ops, p.Summary = nil, &Summary{GPUUtil: math.NaN()} }, "summary.gpu_util", "a fraction in (0,1]", "NaN"},
		{"waves below 1", func(p *Profile) { p.Ops[0].Waves = 0.5 }, "ops[0].waves", "a count of block rounds in [1, 1e9] (0: unknown)", "0.5"},
		{"summary sm_util above gpu_util", func(p *Profile) { p.Ops, p.Summary = nil, &Summary{IterationMS: 10, GPUUtil: 0.5, SMUtil: 0.6} }, "summary.sm_util", "a fraction in [0, gpu_util]", "0.6"},
		{"summary kernel_us below 1", func(p *Profile) { p.Ops, p.Summary = nil, &Summary{IterationMS: 10, GPUUtil: 0.5, KernelUS: 0.5} }, "summary.kernel_us", "a mean kernel length in [1, 3.6e9] µs", "0.5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Profile{Format: ProfileFormat, Name: "t", Kind: KindTraining, Device: Device{SMs: 132}, MemoryMiB: 1024, Ops: ops(4, 100, 10)}
			tt.edit(p)
			err := p.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var ve *field.List
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v, want a field.List", err)
			}
			f := ve.Errors[0]
			if f.Path != tt.field || !strings.Contains(f.Want, tt.want) || f.Got != tt.got {
				t.Errorf("got %s: want %q, got %q; want %s: want …%q…, got %q", f.Path, f.Want, f.Got, tt.field, tt.want, tt.got)
			}
		})
	}
}

// The documented summary rule: T = latency or iteration time; busy time
// B = gpu_util·T in n = clamp(round(B/K), 1, 1000) equal kernels, each
// after a launch gap of min(1 µs, I/n); the rest of the idle time in L
// long gaps falling as 1/j, the largest before the first kernel.
func TestSummaryExpansion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		p         Profile
		n, long   int
		launch    float64
		sm, dram  float64
		solo      float64
		iterKnown bool
	}{
		{"inference: one long gap", Profile{Kind: KindInference, Summary: &Summary{LatencyMS: 6, GPUUtil: 0.7, MemUtil: 0.25}},
			34, 1, 1, 1, 0.25 / 0.7, 6000, true},
		{"training with iteration, never idle", Profile{Kind: KindTraining, Summary: &Summary{IterationMS: 0.1, GPUUtil: 1, MemUtil: 1}},
			1, 0, 0, 1, 1, 100, true},
		{"stream trainer: 20 long gaps of 2 ms on average", Profile{Kind: KindTraining, Summary: &Summary{GPUUtil: 0.6, MemUtil: 0.9}},
			480, 20, 1, 1, 1, 100000, false},
		{"hints: kernel length and SM activity", Profile{Kind: KindInference, Summary: &Summary{LatencyMS: 4, GPUUtil: 0.5, MemUtil: 0.2, KernelUS: 500, SMUtil: 0.2}},
			4, 1, 1, 0.4, 0.4, 4000, true},
		{"long gaps capped at a third of the kernels", Profile{Kind: KindTraining, Summary: &Summary{IterationMS: 100, GPUUtil: 0.01, MemUtil: 0}},
			8, 2, 1, 1, 0, 100000, true},
		{"kernels capped at 1000", Profile{Kind: KindTraining, Summary: &Summary{IterationMS: 1000, GPUUtil: 0.5, MemUtil: 0.1}},
			1000, 250, 1, 1, 0.2, 1e6, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.p.Summary
			unit := tt.solo
			busy := s.GPUUtil * unit
			ops := tt.p.Expanded()
			if len(ops) != tt.n {
				t.Fatalf("%d ops, want %d", len(ops), tt.n)
			}
			var idle float64
			var long []float64
			for i, op := range ops {
				if math.Abs(op.DurUS-busy/float64(tt.n)) > 1e-9 || math.Abs(*op.DRAM-tt.dram) > 1e-12 || math.Abs(op.SM-tt.sm) > 1e-12 || op.Occupancy != 1 {
					t.Fatalf("op %d = %+v (dram %v), want dur %v dram %v sm %v", i, op, *op.DRAM, busy/float64(tt.n), tt.dram, tt.sm)
				}
				idle += op.GapUS
				if op.GapUS > tt.launch+1e-9 {
					long = append(long, op.GapUS-tt.launch)
				} else if math.Abs(op.GapUS-tt.launch) > 1e-9 {
					t.Fatalf("op %d: gap %v, want the launch gap %v or a long one", i, op.GapUS, tt.launch)
				}
			}
			if math.Abs(idle-(unit-busy)) > 1e-6 {
				t.Errorf("idle %v µs, want %v", idle, unit-busy)
			}
			if len(long) != tt.long {
				t.Fatalf("%d long gaps, want %d", len(long), tt.long)
			}
			if tt.long > 0 {
				if ops[0].GapUS-tt.launch != slices.Max(long) {
					t.Errorf("the first gap %v is not the largest %v", ops[0].GapUS, slices.Max(long))
				}
				var h float64
				for j := 1; j <= tt.long; j++ {
					h += 1 / float64(j)
				}
				slices.Sort(long)
				slices.Reverse(long)
				rest := unit - busy - float64(tt.n)*tt.launch
				for j, g := range long {
					if want := rest / (float64(j+1) * h); math.Abs(g-want) > 1e-6 {
						t.Errorf("long gap %d: %v µs, want %v (1/j)", j+1, g, want)
					}
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

func FuzzParseProfile(f *testing.F) {
	f.Add([]byte(`{"format":"colocd.profile/v1","name":"x","kind":"inference","summary":{"latency_ms":4,"gpu_util":0.8,"mem_util":0.2}}`))
	f.Add([]byte(`{"format":"colocd.profile/v1","name":"t","kind":"training","ops":[{"dur_us":5,"gap_us":1,"sm":1,"occupancy":0.5,"dram":0.1}]}`))
	f.Add([]byte(`{"format":"colocd.profile/v1","name":"t","kind":"training","summary":{"gpu_util":1e-300,"mem_util":1}}`))
	f.Add([]byte(`{"ops":[{"dur_us":1e308,"gap_us":1e308}]}`))
	f.Add([]byte(`{"format":"colocd.profile/v1","name":"t","kind":"training","memory_mib":1e300,"summary":{"gpu_util":1,"mem_util":0}}`))
	f.Add([]byte(`{"format":"colocd.profile/v1","name":"t","kind":"training","device":{"sms":132},"memory_mib":16777216,` +
		`"ops":[{"dur_us":1e-300,"gap_us":1,"sm":1,"occupancy":1},{"dur_us":0,"gap_us":0,"sm":1,"occupancy":1}]}`))
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
		// Every number is bounded: memory rounds up to an int in range, and
		// the unit lasts at least MinMeanOpUS per op (events per simulated
		// second stay bounded), but for the rounding of a summary's split.
		if !(p.MemoryMiB >= 0 && p.MemoryMiB <= MaxMemoryMiB) || p.Device.SMs < 0 || p.Device.SMs > MaxDeviceSMs {
			t.Fatalf("memory_mib %g, device.sms %d out of bounds", p.MemoryMiB, p.Device.SMs)
		}
		if solo := p.SoloUS() * (1 + 1e-9); !(solo >= MinUnitUS && solo >= float64(len(ops))*MinMeanOpUS) || math.IsInf(solo, 0) {
			t.Fatalf("a unit of %g µs for %d ops", solo, len(ops))
		}
	})
}
