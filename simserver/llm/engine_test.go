package llm

import (
	"cmp"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/colocd/colocd/field"
)

// run replays cfg to its end and returns the finished requests in the
// order they finished, and the engine.
func run(t *testing.T, cfg Config) ([]Finished, *Engine) {
	t.Helper()
	var out []Finished
	cfg.OnFinish = func(f Finished) { out = append(out, f) }
	e := newEngine(t, cfg)
	advanceBy(t, e, 1000*time.Hour)
	if !e.Done() {
		t.Fatalf("not done after 1000 h: %+v", e.Stats())
	}
	return out, e
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// At low load a request's latency is its prefill step plus a decode step
// per further token, each by the law.
func TestLowLoadByHand(t *testing.T) {
	t.Parallel()
	cfg := tiny()
	const prompt, out = 40, 5
	cfg.Requests = []Request{{Arrival: time.Second, PromptTokens: prompt, OutputTokens: out}}
	done, e := run(t, cfg)
	// Prefill: 40 tokens, 40 of KV, 40·41/2 pairs; decode k (k = 1..4):
	// one token at context 40+k−1, so 40+k of KV and as many pairs.
	ttft := handMS(&cfg, prompt, prompt, prompt*(prompt+1)/2)
	e2e := ttft
	for k := 1; k < out; k++ {
		kv := float64(prompt + k)
		e2e += handMS(&cfg, 1, kv, kv)
	}
	got := done[0]
	if !near(ms(got.TTFT), ttft, 1e-6) || !near(ms(got.E2E), e2e, 1e-6) {
		t.Errorf("TTFT %v, e2e %v; want %.6f ms, %.6f ms", got.TTFT, got.E2E, ttft, e2e)
	}
	if !got.Arrival.Equal(cfg.Start.Add(time.Second)) || got.PromptTokens != prompt || got.OutputTokens != out {
		t.Errorf("finished %+v", got)
	}
	if s := e.Stats(); s.Steps != out || s.KVUsed != 0 {
		t.Errorf("stats %+v, want %d steps and the cache free", s, out)
	}
}

// A prompt longer than the token budget is prefilled in chunks, one step
// each, and its first token comes with the last chunk.
func TestChunkedPrefill(t *testing.T) {
	t.Parallel()
	cfg := tiny() // 64 tokens a step
	cfg.Requests = []Request{{PromptTokens: 200, OutputTokens: 1}}
	done, e := run(t, cfg)
	want := 0.0
	for c := 0; c < 200; c += 64 {
		n := min(64, 200-c)
		want += handMS(&cfg, n, float64(c+n), float64(n*c+n*(n+1)/2))
	}
	if s := e.Stats(); s.Steps != 4 {
		t.Errorf("%d steps, want 4 chunks (64, 64, 64, 8)", s.Steps)
	}
	if !near(ms(done[0].TTFT), want, 1e-6) || done[0].E2E != done[0].TTFT {
		t.Errorf("TTFT %v, e2e %v; want both %.6f ms", done[0].TTFT, done[0].E2E, want)
	}
	// vLLM counts a prompt's tokens in the step of its first token, with
	// that token: 0, 0, 0, 201.
	if got := e.m.iterationTokens; got.n != 4 || got.sum != 201 || got.counts[0] != 3 {
		t.Errorf("iteration tokens: %d steps, %g tokens, %d in the first bucket; want 4, 201, 3", got.n, got.sum, got.counts[0])
	}
}

// meanE2E replays requests arriving every gap and returns the mean e2e
// latency in ms.
func meanE2E(t *testing.T, cfg Config, gap time.Duration, n int) float64 {
	cfg.Requests = nil
	for i := range n {
		cfg.Requests = append(cfg.Requests, Request{Arrival: time.Duration(i) * gap, PromptTokens: 48, OutputTokens: 16})
	}
	done, _ := run(t, cfg)
	var sum float64
	for _, f := range done {
		sum += ms(f.E2E)
	}
	return sum / float64(len(done))
}

// Queueing grows with the rate.
func TestQueueingGrowsWithRate(t *testing.T) {
	t.Parallel()
	cfg := tiny()
	prev := 0.0
	for _, gap := range []time.Duration{time.Second, 20 * time.Millisecond, 5 * time.Millisecond, time.Millisecond} {
		got := meanE2E(t, cfg, gap, 200)
		if got <= prev {
			t.Errorf("a request every %v: mean e2e %.3f ms, want more than %.3f at the lower rate", gap, got, prev)
		}
		prev = got
	}
}

// max_num_seqs caps the requests running at once; the rest wait.
func TestMaxNumSeqs(t *testing.T) {
	t.Parallel()
	cfg := tiny()
	cfg.Scheduler.MaxNumSeqs = 3
	for range 10 {
		cfg.Requests = append(cfg.Requests, Request{PromptTokens: 8, OutputTokens: 20})
	}
	e := newEngine(t, cfg)
	most, waited := 0, false
	for at := time.Duration(0); !e.Done(); at += 500 * time.Microsecond {
		advanceBy(t, e, at)
		s := e.Stats()
		most = max(most, s.Running)
		waited = waited || s.Waiting > 0
	}
	if most != 3 || !waited {
		t.Errorf("at most %d running (want 3), some waited: %v", most, waited)
	}
}

// When the KV cache runs out, the most recently admitted request is
// preempted, and every request still finishes with all its tokens.
func TestKVExhaustionPreempts(t *testing.T) {
	t.Parallel()
	cfg := tiny()
	cfg.Scheduler.KVBlocks = 16 // 256 tokens
	cfg.Scheduler.MaxNumBatchedTokens = 256
	// Three requests of 60 + 100 tokens: 10 blocks each at the end, 30 in
	// all, against 16.
	for range 3 {
		cfg.Requests = append(cfg.Requests, Request{PromptTokens: 60, OutputTokens: 100})
	}
	used := 0
	cfg.Trainers = nil
	done, e := run(t, cfg)
	s := e.Stats()
	if s.Preemptions == 0 || s.Finished != 3 {
		t.Fatalf("stats %+v, want preemptions and 3 finished", s)
	}
	for _, f := range done {
		if f.OutputTokens != 100 {
			t.Errorf("finished %+v, want 100 tokens", f)
		}
		used += f.Preemptions
	}
	if used != s.Preemptions {
		t.Errorf("requests count %d preemptions, the engine %d", used, s.Preemptions)
	}
	// The first admitted is never the victim: it finishes first, untouched.
	if done[0].Preemptions != 0 || done[len(done)-1].Preemptions == 0 {
		t.Errorf("finished in order %+v: want the first untouched and the last preempted", done)
	}
	// Tokens and prompts count once, however often a prefill was
	// recomputed.
	if gen, prompt := e.m.generationTokens, e.m.promptTokens; gen != 300 || prompt != 180 {
		t.Errorf("%g tokens generated, %g prompt tokens; want 300, 180", gen, prompt)
	}
}

// The victim of a preemption is the most recently admitted request (here
// the smallest, which arrived last), and it goes back to the front of the
// waiting queue.
func TestPreemptVictim(t *testing.T) {
	t.Parallel()
	cfg := tiny()
	cfg.Scheduler.KVBlocks = 16
	cfg.Scheduler.MaxNumBatchedTokens = 256
	cfg.Requests = []Request{{PromptTokens: 60, OutputTokens: 100}, {PromptTokens: 60, OutputTokens: 100},
		{PromptTokens: 60, OutputTokens: 100}, {Arrival: time.Millisecond, PromptTokens: 16, OutputTokens: 100}}
	e := newEngine(t, cfg)
	for at := time.Duration(0); e.Stats().Preemptions == 0; at += time.Millisecond {
		advanceBy(t, e, at)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.queue.len() == 0 || e.queue.front() != &e.seqs[3] {
		t.Errorf("the waiting queue's front is not the fourth request, the last admitted")
	}
	if len(e.run) != 3 {
		t.Errorf("%d running, want the first three", len(e.run))
	}
	for _, r := range e.run {
		if r == &e.seqs[3] {
			t.Error("the victim still runs")
		}
	}
}

// A trainer at a higher percentage makes the replay slower.
func TestTrainersSlowTheEngine(t *testing.T) {
	t.Parallel()
	prev := 0.0
	for _, pct := range []int{0, 25, 50, 100} {
		cfg := tiny()
		cfg.Trainers = func() []Trainer { return []Trainer{{Pct: pct, Duty: 0.8, BandwidthFrac: 0.5, KernelMS: 0.5}} }
		got := meanE2E(t, cfg, 10*time.Millisecond, 100)
		if got <= prev {
			t.Errorf("a trainer at %d %%: mean e2e %.3f ms, want more than %.3f", pct, got, prev)
		}
		prev = got
	}
}

// At the same duty and percentage, a trainer of long kernels slows the
// replay more than one of short kernels.
func TestLongKernelTrainerSlowsMore(t *testing.T) {
	t.Parallel()
	mean := func(kernelMS float64) float64 {
		cfg := tiny()
		cfg.Trainers = func() []Trainer { return []Trainer{{Pct: 50, Duty: 0.5, BandwidthFrac: 0.1, KernelMS: kernelMS}} }
		return meanE2E(t, cfg, 10*time.Millisecond, 100)
	}
	if short, long := mean(0.05), mean(2); !(long > short) {
		t.Errorf("mean e2e next to 2 ms kernels %.3f ms, next to 50 µs kernels %.3f ms; want the long ones slower", long, short)
	}
}

// Equal seeds give equal runs; the noise makes other seeds differ.
func TestSeeded(t *testing.T) {
	t.Parallel()
	replay := func(seed uint64) []Finished {
		cfg := tiny()
		cfg.Seed = seed
		cfg.Interference.NoiseSigma = 0.05
		for i := range 50 {
			cfg.Requests = append(cfg.Requests, Request{Arrival: time.Duration(i) * 3 * time.Millisecond})
		}
		done, _ := run(t, cfg)
		return done
	}
	a, b, c := replay(1), replay(1), replay(2)
	if !slices.Equal(a, b) {
		t.Error("seed 1 twice: the runs differ")
	}
	if slices.Equal(a, c) {
		t.Error("seeds 1 and 2: the runs are equal")
	}
}

// A step in flight at now counts only once a later Advance passes its
// end; the engine never moves back.
func TestStepInFlight(t *testing.T) {
	t.Parallel()
	cfg := tiny()
	cfg.Requests = []Request{{PromptTokens: 40, OutputTokens: 1}}
	e := newEngine(t, cfg)
	end := time.Duration(handMS(&cfg, 40, 40, 820) * float64(time.Millisecond))
	for _, at := range []time.Duration{end / 2, end - 1, end / 4} {
		advanceBy(t, e, at)
		if s := e.Stats(); s.Finished != 0 || s.Running != 1 {
			t.Fatalf("at %v: %+v, want the step in flight", at, s)
		}
	}
	advanceBy(t, e, end)
	if s := e.Stats(); s.Finished != 1 || s.Running != 0 || s.Steps != 1 {
		t.Errorf("at the step's end: %+v, want it finished", s)
	}
}

// Arrivals during a step wait for it, and count as waiting meanwhile.
func TestWaitingCountsArrivalsDuringAStep(t *testing.T) {
	t.Parallel()
	cfg := tiny()
	cfg.Requests = []Request{{PromptTokens: 64, OutputTokens: 2}, {Arrival: 100 * time.Microsecond}}
	e := newEngine(t, cfg)
	advanceBy(t, e, 200*time.Microsecond)
	if s := e.Stats(); s.Running != 1 || s.Waiting != 1 {
		t.Errorf("stats %+v, want 1 running and 1 waiting", s)
	}
}

// A request longer than max_model_len is refused; the others run.
func TestRefusesLongRequests(t *testing.T) {
	t.Parallel()
	cfg := tiny()
	cfg.Requests = []Request{{PromptTokens: 250, OutputTokens: 10}, {Arrival: time.Millisecond, PromptTokens: 10, OutputTokens: 10}}
	done, e := run(t, cfg)
	if s := e.Stats(); s.Refused != 1 || s.Finished != 1 || len(done) != 1 || done[0].PromptTokens != 10 {
		t.Errorf("stats %+v, finished %+v; want one refused, one finished", s, done)
	}
}

// A request's 0 token counts are the config's defaults.
func TestDefaultTokens(t *testing.T) {
	t.Parallel()
	cfg := tiny()
	cfg.Requests = []Request{{}}
	done, _ := run(t, cfg)
	if done[0].PromptTokens != cfg.DefaultPromptTokens || done[0].OutputTokens != cfg.DefaultOutputTokens {
		t.Errorf("finished %+v, want the defaults %d and %d", done[0], cfg.DefaultPromptTokens, cfg.DefaultOutputTokens)
	}
}

// A trainer out of bounds stops the engine with an error naming its field.
func TestBadTrainer(t *testing.T) {
	t.Parallel()
	cfg := tiny()
	cfg.Requests = []Request{{}}
	cfg.Trainers = func() []Trainer { return []Trainer{{Pct: 50}, {Pct: 101, Duty: math.NaN()}} }
	e := newEngine(t, cfg)
	err := e.Advance(cfg.Start.Add(time.Second))
	var l *field.List
	if !errors.As(err, &l) || len(l.Errors) != 2 || l.Errors[0].Path != "pct" || l.Errors[1].Path != "duty" {
		t.Fatalf("err = %v, want trainers[1]'s pct and duty", err)
	}
	if s := e.Stats(); s.Steps != 0 {
		t.Errorf("%d steps ran", s.Steps)
	}
}

// Every inter-token latency is a step's time: with one request alone, the
// decode steps'.
func TestInterTokenLatency(t *testing.T) {
	t.Parallel()
	cfg := tiny()
	cfg.Requests = []Request{{PromptTokens: 16, OutputTokens: 4}}
	var itl []float64
	var last time.Time
	cfg.OnToken = func(at time.Time, first bool, d time.Duration) {
		if !at.After(last) {
			t.Errorf("a token at %v, not after the one before at %v", at, last)
		}
		last = at
		if !first {
			itl = append(itl, ms(d))
		}
	}
	e := newEngine(t, cfg)
	advanceBy(t, e, time.Hour)
	if len(itl) != 3 {
		t.Fatalf("%d inter-token latencies, want 3", len(itl))
	}
	for k, got := range itl {
		kv := float64(16 + k + 1)
		if want := handMS(&cfg, 1, kv, kv); !near(got, want, 1e-6) {
			t.Errorf("token %d: %.6f ms, want %.6f", k+2, got, want)
		}
	}
	// One busy period of four steps (the prefill, three decodes), each
	// step's time counted once.
	st := e.Stats()
	if st.Steps != 4 || st.BusyPeriods != 1 {
		t.Errorf("%d steps in %d busy periods, want 4 in 1", st.Steps, st.BusyPeriods)
	}
	want := handMS(&cfg, 16, 0, 16*17/2.0) + itl[0] + itl[1] + itl[2] // the prefill, then the decodes
	if got := ms(st.Busy); !near(got, want, 1e-3) {
		t.Errorf("busy %.6f ms, want the steps' %.6f", got, want)
	}
}

// Slowdown multiplies every step, and two requests apart in time are two
// busy periods.
func TestSlowdownAndBusyPeriods(t *testing.T) {
	t.Parallel()
	cfg := tiny()
	cfg.Requests = []Request{{PromptTokens: 16, OutputTokens: 4}, {Arrival: time.Minute, PromptTokens: 16, OutputTokens: 4}}
	run := func(slowdown float64) Stats {
		c := cfg
		c.Slowdown = slowdown
		e := newEngine(t, c)
		advanceBy(t, e, time.Hour)
		return e.Stats()
	}
	one, slow := run(0), run(1.5)
	if one.BusyPeriods != 2 || one.Steps != 8 {
		t.Errorf("%d steps in %d busy periods, want 8 in 2", one.Steps, one.BusyPeriods)
	}
	if got := float64(slow.Busy) / float64(one.Busy); !near(got, 1.5, 1e-6) {
		t.Errorf("busy ×%.6f with a slowdown of 1.5", got)
	}
}

// check fails t unless the engine's books balance: the free blocks and
// those the running requests hold make the cache, a waiting request holds
// none, a running one holds its computed tokens' blocks, and at most
// max_num_seqs run.
func (e *Engine) check(t *testing.T) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	held := 0
	for _, r := range e.run {
		held += r.blocks
		if r.done || r.blocks < ceilDiv(r.computed, e.cfg.Scheduler.BlockSize) || r.computed > r.tokens() {
			t.Fatalf("running %+v holds too few blocks or is done", *r)
		}
	}
	for _, r := range e.queue.q[e.queue.head:] {
		if r.blocks != 0 || r.computed != 0 || r.done {
			t.Fatalf("waiting %+v holds blocks or computed tokens", *r)
		}
	}
	if e.free < 0 || held+e.free != e.total || len(e.run) > e.cfg.Scheduler.MaxNumSeqs {
		t.Fatalf("free %d + held %d != %d blocks, or %d running", e.free, held, e.total, len(e.run))
	}
}

// Random small engines and loads, advanced in random increments: the
// books balance after every call, every request finishes with all its
// tokens, and the counts agree.
func TestRandomReplaysBalance(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range 40 {
		cfg := tiny()
		cfg.Scheduler.BlockSize = 1 + rng.IntN(16)
		cfg.Scheduler.MaxModelLen = 64 + rng.IntN(128)
		cfg.Scheduler.KVBlocks = ceilDiv(cfg.Scheduler.MaxModelLen, cfg.Scheduler.BlockSize) + rng.IntN(20)
		cfg.Scheduler.MaxNumSeqs = 1 + rng.IntN(6)
		cfg.Scheduler.MaxNumBatchedTokens = cfg.Scheduler.MaxNumSeqs + rng.IntN(100)
		cfg.Interference.NoiseSigma = 0.1
		cfg.Seed = uint64(i)
		at, want := time.Duration(0), 0
		for range 1 + rng.IntN(40) {
			at += time.Duration(rng.ExpFloat64() * float64(5*time.Millisecond))
			r := Request{Arrival: at, PromptTokens: rng.IntN(80), OutputTokens: rng.IntN(60)}
			cfg.Requests = append(cfg.Requests, r)
			p, o := cmp.Or(r.PromptTokens, cfg.DefaultPromptTokens), cmp.Or(r.OutputTokens, cfg.DefaultOutputTokens)
			if p+o <= cfg.Scheduler.MaxModelLen {
				want += o
			}
		}
		pct := rng.IntN(101)
		cfg.Trainers = func() []Trainer { return []Trainer{{Pct: pct, Duty: 0.5, BandwidthFrac: 0.5, KernelMS: 0.3}} }
		got := 0
		cfg.OnFinish = func(f Finished) {
			got += f.OutputTokens
			if f.TTFT <= 0 || f.E2E < f.TTFT {
				t.Errorf("replay %d: finished %+v", i, f)
			}
		}
		e, err := New(cfg)
		if err != nil {
			t.Fatalf("replay %d: %v", i, err)
		}
		for now := time.Duration(0); !e.Done(); now += time.Duration(rng.IntN(int(20 * time.Millisecond))) {
			if now > time.Hour {
				t.Fatalf("replay %d: not done after an hour: %+v", i, e.Stats())
			}
			advanceBy(t, e, now)
			e.check(t)
		}
		s := e.Stats()
		if got != want || float64(got) != e.m.generationTokens || s.Finished+s.Refused != len(cfg.Requests) || s.KVUsed != 0 {
			t.Errorf("replay %d: %d tokens reported, %g counted, want %d; stats %+v", i, got, e.m.generationTokens, want, s)
		}
	}
}
