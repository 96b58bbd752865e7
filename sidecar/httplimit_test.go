package sidecar

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/colocd/colocd/internal/runtest"
)

// TestIdleConnectionsDoNotStarveProbes: a client opens many more idle
// connections than the bound (they send nothing); the sidecar keeps at
// most the bound open, and 20 of 20 honest probes are answered.
func TestIdleConnectionsDoNotStarveProbes(t *testing.T) {
	t.Parallel()
	const bound, idle = 32, 500
	srv, err := listenHTTPMax("127.0.0.1:0", newMux(Checks{}, Checks{}, prometheus.NewRegistry()), bound)
	if err != nil {
		t.Fatal(err)
	}
	stop := runtest.Background(srv.serve)
	defer stop()

	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range idle {
		c, err := net.Dial("tcp", srv.Addr())
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		conns = append(conns, c)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	ok := 0
	for range 20 {
		resp, err := client.Get("http://" + srv.Addr() + "/healthz")
		if err == nil {
			if resp.StatusCode == http.StatusOK {
				ok++
			}
			resp.Body.Close()
		}
	}
	if ok != 20 {
		t.Errorf("%d of 20 probes answered while %d idle connections were opened, want 20", ok, idle)
	}
	if n := srv.ln.open(); n > bound {
		t.Errorf("%d connections open, want at most %d", n, bound)
	}
	srv.ln.mu.Lock()
	evicted := srv.ln.evicted
	srv.ln.mu.Unlock()
	if evicted < idle-bound {
		t.Errorf("%d idle connections closed to make room, want at least %d", evicted, idle-bound)
	}
}

func TestFDsSpare(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		n, limit uint64
		ok       bool
	}{{10, 1024, true}, {922, 1024, false}, {1024, 1024, false}, {900, 1000, true}} {
		if err := fdsSpare(tt.n, tt.limit); (err == nil) != tt.ok {
			t.Errorf("fdsSpare(%d, %d) = %v, want ok %v", tt.n, tt.limit, err, tt.ok)
		}
	}
	if err := checkFDs(); err != nil {
		t.Errorf("this test process: %v", err)
	}
}
