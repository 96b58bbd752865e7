package llm

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Finished is one request the engine finished.
type Finished struct {
	// Arrival is when it arrived.
	Arrival time.Time
	// TTFT is arrival to first token, E2E arrival to last token.
	TTFT, E2E                  time.Duration
	PromptTokens, OutputTokens int
	// Preemptions counts the times its KV cache was taken back.
	Preemptions int
}

// Stats are an engine's counts so far.
type Stats struct {
	// Steps run, and requests finished.
	Steps, Finished int
	// Refused requests were longer than max_model_len.
	Refused int
	// Preemptions counts requests sent back to the waiting queue.
	Preemptions int
	// Running and Waiting are the queues now, as the gauges report them.
	Running, Waiting int
	// KVBlocks is the cache's size, KVUsed the blocks held now.
	KVBlocks, KVUsed int
	// Busy is the time spent in steps, and BusyPeriods the runs of steps
	// back to back (an idle engine between two): Busy over the time
	// elapsed is the fraction of time the engine has work, Steps over
	// BusyPeriods its mean burst in steps.
	Busy        time.Duration
	BusyPeriods int
}

// seq is one request inside the engine.
type seq struct {
	arrival             time.Duration
	prompt, output      int
	generated, computed int
	blocks              int
	last                time.Duration // its last token
	ttft                time.Duration
	preempts            int
	scheduled           int // tokens in the step in flight
	done                bool
}

// tokens is what the request's KV cache must hold before its next token.
func (s *seq) tokens() int { return s.prompt + s.generated }

// Engine is a simulated LLM inference engine: continuous batching under a
// token budget, a paged KV cache, and step times by the law of doc.go.
// Advance moves it to a time; Page and ServeHTTP show its metrics. It is
// safe for concurrent use.
type Engine struct {
	mu     sync.Mutex
	cfg    Config
	seqs   []seq
	total  int // KV blocks
	free   int
	clock  time.Duration // when the engine is, from Start
	next   int           // the next request to arrive
	seen   int           // requests arrived by the last Advance
	queue  waiting
	run    []*seq
	batch  []*seq // the step in flight
	step   Step
	end    time.Duration // the step in flight's end
	flying bool
	// lastEnd is when the last step started ends: a step that starts
	// then runs back to back with it.
	lastEnd time.Duration
	rng     *rand.Rand
	stats   Stats
	m       metrics
	done    []Finished
}

// New checks cfg and returns an engine at cfg.Start with no request yet
// arrived.
func New(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, total: cfg.KVBlocks(), rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x6a09e667f3bcc909)), m: newMetrics(cfg.ITLBuckets)}
	e.free = e.total
	e.stats.KVBlocks = e.total
	e.seqs = make([]seq, len(cfg.Requests))
	for i, r := range cfg.Requests {
		s := &e.seqs[i]
		s.arrival, s.prompt, s.output = r.Arrival, r.PromptTokens, r.OutputTokens
		if s.prompt == 0 {
			s.prompt = cfg.DefaultPromptTokens
		}
		if s.output == 0 {
			s.output = cfg.DefaultOutputTokens
		}
	}
	return e, nil
}

// Advance runs every step that starts before now, and reports each
// request finished by now to OnFinish (outside the engine's lock). A step
// that ends after now is in flight: its tokens count when a later call
// passes its end. The engine never moves back: a time before the last
// one's is no step. An error (a trainer out of its bounds) runs no more
// steps and leaves the engine as it was at the step it stopped before.
func (e *Engine) Advance(now time.Time) error {
	e.mu.Lock()
	err := e.advance(now.Sub(e.cfg.Start))
	done := e.done
	e.done = nil
	e.mu.Unlock()
	if e.cfg.OnFinish != nil {
		for _, f := range done {
			e.cfg.OnFinish(f)
		}
	}
	return err
}

func (e *Engine) advance(off time.Duration) error {
	for {
		if e.flying {
			if e.end > off {
				break
			}
			e.finishStep()
		}
		e.arrive(e.clock)
		if e.clock >= off {
			break
		}
		if len(e.run) == 0 && e.queue.len() == 0 {
			if e.next == len(e.seqs) || e.seqs[e.next].arrival >= off {
				break
			}
			e.clock = e.seqs[e.next].arrival
			continue
		}
		if err := e.startStep(); err != nil {
			return err
		}
	}
	for e.seen < len(e.seqs) && e.seqs[e.seen].arrival <= off {
		e.seen++
	}
	e.seen = max(e.seen, e.next)
	return nil
}

// arrive queues the requests that arrived by t, refusing those longer
// than max_model_len.
func (e *Engine) arrive(t time.Duration) {
	for e.next < len(e.seqs) && e.seqs[e.next].arrival <= t {
		s := &e.seqs[e.next]
		e.next++
		if s.prompt+s.output > e.cfg.Scheduler.MaxModelLen {
			s.done = true
			e.stats.Refused++
			continue
		}
		e.queue.pushBack(s)
	}
}

// errStalled is a step with work waiting and nothing scheduled: a broken
// invariant of the scheduler, never a load.
var errStalled = errors.New("llm engine: no request could be scheduled")

// startStep schedules one step as vLLM V1 does: running requests first,
// in admission order, each its remaining tokens within the budget (a
// decode one, a prefill a chunk); a request whose KV cache needs a block
// when none is free preempts the most recently admitted; then, if none
// was preempted, waiting requests in order while the budget, max_num_seqs
// and the free blocks allow.
func (e *Engine) startStep() error {
	var trainers []Trainer
	if e.cfg.Trainers != nil {
		trainers = e.cfg.Trainers()
		for i, t := range trainers {
			if err := t.Validate(); err != nil {
				return fmt.Errorf("llm engine: trainers[%d]: %w", i, err)
			}
		}
	}
	s := &e.cfg.Scheduler
	budget := s.MaxNumBatchedTokens
	e.batch, e.step = e.batch[:0], Step{}
	preempted := false
	for i := 0; i < len(e.run) && budget > 0; {
		r := e.run[i]
		n := min(r.tokens()-r.computed, budget)
		need := ceilDiv(r.computed+n, s.BlockSize) - r.blocks
		self := false
		for need > e.free && !self {
			v := e.run[len(e.run)-1]
			e.run = e.run[:len(e.run)-1]
			e.preempt(v)
			preempted, self = true, v == r
		}
		if self {
			break
		}
		e.schedule(r, n, need)
		budget -= n
		i++
	}
	for !preempted && e.queue.len() > 0 && budget > 0 && len(e.run) < s.MaxNumSeqs {
		r := e.queue.front()
		n := min(r.tokens()-r.computed, budget)
		need := ceilDiv(r.computed+n, s.BlockSize) - r.blocks
		if need > e.free {
			break
		}
		e.queue.popFront()
		e.run = append(e.run, r)
		e.schedule(r, n, need)
		budget -= n
	}
	if len(e.batch) == 0 {
		return errStalled
	}
	c := e.cfg.cost(e.step, loadOf(trainers, e.cfg.Interference))
	ms := c.TotalMS * noise(e.cfg.Interference.NoiseSigma, e.rng.NormFloat64())
	if e.cfg.Slowdown > 0 {
		ms *= e.cfg.Slowdown
	}
	d := max(time.Nanosecond, time.Duration(ms*float64(time.Millisecond)))
	if e.stats.BusyPeriods == 0 || e.clock > e.lastEnd {
		e.stats.BusyPeriods++
	}
	e.stats.Busy += d
	e.end = e.clock + d
	e.lastEnd = e.end
	e.flying = true
	return nil
}

// schedule puts n of r's tokens into the step, with need more blocks.
func (e *Engine) schedule(r *seq, n, need int) {
	r.blocks += need
	e.free -= need
	r.scheduled = n
	e.batch = append(e.batch, r)
	c, nf := float64(r.computed), float64(n)
	e.step.Tokens += n
	e.step.KVTokens += c + nf
	e.step.AttnPairs += nf*c + nf*(nf+1)/2
}

// preempt sends r back to the front of the waiting queue with its KV
// cache freed: it will compute its prompt and its tokens so far again.
func (e *Engine) preempt(r *seq) {
	e.free += r.blocks
	r.blocks, r.computed = 0, 0
	r.preempts++
	e.stats.Preemptions++
	e.m.preemptions++
	e.queue.pushFront(r)
}

// finishStep applies the step in flight at its end: each request whose
// tokens are all computed samples one, the first its TTFT, the others an
// inter-token latency; a request with all its output finishes. The step's
// sample of vllm:iteration_tokens_total counts as vLLM's does: the tokens
// sampled, plus the whole prompt of each request whose first token this
// is (a prefill chunk that samples nothing counts 0; a recomputed prefill
// counts only its token).
func (e *Engine) finishStep() {
	t := e.end
	e.clock, e.flying = t, false
	e.stats.Steps++
	finished := false
	counted := 0 // the step's tokens as vLLM counts them
	for _, r := range e.batch {
		r.computed += r.scheduled
		r.scheduled = 0
		if r.computed < r.tokens() {
			continue // a prefill chunk
		}
		r.generated++
		e.m.generationTokens++
		counted++
		if r.generated == 1 {
			e.m.promptTokens += float64(r.prompt)
			counted += r.prompt
			r.ttft = t - r.arrival
			e.m.ttft.observe(r.ttft.Seconds())
		} else {
			e.m.itl.observe((t - r.last).Seconds())
		}
		if e.cfg.OnToken != nil {
			if r.generated == 1 {
				e.cfg.OnToken(e.cfg.Start.Add(t), true, r.ttft)
			} else {
				e.cfg.OnToken(e.cfg.Start.Add(t), false, t-r.last)
			}
		}
		r.last = t
		if r.generated == r.output {
			r.done, finished = true, true
			e.free += r.blocks
			r.blocks = 0
			e2e := t - r.arrival
			e.m.e2e.observe(e2e.Seconds())
			e.m.success++
			e.stats.Finished++
			e.done = append(e.done, Finished{Arrival: e.cfg.Start.Add(r.arrival), TTFT: r.ttft, E2E: e2e,
				PromptTokens: r.prompt, OutputTokens: r.output, Preemptions: r.preempts})
		}
	}
	e.m.iterationTokens.observe(float64(counted))
	if finished {
		kept := e.run[:0]
		for _, r := range e.run {
			if !r.done {
				kept = append(kept, r)
			}
		}
		clear(e.run[len(kept):])
		e.run = kept
	}
}

// Stats returns the engine's counts as of the last Advance.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.stats
	s.Running, s.Waiting = len(e.run), e.waitingNow()
	s.KVUsed = e.total - e.free
	return s
}

// waitingNow counts the requests waiting as of the last Advance: those
// queued, and those arrived while a step was in flight.
func (e *Engine) waitingNow() int { return e.queue.len() + e.seen - e.next }

// Done reports whether every request has finished or been refused.
func (e *Engine) Done() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats.Finished+e.stats.Refused == len(e.seqs)
}

// waiting is the waiting queue: a slice with a moving head, so that a
// preempted request can go back to the front.
type waiting struct {
	q    []*seq
	head int
}

func (w *waiting) len() int        { return len(w.q) - w.head }
func (w *waiting) front() *seq     { return w.q[w.head] }
func (w *waiting) pushBack(s *seq) { w.q = append(w.q, s) }

func (w *waiting) popFront() {
	w.q[w.head] = nil
	w.head++
	if w.head > 1024 && w.head*2 > len(w.q) {
		n := copy(w.q, w.q[w.head:])
		clear(w.q[n:])
		w.q, w.head = w.q[:n], 0
	}
}

func (w *waiting) pushFront(s *seq) {
	if w.head > 0 {
		w.head--
		w.q[w.head] = s
		return
	}
	w.q = append(w.q, nil)
	copy(w.q[1:], w.q)
	w.q[0] = s
}
