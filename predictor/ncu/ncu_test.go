package ncu

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/colocd/colocd/field"
	"github.com/colocd/colocd/predictor"
)

// longExport is ncu --csv output as ncu writes it (testdata/step.csv): its
// messages first, then one row per kernel and metric, numbers with
// thousands separators.
var longExport = func() string {
	b, err := os.ReadFile("testdata/step.csv")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// rawExport is the same kernels as ncu --csv --page raw writes them, in a
// locale with a decimal comma, the kernels out of order.
const rawExport = `"ID","Kernel Name","gpu__time_duration.sum","launch__grid_size","launch__sm_count","launch__waves_per_multiprocessor","sm__warps_active.avg.pct_of_peak_sustained_active","dram__throughput.avg.pct_of_peak_sustained_elapsed","lts__throughput.avg.pct_of_peak_sustained_elapsed","sm__inst_executed.sum"
"","","msecond","","SM","","%","%","%","inst"
"1","vectorized_elementwise_kernel","0,005632","27","108","0,02","","",""
"0","ampere_sgemm_128x64_nn","1,20448","320","108","1,48","24,96","35,20","41,07","123456"
==PROF== Disconnected from process 4242
`

func TestParseBothForms(t *testing.T) {
	t.Parallel()
	for name, export := range map[string]string{"long": longExport, "raw": rawExport} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ks, err := Parse(strings.NewReader(export))
			if err != nil {
				t.Fatal(err)
			}
			if len(ks) != 2 || ks[0].ID != 0 || ks[1].ID != 1 {
				t.Fatalf("kernels %+v, want ids 0 and 1 in order", ks)
			}
			g, e := ks[0], ks[1]
			near := func(what string, got, want float64) {
				t.Helper()
				if math.Abs(got-want) > 1e-9*max(1, want) {
					t.Errorf("%s: %v, want %v", what, got, want)
				}
			}
			near("gemm duration µs", g.DurUS, 1204.48)
			near("gemm blocks", g.Blocks, 320)
			near("gemm SMs", g.SMs, 108)
			near("gemm waves", g.Waves, 1.48)
			near("gemm occupancy", g.Occupancy, 0.2496)
			near("gemm dram", g.DRAM, 0.352)
			near("gemm l2", g.L2, 0.4107)
			near("elementwise duration µs", e.DurUS, 5.632)
			if g.Name != "ampere_sgemm_128x64_nn" || e.Name != "vectorized_elementwise_kernel" {
				t.Errorf("names %q, %q", g.Name, e.Name)
			}
			if !math.IsNaN(e.DRAM) || !math.IsNaN(e.Occupancy) {
				t.Errorf("elementwise dram %v, occupancy %v: want unknown (NaN)", e.DRAM, e.Occupancy)
			}
		})
	}
}

// A demangled template kernel name runs to kilobytes: it is cut as the
// Kineto importer cuts it, so that profiles stay small enough to send.
func TestLongKernelNamesAreCut(t *testing.T) {
	t.Parallel()
	long := "void cutlass::Kernel<" + strings.Repeat("cutlass::gemm::GemmShape<128, 256, 64>, ", 200) + ">"
	ks, err := Parse(strings.NewReader(strings.Replace(rawExport, "ampere_sgemm_128x64_nn", long, 1)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Profile(ks, Options{Kind: predictor.KindTraining}, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Ops[0].Name; got != predictor.ShortKernelName(long) || len(got) > predictor.KernelNameMax {
		t.Errorf("name of %d bytes: %q, want the %d-byte cut", len(got), got, predictor.KernelNameMax)
	}
}

func TestProfileOfAnExport(t *testing.T) {
	t.Parallel()
	ks, err := Parse(strings.NewReader(longExport))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Profile(ks, Options{Kind: predictor.KindTraining, Name: "step", Device: "NVIDIA A100-SXM4-40GB", Waves: true}, "step.csv")
	if err != nil {
		t.Fatal(err)
	}
	if p.Device.SMs != 108 || len(p.Ops) != 2 || p.Source.Format != "ncu" || p.Source.Kernels != 2 {
		t.Fatalf("profile %+v", p)
	}
	g, e := p.Ops[0], p.Ops[1]
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
	if g.SM != 1 || g.Waves != 1.48 || !near(g.Occupancy, 0.2496) || g.DRAM == nil || !near(*g.DRAM, 0.352) || g.L2 == nil || !near(*g.L2, 0.4107) || g.GapUS != 0 {
		t.Errorf("gemm op %+v", g)
	}
	// 27 blocks on 108 SMs: a quarter of the device, one partial round.
	if e.SM != 0.25 || e.Waves != 1 || e.DRAM != nil || e.Occupancy != 0 {
		t.Errorf("elementwise op %+v", e)
	}
	notes := strings.Join(p.Notes, "\n")
	for _, want := range []string{"no host gaps", "dram (" + MetricDRAM + "): 1 of 2", "occupancy (" + MetricOccupancy + "): 1 of 2", "back to back"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes %q: want %q", notes, want)
		}
	}

	// A unit timed at 2 ms: its idle time comes in gaps, the largest first.
	p, err = Profile(ks, Options{Kind: predictor.KindTraining, UnitMS: 2}, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.SoloUS(); math.Abs(got-2000) > 0.01 {
		t.Errorf("the unit lasts %v µs, want 2000", got)
	}
	if !(p.Ops[0].GapUS > p.Ops[1].GapUS) || p.Ops[0].Waves != 0 {
		t.Errorf("ops %+v: want the long gap first, and no waves without Options.Waves", p.Ops)
	}
}

// Bad input gets an error naming what is wrong.
func TestBadExports(t *testing.T) {
	t.Parallel()
	const head = `"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"` + "\n"
	tests := []struct{ name, export, want string }{
		{"not CSV", "==PROF== nothing was profiled\n", "no CSV header"},
		{"no ID column", `"Kernel Name","Metric Name","Metric Unit","Metric Value"` + "\n", `no "ID" column`},
		{"no kernels", head, "no kernel rows"},
		{"no duration", head + `"0","k","launch__grid_size","","4"` + "\n", "has no gpu__time_duration.sum"},
		{"bad id", head + `"x","k","gpu__time_duration.sum","nsecond","5"` + "\n", `ID "x"`},
		{"bad number", head + `"0","k","gpu__time_duration.sum","nsecond","fast"` + "\n", `gpu__time_duration.sum: "fast", want a finite number`},
		{"negative", head + `"0","k","gpu__time_duration.sum","nsecond","-5"` + "\n", "want a value ≥ 0"},
		{"time unit", head + `"0","k","gpu__time_duration.sum","cycle","5"` + "\n", `unit "cycle"`},
		{"percent unit", head + `"0","k","gpu__time_duration.sum","nsecond","5"` + "\n" + `"0","k","dram__throughput.avg.pct_of_peak_sustained_elapsed","byte","5"` + "\n", `unit "byte", want %`},
		{"long form without values", `"ID","Kernel Name","Metric Name"` + "\n", `no "Metric Unit" column`},
		{"raw without metrics", `"ID","Kernel Name","sm__inst_executed.sum"` + "\n", "names no metric colocd reads"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(strings.NewReader(tt.export))
			if !errors.Is(err, ErrInvalidExport) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want ErrInvalidExport saying %q", err, tt.want)
			}
		})
	}
	ks, err := Parse(strings.NewReader(longExport))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		opts Options
		path string
	}{
		{Options{}, "kind"},
		{Options{Kind: predictor.KindInference, UnitMS: math.NaN()}, "unit_ms"},
		{Options{Kind: predictor.KindInference, UnitMS: 1}, "unit_ms"}, // shorter than its kernels (1.21 ms)
	} {
		var fe *field.Error
		if _, err := Profile(ks, tt.opts, ""); !errors.As(err, &fe) || fe.Path != tt.path {
			t.Errorf("options %+v: error %v, want one naming %s", tt.opts, err, tt.path)
		}
	}
}

// Any input either parses into kernels whose profile is valid (or is
// refused with a reason), or is refused as an invalid export: never a
// panic, never an invalid profile.
func FuzzParse(f *testing.F) {
	f.Add(longExport)
	f.Add(rawExport)
	f.Add("\"ID\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n\"0\",\"gpu__time_duration.sum\",\"second\",\"1e300\"\n")
	f.Add("ID,gpu__time_duration.sum\n,nsecond\n3,\"1,000,000\"\n")
	f.Fuzz(func(t *testing.T, export string) {
		ks, err := Parse(strings.NewReader(export))
		if err != nil {
			if !errors.Is(err, ErrInvalidExport) {
				t.Fatalf("error %v does not wrap ErrInvalidExport", err)
			}
			return
		}
		for _, opts := range []Options{{Kind: predictor.KindInference, Waves: true}, {Kind: predictor.KindTraining, UnitMS: 50}} {
			p, err := Profile(ks, opts, "fuzz")
			if err != nil {
				continue
			}
			if err := p.Validate(); err != nil {
				t.Fatalf("an invalid profile came out: %v", err)
			}
		}
	})
}
