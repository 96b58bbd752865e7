package sidecar

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"
)

// HTTP limits: a client cannot hold the sidecar's file descriptors, which
// NATS and the JetStream store need, by opening connections and sending
// nothing (docs/security.md).
const (
	// maxHTTPConns bounds the open connections to /healthz, /readyz and
	// /metrics (Prometheus and the kubelet need a handful).
	maxHTTPConns = 256
	// httpReadHeaderTimeout closes a connection that sends no request.
	httpReadHeaderTimeout = 5 * time.Second
	httpReadTimeout       = 10 * time.Second
	httpWriteTimeout      = 30 * time.Second // a large /metrics on a slow link
	httpIdleTimeout       = 60 * time.Second
	httpMaxHeaderBytes    = 16 << 10
)

// connLimiter keeps at most max connections open. A new connection over
// the bound closes the oldest one that is not serving a request (new or
// idle): an attacker's idle connections make way for a probe's, instead
// of a probe being refused behind them.
type connLimiter struct {
	net.Listener
	max int

	mu      sync.Mutex
	conns   map[net.Conn]connInfo
	evicted int // connections closed to make room, for tests and logs
}

type connInfo struct {
	state http.ConnState
	since time.Time
}

func newConnLimiter(ln net.Listener, max int) *connLimiter {
	return &connLimiter{Listener: ln, max: max, conns: map[net.Conn]connInfo{}}
}

// Accept returns the next connection, making room for it first.
func (l *connLimiter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.conns) >= l.max {
		if !l.evictLocked() {
			break // every one is serving a request: over the bound for a moment
		}
	}
	l.conns[c] = connInfo{state: http.StateNew, since: time.Now()}
	return c, nil
}

// evictLocked closes the oldest connection that serves no request.
func (l *connLimiter) evictLocked() bool {
	var (
		oldest net.Conn
		at     time.Time
	)
	for c, in := range l.conns {
		if in.state == http.StateActive {
			continue
		}
		if oldest == nil || in.since.Before(at) {
			oldest, at = c, in.since
		}
	}
	if oldest == nil {
		return false
	}
	delete(l.conns, oldest)
	l.evicted++
	_ = oldest.Close()
	return true
}

// track is the server's ConnState hook: it keeps each connection's state
// and forgets closed ones.
func (l *connLimiter) track(c net.Conn, st http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateClosed, http.StateHijacked:
		delete(l.conns, c)
	default:
		if _, ok := l.conns[c]; ok {
			l.conns[c] = connInfo{state: st, since: time.Now()}
		}
	}
}

// open is how many connections are open.
func (l *connLimiter) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// fdsReadyBelow is the share of the process's file descriptor limit in use
// above which /readyz says not ready: NATS and the JetStream store need
// descriptors to write leases and events.
const fdsReadyBelow = 0.9

// checkFDs reports whether the process has file descriptors to spare.
func checkFDs() error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == 0 {
		return nil // unknown: not a reason to refuse
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil
	}
	return fdsSpare(uint64(len(ents)), lim.Cur)
}

// fdsSpare says whether n open descriptors of limit leave enough.
func fdsSpare(n, limit uint64) error {
	if float64(n) > fdsReadyBelow*float64(limit) {
		return fmt.Errorf("%d of %d file descriptors open", n, limit)
	}
	return nil
}
