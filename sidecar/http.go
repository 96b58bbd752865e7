package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check reports whether one component is ready: nil, or why not.
type Check func() error

// Checks names the components /readyz asks.
type Checks map[string]Check

// run asks every check and returns the failures by component.
func (cs Checks) run() map[string]string {
	out := map[string]string{}
	for name, c := range cs {
		if err := c(); err != nil {
			out[name] = err.Error()
		}
	}
	return out
}

// Ready returns nil when every check passes, else an error naming the
// components that are not ready and why.
func (cs Checks) Ready() error {
	failed := cs.run()
	if len(failed) == 0 {
		return nil
	}
	var errs []error
	for _, n := range slices.Sorted(maps.Keys(failed)) {
		errs = append(errs, errors.New(n+": "+failed[n]))
	}
	return errors.Join(errs...)
}

// newMux serves /healthz (the process answers), /readyz (every component is
// ready: 200 with {"ready":true}, else 503 with the failures by component)
// and /metrics (Prometheus, from reg). The degraded checks are told in
// /readyz's body without making it a 503: a saturated front door is under
// attack, and a 503 would take the inference pod out of its Service, which
// is what the attacker wants (docs/operations.md#readiness).
func newMux(checks, degraded Checks, reg *prometheus.Registry) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		failed := checks.run()
		w.Header().Set("Content-Type", "application/json")
		if len(failed) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		json.NewEncoder(w).Encode(struct {
			Ready    bool              `json:"ready"`
			Failed   map[string]string `json:"failed,omitempty"`
			Degraded map[string]string `json:"degraded,omitempty"`
		}{len(failed) == 0, failed, degraded.run()})
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return mux
}

// httpServer is the sidecar's HTTP endpoint.
type httpServer struct {
	srv *http.Server
	ln  *connLimiter
}

// listenHTTP binds addr (host:port; port 0 picks one), with a deadline on
// every read and write and at most maxHTTPConns connections.
func listenHTTP(addr string, h http.Handler) (*httpServer, error) {
	return listenHTTPMax(addr, h, maxHTTPConns)
}

func listenHTTPMax(addr string, h http.Handler, max int) (*httpServer, error) {
	inner, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	ln := newConnLimiter(inner, max)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: httpReadHeaderTimeout, ReadTimeout: httpReadTimeout,
		WriteTimeout: httpWriteTimeout, IdleTimeout: httpIdleTimeout, MaxHeaderBytes: httpMaxHeaderBytes, ConnState: ln.track}
	return &httpServer{srv: srv, ln: ln}, nil
}

// Addr is the bound address.
func (s *httpServer) Addr() string { return s.ln.Addr().String() }

// serve runs until ctx ends, then shuts down gracefully.
func (s *httpServer) serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := s.srv.Shutdown(shut)
		<-errc
		return err
	}
}
