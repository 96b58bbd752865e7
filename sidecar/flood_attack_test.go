//go:build attack

package sidecar

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/colocd/colocd/bus"
)

// flood opens TCP connections to addr from the loopback addresses in
// from, as fast as it can, and never sends a byte on them; it keeps at
// most hold of them open (closing its oldest), like an outsider with no
// credentials. It runs until ctx ends and returns how many it opened.
func flood(ctx context.Context, addr string, from []string, hold int) func() int {
	var opened atomic.Int64
	var wg sync.WaitGroup
	per := max(1, hold/len(from))
	for _, ip := range from {
		wg.Go(func() {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: time.Second}
			ring := make([]net.Conn, per)
			defer func() {
				for _, c := range ring {
					if c != nil {
						c.Close()
					}
				}
			}()
			for i := 0; ctx.Err() == nil; i = (i + 1) % per {
				c, err := d.DialContext(ctx, "tcp", addr)
				if err != nil {
					time.Sleep(time.Millisecond)
					continue
				}
				opened.Add(1)
				if ring[i] != nil {
					ring[i].Close()
				}
				ring[i] = c
			}
		})
	}
	return func() int { wg.Wait(); return int(opened.Load()) }
}

// honestRounds connects over TCP with the honest launcher's key and asks
// for status, n times, while something else happens; it returns how many
// rounds succeeded and their p99.
func honestRounds(t *testing.T, s *running, n int) (int, time.Duration) {
	t.Helper()
	ok := 0
	var took []time.Duration
	for range n {
		start := time.Now()
		err := func() error {
			nc, err := bus.Connect(s.ClientURL(), bus.ConnectOptions{Name: "honest", NKeySeedFile: s.LauncherNKeyFile(), Policy: bus.OneShot, Timeout: 2 * time.Second})
			if err != nil {
				return err
			}
			defer nc.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err = bus.NewClient(nc).Status(ctx, s.ID())
			return err
		}()
		took = append(took, time.Since(start))
		if err != nil {
			t.Logf("honest round: %v", err)
			continue
		}
		ok++
		time.Sleep(50 * time.Millisecond)
	}
	return ok, percentile(took, 0.99)
}

// Row "pre-auth flood": outsiders with no credentials open raw TCP
// connections to the NATS port and never send CONNECT, from one address
// and from many, holding more than the front door's max_connections. The
// honest launcher still connects and gets its status every time, the
// flood's connections stay bounded, and /readyz stays 200 while it says
// the door is saturated.
func TestAttackPreAuthConnectionFlood(t *testing.T) {
	hold := idleBudget(t, 6000) / 2 // the front door holds two descriptors each
	const maxConns = 1000
	for _, tc := range []struct {
		name string
		from []string
	}{
		{"one address", []string{"127.0.0.2"}},
		{"many addresses", loopbacks(24)}, // 24 × 32 pending is past max_pending (512)
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, "gpu-a", 10000)
			cfg.NATS.FrontDoor.MaxConnections = maxConns
			s := start(t, cfg, Options{})
			before := rssMiB(t)
			ctx, cancel := context.WithCancel(context.Background())
			done := flood(ctx, s.ClientURL()[len("nats://"):], tc.from, hold)
			time.Sleep(2 * time.Second) // let it fill what it can
			const rounds = 40
			ok, p99 := honestRounds(t, s, rounds)
			during := rssMiB(t)
			ready := readyz(t, s)
			st := s.frontDoor().Stats()
			cancel()
			opened := done()
			t.Logf("flood from %d address(es): %d connections opened; honest connect+status %d/%d ok, p99 %s; RSS %d → %d MiB; door %d open, %d pending, refused %v; /readyz: %s",
				len(tc.from), opened, ok, rounds, p99, before, during, st.Open, st.Pending, st.Refused, ready)
			if ok != rounds {
				t.Errorf("honest connect+status %d of %d during the flood, want all", ok, rounds)
			}
			door := s.frontDoor().Config()
			if st.Open > door.MaxConnections || st.Pending > door.MaxPending {
				t.Errorf("door holds %d open, %d pending; want at most %d and %d", st.Open, st.Pending, door.MaxConnections, door.MaxPending)
			}
			var refused uint64
			for _, n := range st.Refused {
				refused += n
			}
			if refused == 0 {
				t.Errorf("the door refused nothing while %d connections were held", hold)
			}
			if !strings.HasPrefix(ready, "200 ") || !strings.Contains(ready, `"nats_front_door"`) {
				t.Errorf("/readyz %s; want 200 that names nats_front_door as degraded", ready)
			}
			if grew := during - before; grew > 64 {
				t.Errorf("RSS grew %d MiB during the flood, want at most 64", grew)
			}
		})
	}
}

// readyz is /readyz's status line and body.
func readyz(t *testing.T, s *running) string {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + s.HTTPAddr() + "/readyz")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
}

// loopbacks returns n loopback addresses from 127.0.0.2 on.
func loopbacks(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("127.0.0.%d", i+2)
	}
	return out
}
