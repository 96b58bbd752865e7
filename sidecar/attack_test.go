//go:build attack

package sidecar

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"
	"github.com/colocd/colocd/configs"
)

// The attack suite (make attack): a hostile launcher with valid
// credentials, its own identity, against an honest one on a real sidecar.
// Its figures are wall-clock goals, so it runs apart from make test's
// unit tests, once, on an otherwise quiet machine.

// hostileIdentity is identityNamed for the attack suite's identity,
// "hostile".
func hostileIdentity(t *testing.T, dataDir string) string {
	t.Helper()
	return identityNamed(t, dataDir, "hostile")
}

// hostileProfile is a distinct profile of half-microsecond kernels: seconds
// of simulation per prediction.
func hostileProfile(i int) []byte {
	return fmt.Appendf(nil, `{"format":"colocd.profile/v1","name":"hostile-%d","kind":"training","device":{"name":"NVIDIA H200","sms":132},"memory_mib":10,
"ops":[{"name":"a","dur_us":0.5,"sm":1,"occupancy":1},{"name":"b","dur_us":0.5,"sm":1,"occupancy":1}]}`, i)
}

// Row 4: 15 admits of slow profiles in flight from one launcher; another
// launcher's admit is answered within a second, and each hostile one
// within its deadline and a second.
func TestAttackSlowProfilesDoNotStarveOthers(t *testing.T) {
	cfg := testConfig(t, "gpu-a", 10000)
	cfg.Admission.MaxJobs = 20
	cfg.Predictor.Requests = configs.Default().Predictor.Requests // a sidecar's horizon
	seed := hostileIdentity(t, cfg.Sidecar.DataDir)
	s := start(t, cfg, Options{})
	hostile, honest := dialAs(t, s, seed), client(t, s)

	const flood, deadline = 15, 5 * time.Second
	var wg sync.WaitGroup
	late := make(chan string, flood)
	for i := range flood {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			req := admitReq(fmt.Sprintf("hostile-%d", i), 10, 100)
			req.RequestID = fmt.Sprintf("hostile-request-id-0123456789-%d", i)
			req.Profile = hostileProfile(i)
			start := time.Now()
			_, err := hostile.Admit(ctx, s.ID(), req)
			if took := time.Since(start); took > deadline+time.Second {
				late <- fmt.Sprintf("hostile admit %d answered after %s (%v)", i, took, err)
			}
		})
	}
	time.Sleep(300 * time.Millisecond) // the flood is in
	var worst time.Duration
	for i := range 5 {
		start := time.Now()
		d, err := honest.Admit(context.Background(), s.ID(), admitReq(fmt.Sprintf("honest-%d", i), 10, 100))
		took := time.Since(start)
		worst = max(worst, took)
		if err != nil {
			t.Errorf("honest admit %d: %v", i, err)
			continue
		}
		if d.Lease != nil {
			if err := honest.Release(context.Background(), s.ID(), &v1.LeaseRef{LeaseID: d.Lease.ID, Token: d.Lease.Token}); err != nil {
				t.Error(err)
			}
		}
	}
	wg.Wait()
	close(late)
	for l := range late {
		t.Error(l)
	}
	t.Logf("honest admit, worst of 5 with %d slow admits in flight: %s", flood, worst)
	if worst > time.Second {
		t.Errorf("an honest admit took %s with %d hostile admits in flight, want at most 1 s", worst, flood)
	}
}

// Row 3: a flood of wrong-token renews, not waiting for answers, from one
// launcher; another's renews all succeed, p99 within 50 ms.
func TestAttackRenewFloodKeepsHonestRenews(t *testing.T) {
	cfg := testConfig(t, "gpu-a", 10000)
	// A tenth of the default rate: a flood is told from honest traffic at
	// 4,000 refusals a second, which a slow machine's attacker still
	// reaches (ATTACK_DEFAULT_LIMITS=1 plays it at the defaults: 20,000).
	if os.Getenv("ATTACK_DEFAULT_LIMITS") == "" {
		cfg.NATS.Limits.TenantRate, cfg.NATS.Limits.TenantBurst = 200, 400
	}
	seed := hostileIdentity(t, cfg.Sidecar.DataDir)
	s := start(t, cfg, Options{})
	honest := client(t, s)
	d := leased(context.Background(), t, honest, s.ID(), admitReq("honest", 10, 100))
	ref := &v1.LeaseRef{LeaseID: d.Lease.ID, Token: d.Lease.Token}
	nc := connAs(t, s, seed)
	stop := make(chan struct{})
	flooded := make(chan int)
	go func() {
		n := 0
		body := []byte(`{"lease_id":"` + d.Lease.ID + `","token":"wrong-token-wrong-token"}`)
		inbox := nc.NewRespInbox()
		for {
			select {
			case <-stop:
				flooded <- n
				return
			default:
			}
			for range 256 {
				if err := nc.PublishRequest(v1.EndpointSubject(s.ID(), v1.EndpointRenew), inbox, body); err != nil {
					time.Sleep(100 * time.Millisecond) // closed: a real attacker would dial again, and be refused
					break
				}
				n++
			}
		}
	}()
	rssBefore := rssMiB(t)
	time.Sleep(500 * time.Millisecond)
	var lat []time.Duration
	fails := 0
	for range attackRenews() {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := honest.Renew(ctx, s.ID(), ref)
		cancel()
		if err != nil {
			fails++
		}
		lat = append(lat, time.Since(start))
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	n := <-flooded
	if nc.IsConnected() {
		t.Error("the flooding connection is still connected: it was not closed, or it came back while shunned")
	}
	if grew := rssMiB(t) - rssBefore; grew > 200 {
		t.Errorf("the process's RSS grew %d MiB during the flood, want at most 200", grew)
	} else {
		t.Logf("RSS growth during the flood: %d MiB", grew)
	}
	p99 := percentile(lat, 0.99)
	t.Logf("honest renew p99 %s over %d renews (%d failed), while %d wrong-token renews were flooded", p99, attackRenews(), fails, n)
	if fails > 0 {
		t.Errorf("%d of %d honest renews failed under a flood, want none", fails, attackRenews())
	}
	if p99 > 50*time.Millisecond {
		t.Errorf("honest renew p99 %s under a flood, want at most 50 ms", p99)
	}
}

// rssMiB is the process's resident memory (sidecar, server and attacker
// together: an upper bound on the sidecar's), MiB.
func rssMiB(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatal(err)
			}
			return kb / 1024
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// Row 1: 5,000 idle connections to the HTTP port; 20 of 20 honest admits
// succeed, and /readyz answers.
func TestAttackIdleHTTPConnections(t *testing.T) {
	s := start(t, testConfig(t, "gpu-a", 10000), Options{})
	idle := idleBudget(t, 5000)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range idle {
		c, err := net.Dial("tcp", s.HTTPAddr())
		if err != nil {
			t.Fatalf("idle connection %d: %v (raise ulimit -n to run this attack)", i, err)
		}
		conns = append(conns, c)
	}
	c := client(t, s)
	for i := range 20 {
		d, err := c.Admit(context.Background(), s.ID(), admitReq(fmt.Sprintf("honest-%d", i), 10, 100))
		if err != nil {
			t.Fatalf("admit %d with 5,000 idle HTTP connections: %v", i, err)
		}
		if d.Lease != nil {
			if err := c.Release(context.Background(), s.ID(), &v1.LeaseRef{LeaseID: d.Lease.ID, Token: d.Lease.Token}); err != nil {
				t.Fatal(err)
			}
		}
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get("http://" + s.HTTPAddr() + "/readyz")
	if err != nil {
		t.Fatalf("/readyz with 5,000 idle connections: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz: %s", resp.Status)
	}
}

// Row 5: one launcher makes 1,000 watches; another's admit and watch
// succeed, and it gets its events.
func TestAttackThousandWatches(t *testing.T) {
	cfg := testConfig(t, "gpu-a", 10000)
	seed := hostileIdentity(t, cfg.Sidecar.DataDir)
	s := start(t, cfg, Options{})
	hostile, honest := dialAs(t, s, seed), client(t, s)
	for i := range 1000 {
		sub, err := hostile.Events(context.Background(), s.ID(), "", 0)
		if err != nil {
			t.Fatalf("hostile watch %d: %v", i, err)
		}
		sub.Stop()
	}
	sub, err := honest.Events(context.Background(), s.ID(), "honest", 0)
	if err != nil {
		t.Fatalf("honest watch after 1,000 hostile ones: %v", err)
	}
	defer sub.Stop()
	d := leased(context.Background(), t, honest, s.ID(), admitReq("honest", 10, 100))
	if err := honest.Release(context.Background(), s.ID(), &v1.LeaseRef{LeaseID: d.Lease.ID, Token: d.Lease.Token}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // a pull or two
	if err := sub.Err(); err != nil {
		t.Errorf("the honest launcher's watch: %v", err)
	}
}

// idleBudget raises the soft limit on open files to the hard one and
// returns how many idle connections fit under it, at most want (each
// takes two descriptors in this process: the dialer's and the server's).
func idleBudget(t *testing.T, want int) int {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	n := min(want, (int(min(lim.Cur, 1<<20))-1000)/2)
	if n < want {
		t.Logf("open files limited to %d: %d idle connections instead of %d", lim.Cur, n, want)
	}
	return n
}

// percentile is the q-quantile of ds (nearest rank).
func percentile(ds []time.Duration, q float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// attackRenews is how many honest renews the flood runs for, 20 ms apart
// (ATTACK_RENEWS; default 40).
func attackRenews() int {
	if n, err := strconv.Atoi(os.Getenv("ATTACK_RENEWS")); err == nil && n > 0 {
		return n
	}
	return 40
}
