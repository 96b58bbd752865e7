package llm

import (
	"math"
	"testing"
	"time"

	"github.com/colocd/colocd/internal/fieldtest"
	"github.com/colocd/colocd/predictor"
)

func TestDefaultIsValid(t *testing.T) {
	t.Parallel()
	cfg := Default()
	fieldtest.WantPaths(t, cfg.Validate())
	// 141 GB · 0.9 − 13.48 GB of weights − 2 GB, in blocks of 16 tokens
	// of 512 KiB each: 13,282 blocks, some 212k tokens.
	if got := cfg.KVBlocks(); got != 13282 {
		t.Errorf("KVBlocks = %d, want 13282", got)
	}
	if _, err := New(cfg); err != nil {
		t.Errorf("New(Default()) = %v", err)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(*Config)
		paths  []string
	}{
		{"valid tiny", func(*Config) {}, nil},
		{"zero model", func(c *Config) { c.Model = ModelSpec{} },
			[]string{"model.params", "model.layers", "model.hidden", "model.bytes_per_param", "model.kv_bytes_per_token"}},
		{"NaN hardware", func(c *Config) {
			c.Hardware = Hardware{MemoryBytes: math.NaN(), Bandwidth: math.Inf(1), PeakFLOPS: -1, MFU: 1.5, FixedMS: -1}
		}, []string{"hardware.memory_bytes", "hardware.bandwidth", "hardware.peak_flops", "hardware.mfu", "hardware.fixed_ms"}},
		{"budget under max_num_seqs", func(c *Config) { c.Scheduler.MaxNumBatchedTokens = 2 }, []string{"scheduler.max_num_batched_tokens"}},
		{"scheduler zero", func(c *Config) {
			c.Scheduler = Scheduler{MaxNumBatchedTokens: 1, KVBlocks: -1}
		}, []string{"scheduler.max_num_seqs", "scheduler.max_model_len", "scheduler.block_size", "scheduler.kv_blocks"}},
		{"memory fields only without kv_blocks", func(c *Config) {
			c.Scheduler.KVBlocks = 0
			c.Scheduler.GPUMemoryUtilization = 0
			c.Scheduler.ReserveBytes = -1
		}, []string{"scheduler.gpu_memory_utilization", "scheduler.reserve_bytes"}},
		{"cache under one max_model_len request", func(c *Config) { c.Scheduler.KVBlocks = 15 }, []string{"scheduler.kv_blocks"}},
		{"no memory left for the cache", func(c *Config) {
			c.Scheduler.KVBlocks = 0
			c.Scheduler.GPUMemoryUtilization = 0.1
			c.Scheduler.ReserveBytes = 0
		}, []string{"scheduler.kv_blocks"}},
		{"interference", func(c *Config) {
			c.Interference = Interference{MinSMShare: 0, LaunchesPerLayer: -1, MaxKernelMS: math.NaN(), NoiseSigma: 2}
		}, []string{"interference.min_sm_share", "interference.launches_per_layer", "interference.max_kernel_ms", "interference.noise_sigma"}},
		{"slowdown", func(c *Config) { c.Slowdown = -1 }, []string{"slowdown"}},
		{"itl buckets out of order", func(c *Config) { c.ITLBuckets = []float64{0.1, 0.05} }, []string{"itl_buckets"}},
		{"itl buckets repeated", func(c *Config) { c.ITLBuckets = []float64{0.1, 0.1} }, []string{"itl_buckets"}},
		{"itl buckets not finite", func(c *Config) { c.ITLBuckets = []float64{0.1, math.Inf(1)} }, []string{"itl_buckets"}},
		{"itl buckets at 0", func(c *Config) { c.ITLBuckets = []float64{0, 0.1} }, []string{"itl_buckets"}},
		{"itl buckets empty", func(c *Config) { c.ITLBuckets = []float64{} }, []string{"itl_buckets"}},
		{"itl buckets of one's own", func(c *Config) { c.ITLBuckets = []float64{0.1, 0.125, 0.15} }, nil},
		{"defaults", func(c *Config) { c.DefaultPromptTokens, c.DefaultOutputTokens = 0, MaxTraceTokens+1 },
			[]string{"default_prompt_tokens", "default_output_tokens"}},
		{"requests out of order", func(c *Config) {
			c.Requests = []Request{{Arrival: time.Second}, {Arrival: 0}}
		}, []string{"requests[1]"}},
		{"negative tokens", func(c *Config) { c.Requests = []Request{{PromptTokens: -1}} }, []string{"requests[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := tiny()
			tt.change(&cfg)
			fieldtest.WantPaths(t, cfg.Validate(), tt.paths...)
			if _, err := New(cfg); (err == nil) != (len(tt.paths) == 0) {
				t.Errorf("New = %v", err)
			}
		})
	}
}

func TestTrainerValidate(t *testing.T) {
	t.Parallel()
	fieldtest.WantPaths(t, Trainer{Pct: 100, Duty: 1, BandwidthFrac: 1, KernelMS: 1}.Validate())
	fieldtest.WantPaths(t, Trainer{Pct: -1, Duty: 1.1, BandwidthFrac: math.NaN(), KernelMS: math.Inf(1)}.Validate(),
		"pct", "duty", "bandwidth_frac", "kernel_ms")
}

func TestTrainerFromProfile(t *testing.T) {
	t.Parallel()
	dram := func(v float64) *float64 { return &v }
	tests := []struct {
		name string
		p    *predictor.Profile
		want Trainer
	}{
		{"nil", nil, Trainer{}},
		// Busy 300 µs of a 400 µs span; 100 µs a kernel; dram weighted by
		// time over the ops that have it: (100·0.2 + 200·0.5)/300.
		{"ops", &predictor.Profile{Kind: predictor.KindTraining, Ops: []predictor.Op{
			{DurUS: 100, GapUS: 50, DRAM: dram(0.2)}, {DurUS: 200, GapUS: 50, DRAM: dram(0.5)}, {DurUS: 0}}},
			Trainer{Pct: 40, Duty: 0.75, BandwidthFrac: 0.4, KernelMS: 0.1}},
		{"ops without dram", &predictor.Profile{Ops: []predictor.Op{{DurUS: 500, GapUS: 500}}},
			Trainer{Pct: 40, Duty: 0.5, BandwidthFrac: DefaultBandwidthFrac, KernelMS: 0.5}},
		{"summary", &predictor.Profile{Summary: &predictor.Summary{GPUUtil: 0.8, MemUtil: 0.4, KernelUS: 250}},
			Trainer{Pct: 40, Duty: 0.8, BandwidthFrac: 0.5, KernelMS: 0.25}},
		{"summary without kernel length", &predictor.Profile{Summary: &predictor.Summary{GPUUtil: 0.5, MemUtil: 0.9}},
			Trainer{Pct: 40, Duty: 0.5, BandwidthFrac: 1, KernelMS: predictor.SummaryKernelUS / 1000}},
		{"empty", &predictor.Profile{}, Trainer{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := TrainerFromProfile(tt.p, 40)
			if got.Pct != tt.want.Pct || !near(got.Duty, tt.want.Duty, 1e-12) || !near(got.BandwidthFrac, tt.want.BandwidthFrac, 1e-12) ||
				!near(got.KernelMS, tt.want.KernelMS, 1e-12) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			fieldtest.WantPaths(t, got.Validate())
		})
	}
}

// A real training profile gives a trainer within bounds.
func TestTrainerFromShippedProfile(t *testing.T) {
	t.Parallel()
	p, err := predictor.LoadProfile("../../testdata/profiles/v100-train-step.json")
	if err != nil {
		t.Fatal(err)
	}
	tr := TrainerFromProfile(p, 50)
	fieldtest.WantPaths(t, tr.Validate())
	if !(tr.Duty > 0 && tr.KernelMS > 0) {
		t.Errorf("trainer %+v from %s", tr, p.Name)
	}
}
