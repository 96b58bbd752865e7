package simserver

import (
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/colocd/colocd/observe"
	"github.com/colocd/colocd/simserver/llm"
)

// DefaultBuckets are the latency histogram's bounds in ms: fine enough for
// tail latencies of tens to hundreds of milliseconds.
var DefaultBuckets = []float64{5, 10, 15, 20, 25, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 140, 160, 180, 200,
	225, 250, 300, 350, 400, 500, 600, 800, 1000, 1500, 2000, 5000, 10000}

// Config describes a simulated server.
type Config struct {
	// Preset is the metrics format: vllm, sglang or tgi (a latency
	// histogram in seconds and a request counter, named as the server names
	// them; Triton exports no histogram and is not simulated).
	Preset string
	// ModelName is the model label's value (vllm, sglang).
	ModelName string
	// Arrivals are the requests' arrival offsets from Start, in order.
	Arrivals []time.Duration
	Start    time.Time
	// Latency predicts the latency distribution; Trainers says what runs
	// next to the server now.
	Latency  *Model
	Trainers func() []Trainer
	// ErrorFactor multiplies every latency drawn (0: 1): the predictor
	// off by this much.
	ErrorFactor float64
	// Buckets are the histogram's bounds in ms (nil: DefaultBuckets).
	Buckets []float64
	// RateWindow is the span of arrivals the load is counted over for a
	// request's prediction (0: 30s).
	RateWindow time.Duration
	// Seed seeds the latency draws.
	Seed uint64
	// OnRequest, when set, is told each request's arrival and latency.
	OnRequest func(arrival time.Time, latencyMS float64)
}

// Server is a simulated inference server. Advance moves it to a time;
// ServeHTTP serves its metrics page as of the time of the request.
type Server struct {
	cfg    Config
	preset *observe.Preset

	mu       sync.Mutex
	next, lo int // the next arrival; the first within RateWindow of it
	pending  completions
	counts   []float64 // per bucket, not cumulative; the last is +Inf
	count    float64
	sumS     float64
	rng      *rand.Rand
}

// New checks cfg and returns a server at its Start.
func New(cfg Config) (*Server, error) {
	p, err := observe.PresetNamed(cfg.Preset)
	if err != nil {
		return nil, fmt.Errorf("simulated server: %w", err)
	}
	if p.Histogram == "" {
		return nil, fmt.Errorf("simulated server: preset %s exports no latency histogram; want vllm, sglang or tgi", cfg.Preset)
	}
	if cfg.Latency == nil || cfg.Trainers == nil {
		return nil, errors.New("simulated server: want a latency model and the trainers")
	}
	if cfg.ErrorFactor == 0 {
		cfg.ErrorFactor = 1
	}
	if !(cfg.ErrorFactor > 0) {
		return nil, fmt.Errorf("simulated server: error factor: want a factor above 0, got %g", cfg.ErrorFactor)
	}
	if cfg.Buckets == nil {
		cfg.Buckets = DefaultBuckets
	}
	if !slices.IsSorted(cfg.Buckets) {
		return nil, errors.New("simulated server: buckets: want increasing bounds")
	}
	if cfg.RateWindow <= 0 {
		cfg.RateWindow = 30 * time.Second
	}
	return &Server{cfg: cfg, preset: p, counts: make([]float64, len(cfg.Buckets)+1),
		rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5851f42d4c957f2d))}, nil
}

// Done reports whether every arrival is before now.
func (s *Server) Done(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next == len(s.cfg.Arrivals) && (len(s.pending) == 0 || s.pending[0].at.After(now))
}

// Advance admits every request that arrived by now, each with a latency
// drawn for the load and the trainers at its arrival (as of this call),
// and completes those done by now.
func (s *Server) Advance(now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	off := now.Sub(s.cfg.Start)
	var trainers []Trainer
	for s.next < len(s.cfg.Arrivals) && s.cfg.Arrivals[s.next] <= off {
		a := s.cfg.Arrivals[s.next]
		for s.cfg.Arrivals[s.lo] < a-s.cfg.RateWindow {
			s.lo++
		}
		span := min(s.cfg.RateWindow, max(a, time.Second))
		rate := float64(s.next-s.lo+1) / span.Seconds()
		if trainers == nil {
			trainers = s.cfg.Trainers()
		}
		p, err := s.cfg.Latency.Latency(rate, trainers)
		if err != nil {
			return err // this request is tried again on the next call
		}
		lat := draw(p, s.rng.Float64()) * s.cfg.ErrorFactor
		at := s.cfg.Start.Add(a)
		if s.cfg.OnRequest != nil {
			s.cfg.OnRequest(at, lat)
		}
		heap.Push(&s.pending, completion{at: at.Add(time.Duration(lat * float64(time.Millisecond))), ms: lat})
		s.next++
	}
	for len(s.pending) > 0 && !s.pending[0].at.After(now) {
		c := heap.Pop(&s.pending).(completion)
		i, _ := slices.BinarySearch(s.cfg.Buckets, c.ms)
		s.counts[i]++
		s.count++
		s.sumS += c.ms / 1000
	}
	return nil
}

// ServeHTTP serves the metrics page in the preset's format, as of now.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	llm.ServePage(w, s, "text/plain; version=0.0.4")
}

// Page is the metrics page as of the last Advance.
func (s *Server) Page() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.preset
	labels := ""
	if p.ModelLabel != "" {
		labels = p.ModelLabel + `="` + llm.EscapeLabel(s.cfg.ModelName) + `"`
	}
	with := func(extra string) string {
		switch {
		case labels == "" && extra == "":
			return ""
		case labels == "":
			return "{" + extra + "}"
		case extra == "":
			return "{" + labels + "}"
		}
		return "{" + labels + "," + extra + "}"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# HELP %s End-to-end request latency in seconds.\n# TYPE %s histogram\n", p.Histogram, p.Histogram)
	cum := 0.0
	for i, ub := range s.cfg.Buckets {
		cum += s.counts[i]
		fmt.Fprintf(&b, "%s_bucket%s %g\n", p.Histogram, with(`le="`+strconv.FormatFloat(ub/1000, 'g', -1, 64)+`"`), cum)
	}
	fmt.Fprintf(&b, "%s_bucket%s %g\n", p.Histogram, with(`le="+Inf"`), s.count)
	fmt.Fprintf(&b, "%s_sum%s %g\n%s_count%s %g\n", p.Histogram, with(""), s.sumS, p.Histogram, with(""), s.count)
	counterLabels := ""
	if p.Name == "vllm" {
		counterLabels = `finished_reason="stop"`
	}
	fmt.Fprintf(&b, "# HELP %s Requests completed.\n# TYPE %s counter\n%s%s %g\n", p.Requests, p.Requests, p.Requests, with(counterLabels), s.count)
	return b.String()
}

// completion is a request in flight: when it completes, and its latency.
type completion struct {
	at time.Time
	ms float64
}

type completions []completion

func (c completions) Len() int           { return len(c) }
func (c completions) Less(i, j int) bool { return c[i].at.Before(c[j].at) }
func (c completions) Swap(i, j int)      { c[i], c[j] = c[j], c[i] }
func (c *completions) Push(x any)        { *c = append(*c, x.(completion)) }
func (c *completions) Pop() any {
	old := *c
	x := old[len(old)-1]
	*c = old[:len(old)-1]
	return x
}
