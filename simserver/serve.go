package simserver

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/predictor"
)

// Arrivals reads the trace at tracePath, replayed compress times faster,
// or, with no trace, draws Poisson arrivals at rate for d.
func Arrivals(tracePath string, rate float64, d time.Duration, compress float64) ([]time.Duration, error) {
	if tracePath == "" {
		a := Poisson(rate, d, 1)
		if len(a) == 0 {
			return nil, fmt.Errorf("--rate %g for --duration %s: no request", rate, d)
		}
		return a, nil
	}
	f, err := os.Open(tracePath)
	if err != nil {
		return nil, fmt.Errorf("--trace: %w", err)
	}
	defer f.Close()
	a, err := ParseArrivals(f)
	if err != nil {
		return nil, fmt.Errorf("--trace %s: %w", tracePath, err)
	}
	return Compress(a, compress), nil
}

// TrainersOf are the jobs a sidecar's status shows on the shared GPU,
// each as a tr job at its lease's percentage: the leases with registered
// processes, less those holding a lent instance, which shares nothing.
func TrainersOf(st *v1.Status, tr *predictor.Profile) []Trainer {
	var out []Trainer
	var key predictor.ProfileKey
	for _, l := range st.Leases {
		if len(l.PIDs) > 0 && l.Instance == nil {
			if key == (predictor.ProfileKey{}) {
				key = tr.Key()
			}
			out = append(out, Trainer{Profile: tr, Key: key, Pct: l.ActiveThreadPct})
		}
	}
	return out
}

// Jobs are the training jobs the simulated server runs next to, as last
// read; Now is a Config.Trainers.
type Jobs struct {
	mu   sync.Mutex
	jobs []Trainer
}

// Now returns the jobs last read.
func (j *Jobs) Now() []Trainer {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.jobs
}

// Follow reads the jobs every poll until ctx ends; a failed read keeps the
// last jobs and is reported to warn once until a read succeeds again.
func (j *Jobs) Follow(ctx context.Context, poll time.Duration, read func(context.Context) ([]Trainer, error), warn io.Writer) {
	t := time.NewTicker(max(poll, 100*time.Millisecond))
	defer t.Stop()
	failing := false
	for {
		jobs, err := read(ctx)
		switch {
		case err != nil && !failing:
			fmt.Fprintf(warn, "simserve: reading the sidecar's leases: %v (keeping the last ones)\n", err)
			failing = true
		case err == nil:
			failing = false
			j.mu.Lock()
			j.jobs = jobs
			j.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Listen serves srv's metrics page at /metrics on listen until the HTTP
// server is closed; done gets what Serve returned.
func Listen(listen string, srv *Server) (hs *http.Server, addr net.Addr, done <-chan error, err error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, nil, nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", srv)
	hs = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	return hs, ln.Addr(), served, nil
}

// Serve serves srv's page on listen until linger after its last arrival,
// or until ctx ends, and says where on out.
func Serve(ctx context.Context, out io.Writer, listen string, srv *Server, linger time.Duration) error {
	arrivals := srv.cfg.Arrivals
	hs, addr, done, err := Listen(listen, srv)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	fmt.Fprintf(out, "simulated server: http://%s/metrics, %d requests over %s\n", addr, len(arrivals), arrivals[len(arrivals)-1].Round(time.Second))
	end := time.NewTimer(arrivals[len(arrivals)-1] + linger)
	defer end.Stop()
	select {
	case <-ctx.Done():
	case <-end.C:
	case err := <-done:
		return err
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}
