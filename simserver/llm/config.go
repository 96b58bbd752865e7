package llm

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/colocd/colocd/field"
)

// ModelSpec is the served model's shape: what the step-time law needs.
type ModelSpec struct {
	// Params is the parameter count: each scheduled token costs 2·Params
	// FLOPs in the linear layers.
	Params float64
	// Layers and Hidden are the transformer's depth and width (the query
	// heads times the head size): attention costs 4·Layers·Hidden FLOPs per
	// query-key pair, and the interference law counts kernel launches per
	// layer.
	Layers, Hidden int
	// BytesPerParam is the weights' storage width (2 for fp16 and bf16):
	// every step reads Params·BytesPerParam bytes of weights.
	BytesPerParam float64
	// KVBytesPerToken is the KV cache's size per token over all layers:
	// 2 (K and V) · Layers · KV heads · head size · bytes per element.
	KVBytesPerToken float64
}

// WeightBytes is the weights' size in bytes.
func (m ModelSpec) WeightBytes() float64 { return m.Params * m.BytesPerParam }

// Llama2_7B is the shape of Llama-2-7B in fp16: 6.74e9 parameters, 32
// layers of width 4096, 32 KV heads (no grouped-query attention), so 512 KiB
// of KV cache per token. From the model's published configuration.
var Llama2_7B = ModelSpec{Params: 6.74e9, Layers: 32, Hidden: 4096, BytesPerParam: 2, KVBytesPerToken: 2 * 32 * 4096 * 2}

// Hardware is the GPU as the roofline sees it.
type Hardware struct {
	// MemoryBytes is the device memory.
	MemoryBytes float64
	// Bandwidth is the HBM bandwidth in bytes per second.
	Bandwidth float64
	// PeakFLOPS is the dense fp16 tensor-core peak, FLOP/s.
	PeakFLOPS float64
	// MFU is the fraction of PeakFLOPS the engine's kernels reach when
	// compute-bound, in (0, 1].
	MFU float64
	// FixedMS is each step's fixed cost in ms: the scheduler, input
	// preparation, sampling and launch overhead that neither FLOPs nor
	// bytes explain.
	FixedMS float64
}

// H200 is an H200-class GPU from NVIDIA's published specifications: 141 GB
// of HBM3e at 4.8 TB/s, about 989 TFLOPS of dense fp16. MFU 0.5 and a
// fixed 1.5 ms a step are assumptions of the roofline, not measurements.
var H200 = Hardware{MemoryBytes: 141e9, Bandwidth: 4.8e12, PeakFLOPS: 989e12, MFU: 0.5, FixedMS: 1.5}

// Scheduler holds the engine's caps, named as vLLM names them.
type Scheduler struct {
	// MaxNumBatchedTokens is the token budget of one step
	// (max_num_batched_tokens); a longer prompt is prefilled in chunks.
	MaxNumBatchedTokens int
	// MaxNumSeqs caps the requests running at once (max_num_seqs).
	MaxNumSeqs int
	// MaxModelLen caps a request's prompt plus output tokens
	// (max_model_len); longer requests are refused, as vLLM's frontend
	// refuses them, and never reach the engine.
	MaxModelLen int
	// BlockSize is the KV cache's block in tokens (16 in vLLM).
	BlockSize int
	// GPUMemoryUtilization is the fraction of device memory the engine
	// may use (gpu_memory_utilization).
	GPUMemoryUtilization float64
	// ReserveBytes is the part of that memory kept for activations and
	// CUDA graphs, which vLLM measures by profiling and this model takes
	// as given.
	ReserveBytes float64
	// KVBlocks, when > 0, is the KV cache's size in blocks; 0 derives it:
	// (MemoryBytes·GPUMemoryUtilization − weights − ReserveBytes) /
	// (KVBytesPerToken·BlockSize).
	KVBlocks int
}

// Interference holds the constants of the law by which trainers slow
// the engine's steps (doc.go).
type Interference struct {
	// MinSMShare is the least fraction of the SMs the engine keeps however
	// many trainers hold them, in (0, 1]: MPS's block scheduler gives a
	// client with queued blocks SMs as other clients' blocks retire, about
	// evenly between two busy clients (the default, 0.5).
	MinSMShare float64
	// LaunchesPerLayer is how many of each layer's kernel launches meet a
	// trainer's blocks in flight (a head-of-line wait); the step has
	// Layers × LaunchesPerLayer of them.
	LaunchesPerLayer float64
	// MaxKernelMS bounds the trainer kernel length a launch may wait on:
	// a kernel's blocks retire in waves, so a launch never waits for a
	// whole very long kernel.
	MaxKernelMS float64
	// NoiseSigma is the standard deviation of each step's log-normal
	// noise factor (mean 1); 0 for none.
	NoiseSigma float64
}

// Config is an engine: its model, hardware, caps and law, its requests and
// the trainers next to it.
type Config struct {
	Model        ModelSpec
	Hardware     Hardware
	Scheduler    Scheduler
	Interference Interference
	// ModelName is the model_name label of the metrics page.
	ModelName string
	// Requests are the arrivals in order of Arrival, offsets from Start.
	Requests []Request
	Start    time.Time
	// DefaultPromptTokens and DefaultOutputTokens stand in for a
	// request's 0 (a plain trace without token counts).
	DefaultPromptTokens, DefaultOutputTokens int
	// Trainers says what runs next to the engine; it is read before each
	// step. Nil: nothing does. A replay whose trainers change over
	// simulated time advances the engine by at most the period they
	// change in.
	Trainers func() []Trainer
	// Seed seeds the step noise: equal configs and seeds give equal runs.
	Seed uint64
	// OnFinish, when set, is told of each finished request, in the order
	// they finished, by the Advance that passed their end and outside the
	// engine's lock (so it may read the engine).
	OnFinish func(Finished)
	// OnToken, when set, is told of each token sampled: when, whether it
	// is its request's first, and its latency (time to first token, or
	// the inter-token latency since the request's previous one). It is
	// called with the engine's lock held: it must not call the engine.
	OnToken func(at time.Time, first bool, latency time.Duration)
	// Slowdown multiplies every step's time (0: 1): a GPU, driver or model
	// slower than the law by this much, which no prediction knows of.
	Slowdown float64
	// ITLBuckets are the bounds of vllm:inter_token_latency_seconds, in
	// seconds (nil: vLLM's own, ITLBuckets): a server whose histogram
	// resolves its SLO, or one that does not.
	ITLBuckets []float64
}

// MaxBuckets bounds a histogram's bounds.
const MaxBuckets = 64

// Default is a Llama-2-7B-shaped model in fp16 on an H200, with vLLM V1's
// defaults for its API server on a GPU of 70 GiB or more (8192 batched
// tokens, 1024 sequences, 16-token blocks, 90 % of memory), a 32k window
// so that long prompts of recorded traces run (the law depends on shapes,
// not on the window), 2 GB kept for activations, the interference
// constants of doc.go, and a plain trace's missing token counts set to
// about the medians of Azure's 2023 conversation trace (1024 in, 128 out).
func Default() Config {
	return Config{
		Model:    Llama2_7B,
		Hardware: H200,
		Scheduler: Scheduler{MaxNumBatchedTokens: 8192, MaxNumSeqs: 1024, MaxModelLen: 32768, BlockSize: 16,
			GPUMemoryUtilization: 0.9, ReserveBytes: 2e9},
		Interference:        Interference{MinSMShare: 0.5, LaunchesPerLayer: 4, MaxKernelMS: 5, NoiseSigma: 0.02},
		ModelName:           "meta-llama/Llama-2-7b-hf",
		DefaultPromptTokens: 1024,
		DefaultOutputTokens: 128,
	}
}

// Bounds on a config's numbers: far beyond any real GPU or model, and
// small enough that the arithmetic stays finite and exact where it counts.
const (
	MaxParams      = 1e13
	MaxLayers      = 1 << 10
	MaxHidden      = 1 << 17
	MaxMemoryBytes = 1e14
	MaxBandwidth   = 1e15
	MaxFLOPS       = 1e18
	MaxFixedMS     = 1000
	MaxBatched     = 1 << 20
	MaxSeqs        = 1 << 16
	MaxKVBlocks    = 1 << 24
)

// KVBlocks is the KV cache's size in blocks: Scheduler.KVBlocks, or what
// the memory left after the weights and the reserve holds.
func (c *Config) KVBlocks() int {
	if c.Scheduler.KVBlocks > 0 {
		return c.Scheduler.KVBlocks
	}
	free := c.Hardware.MemoryBytes*c.Scheduler.GPUMemoryUtilization - c.Model.WeightBytes() - c.Scheduler.ReserveBytes
	per := c.Model.KVBytesPerToken * float64(c.Scheduler.BlockSize)
	if !(free > 0 && per > 0) {
		return 0
	}
	return int(min(free/per, MaxKVBlocks))
}

// Validate checks every field and returns a *field.List naming each bad
// one, or nil.
func (c *Config) Validate() error {
	var fc field.Checker
	num := func(path string, v, lo, hi float64, what string) {
		if !(v >= lo && v <= hi) {
			fc.Add(path, fmt.Sprintf("%s in [%g, %g]", what, lo, hi), strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
	pos := func(path string, v, hi float64, what string) {
		if !(v > 0 && v <= hi) {
			fc.Add(path, fmt.Sprintf("%s above 0, at most %g", what, hi), strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
	integer := func(path string, v, lo, hi int, what string) {
		if v < lo || v > hi {
			fc.Add(path, fmt.Sprintf("%s in [%d, %d]", what, lo, hi), strconv.Itoa(v))
		}
	}
	m, h, s, in := c.Model, c.Hardware, c.Scheduler, c.Interference
	pos("model.params", m.Params, MaxParams, "a parameter count")
	integer("model.layers", m.Layers, 1, MaxLayers, "a layer count")
	integer("model.hidden", m.Hidden, 1, MaxHidden, "a hidden size")
	num("model.bytes_per_param", m.BytesPerParam, 0.125, 8, "bytes per parameter")
	pos("model.kv_bytes_per_token", m.KVBytesPerToken, 1e8, "bytes of KV cache per token")
	pos("hardware.memory_bytes", h.MemoryBytes, MaxMemoryBytes, "device memory in bytes")
	pos("hardware.bandwidth", h.Bandwidth, MaxBandwidth, "bytes per second")
	pos("hardware.peak_flops", h.PeakFLOPS, MaxFLOPS, "FLOP/s")
	pos("hardware.mfu", h.MFU, 1, "a fraction")
	num("hardware.fixed_ms", h.FixedMS, 0, MaxFixedMS, "ms")
	integer("scheduler.max_num_batched_tokens", s.MaxNumBatchedTokens, max(1, s.MaxNumSeqs), MaxBatched,
		"a token budget, at least max_num_seqs,")
	integer("scheduler.max_num_seqs", s.MaxNumSeqs, 1, MaxSeqs, "a request count")
	integer("scheduler.max_model_len", s.MaxModelLen, 2, MaxTraceTokens*2, "tokens")
	integer("scheduler.block_size", s.BlockSize, 1, 1024, "tokens")
	integer("scheduler.kv_blocks", s.KVBlocks, 0, MaxKVBlocks, "0 (from memory) or a block count")
	if s.KVBlocks == 0 {
		pos("scheduler.gpu_memory_utilization", s.GPUMemoryUtilization, 1, "a fraction")
		num("scheduler.reserve_bytes", s.ReserveBytes, 0, MaxMemoryBytes, "bytes")
	}
	if fc.Len() == 0 {
		if blocks := c.KVBlocks(); blocks*s.BlockSize < s.MaxModelLen {
			fc.Add("scheduler.kv_blocks", fmt.Sprintf("a KV cache that holds one request of max_model_len (%d tokens): at least %d blocks; "+
				"lower max_model_len, or give the cache more memory", s.MaxModelLen, ceilDiv(s.MaxModelLen, s.BlockSize)),
				fmt.Sprintf("%d blocks", blocks))
		}
	}
	pos("interference.min_sm_share", in.MinSMShare, 1, "a fraction")
	num("interference.launches_per_layer", in.LaunchesPerLayer, 0, 1000, "a launch count")
	num("interference.max_kernel_ms", in.MaxKernelMS, 0, 1000, "ms")
	num("interference.noise_sigma", in.NoiseSigma, 0, 1, "a standard deviation")
	num("slowdown", c.Slowdown, 0, 100, "a factor (0: none)")
	if c.ITLBuckets != nil && !increasingBounds(c.ITLBuckets) {
		fc.Add("itl_buckets", fmt.Sprintf("1 to %d increasing finite bounds above 0, in seconds", MaxBuckets), fmt.Sprint(c.ITLBuckets))
	}
	integer("default_prompt_tokens", c.DefaultPromptTokens, 1, MaxTraceTokens, "tokens")
	integer("default_output_tokens", c.DefaultOutputTokens, 1, MaxTraceTokens, "tokens")
	for i, r := range c.Requests {
		if r.Arrival < 0 || r.PromptTokens < 0 || r.OutputTokens < 0 || r.PromptTokens > MaxTraceTokens || r.OutputTokens > MaxTraceTokens ||
			i > 0 && r.Arrival < c.Requests[i-1].Arrival {
			fc.Add(fmt.Sprintf("requests[%d]", i), fmt.Sprintf("an arrival ≥ 0 not before the previous one, and token counts in [0, %d]", MaxTraceTokens),
				fmt.Sprintf("%+v", r))
			break
		}
	}
	return fc.Err("LLM engine config")
}

// increasingBounds reports whether b are 1 to MaxBuckets finite bounds
// above 0, each above the one before.
func increasingBounds(b []float64) bool {
	if len(b) == 0 || len(b) > MaxBuckets {
		return false
	}
	last := 0.0
	for _, v := range b {
		if !(v > last) || math.IsInf(v, 1) {
			return false
		}
		last = v
	}
	return true
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
