// Package frontdoor is a TCP listener in front of a server that
// authenticates its own clients (the embedded NATS server): it relays
// bytes unchanged, TLS included, and bounds what a peer that has not yet
// authenticated may hold — a handshake deadline, pending connections per
// source address and in all, and a total that pending connections can
// never fill, so that known clients still get in while strangers flood.
// The server says who authenticated (Door.Authenticated); every refusal
// is counted by kind and logged at most once per LogEvery.
package frontdoor

import (
	"container/heap"
	"container/list"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/colocd/colocd/field"
)

// Config bounds the door; it is the nats.front_door section of colocd's
// configuration. Zero fields take the defaults.
type Config struct {
	// MaxConnections bounds the connections open through the door, pending
	// and authenticated (0: DefaultMaxConnections).
	MaxConnections int `mapstructure:"max_connections"`
	// MaxPending bounds the connections that have not authenticated yet
	// (0: DefaultMaxPending). When it is reached, the oldest pending
	// connection of the address that holds the most is closed to make
	// room: a peer that authenticates within milliseconds gets in however
	// fast strangers open connections, and a peer with one connection
	// pending is not closed while another address holds more.
	MaxPending int `mapstructure:"max_pending"`
	// MaxPendingPerAddress bounds one source address's pending
	// connections (0: DefaultMaxPendingPerAddress); past it, that
	// address's oldest pending connection is closed.
	MaxPendingPerAddress int `mapstructure:"max_pending_per_address"`
	// HandshakeTimeout is how long a connection may stay pending (0:
	// DefaultHandshakeTimeout).
	HandshakeTimeout time.Duration `mapstructure:"handshake_timeout"`
}

// Defaults; docs/security.md#before-authentication says why.
const (
	DefaultMaxConnections       = 4096
	DefaultMaxPending           = 512
	DefaultMaxPendingPerAddress = 32
	DefaultHandshakeTimeout     = 2 * time.Second
	// MaxCount bounds every count of Config.
	MaxCount = 1 << 20
	// LogEvery is the least time between two log lines of one kind of
	// refusal; the line says how many it stands for.
	LogEvery = 10 * time.Second
	// SaturatedFor is how long after a refusal for lack of room the door
	// still reports itself saturated.
	SaturatedFor = 30 * time.Second
)

// WithDefaults fills the zero fields.
func (c Config) WithDefaults() Config {
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.MaxPending == 0 {
		c.MaxPending = min(DefaultMaxPending, c.MaxConnections)
	}
	if c.MaxPendingPerAddress == 0 {
		c.MaxPendingPerAddress = min(DefaultMaxPendingPerAddress, c.MaxPending)
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	return c
}

// Validate names each field (under prefix, e.g. "nats.front_door.") that
// is out of range.
func (c Config) Validate(prefix string) error {
	var fc field.Checker
	for _, f := range []struct {
		key string
		v   int
	}{{"max_connections", c.MaxConnections}, {"max_pending", c.MaxPending}, {"max_pending_per_address", c.MaxPendingPerAddress}} {
		if f.v < 0 || f.v > MaxCount {
			fc.Add(prefix+f.key, fmt.Sprintf("0 (the default) or a count from 1 to %d", MaxCount), strconv.Itoa(f.v))
		}
	}
	d := c.WithDefaults()
	if c.MaxPending > 0 && d.MaxPending > d.MaxConnections/2 {
		fc.Add(prefix+"max_pending", fmt.Sprintf("at most half of max_connections (%d), so that authenticated clients keep room", d.MaxConnections/2), strconv.Itoa(c.MaxPending))
	}
	if c.MaxPendingPerAddress > 0 && d.MaxPendingPerAddress > d.MaxPending {
		fc.Add(prefix+"max_pending_per_address", fmt.Sprintf("at most max_pending (%d)", d.MaxPending), strconv.Itoa(c.MaxPendingPerAddress))
	}
	if c.HandshakeTimeout < 0 || c.HandshakeTimeout > time.Minute {
		fc.Add(prefix+"handshake_timeout", "0 (2s) or a duration up to 1m", c.HandshakeTimeout.String())
	}
	return fc.Err("front door")
}

// Refusal is a kind of connection the door closed before it authenticated.
type Refusal int

const (
	// Full: the door held MaxConnections already.
	Full Refusal = iota
	// PendingFull: the oldest pending connection, closed for a newcomer.
	PendingFull
	// PerAddress: the oldest pending connection of an address that
	// reached MaxPendingPerAddress.
	PerAddress
	// Timeout: pending for longer than HandshakeTimeout.
	Timeout
	// Upstream: the server could not be reached.
	Upstream
	refusals
)

var refusalNames = [refusals]string{"max_connections", "max_pending", "max_pending_per_address", "handshake_timeout", "upstream"}

// String is the refusal's stable name, as metrics and logs give it.
func (r Refusal) String() string { return refusalNames[r] }

// Refusals lists every kind, in a stable order.
func Refusals() []Refusal {
	out := make([]Refusal, refusals)
	for i := range out {
		out[i] = Refusal(i)
	}
	return out
}

// Door accepts on one listener and relays each connection to the server.
type Door struct {
	cfg    Config
	ln     net.Listener
	target string
	log    *slog.Logger
	now    func() time.Time
	// after runs f once d has passed, as time.AfterFunc (a test's hook).
	after func(d time.Duration, f func()) *time.Timer

	mu       sync.Mutex
	open     int
	npending int                   // connections not yet authenticated
	byAddr   map[string]*addrQueue // source IP → its pending connections
	heavy    addrHeap              // the same queues, the most pending first
	seq      uint64                // admissions so far: each conn's number
	byLocal  map[string]*conn      // upstream's local address → the pending conn it relays
	lastFull time.Time
	// lastFlood is when an address last passed MaxPendingPerAddress:
	// floodAddr.
	lastFlood time.Time
	floodAddr string
	logged    [refusals]time.Time
	quiet     [refusals]int
	closed    bool

	refused [refusals]atomic.Uint64
	wg      sync.WaitGroup
}

// conn is one relayed connection.
type conn struct {
	down, up net.Conn
	ip       string
	local    string
	seq      uint64
	byIP     *list.Element // on its address's pending queue; nil once off it
	counted  bool          // in Door.open
	timer    *time.Timer

	mu     sync.Mutex // guards up and closed
	closed bool
}

// close closes both ends, once; an upstream end set later (setUp) is
// closed there.
func (c *conn) close() {
	c.mu.Lock()
	done, up := c.closed, c.up
	c.closed = true
	c.mu.Unlock()
	if done {
		return
	}
	c.down.Close()
	if up != nil {
		up.Close()
	}
}

// setUp gives c its upstream end; false (and up closed) when c is closed.
func (c *conn) setUp(up net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		up.Close()
		return false
	}
	c.up = up
	return true
}

// Listen opens the door on addr (host:port; port 0 picks one) in front of
// the server at target and starts it. log receives refusals (nil: none).
func Listen(addr, target string, cfg Config, log *slog.Logger) (*Door, error) {
	if err := cfg.Validate(""); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	d := New(ln, target, cfg, log)
	d.Start()
	return d, nil
}

// New makes a door on ln in front of the server at target; it accepts
// once Start is called, so that whoever must hear of it (the server's
// authenticator) can be told first. cfg must be valid (Config.Validate).
func New(ln net.Listener, target string, cfg Config, log *slog.Logger) *Door {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Door{cfg: cfg.WithDefaults(), ln: ln, target: target, log: log, now: time.Now, after: time.AfterFunc,
		byAddr: map[string]*addrQueue{}, byLocal: map[string]*conn{}}
}

// Start accepts connections until Close.
func (d *Door) Start() { d.wg.Go(d.accept) }

// Addr is the address the door listens on.
func (d *Door) Addr() net.Addr { return d.ln.Addr() }

// Config is the door's bounds, defaults filled.
func (d *Door) Config() Config { return d.cfg }

// Close stops accepting, closes every connection and waits for their
// relays to end.
func (d *Door) Close() error {
	err := d.ln.Close()
	d.mu.Lock()
	d.closed = true
	var all []*conn
	for _, c := range d.byLocal {
		all = append(all, c)
	}
	d.mu.Unlock()
	for _, c := range all {
		c.close()
	}
	d.wg.Wait()
	return err
}

func (d *Door) accept() {
	for {
		nc, err := d.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			return // closed
		}
		d.admit(nc)
	}
}

// admit takes nc in as pending, making room as Config says, and relays it.
func (d *Door) admit(nc net.Conn) {
	ip := nc.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(ip); err == nil {
		ip = h
	}
	c := &conn{down: nc, ip: ip}
	var evict *conn
	var why Refusal
	d.mu.Lock()
	if d.closed || d.open >= d.cfg.MaxConnections {
		d.lastFull = d.now()
		d.mu.Unlock()
		d.refuse(Full, ip) // counted before the peer sees it closed
		nc.Close()
		return
	}
	d.open++
	d.seq++
	c.counted, c.seq = true, d.seq
	if q := d.byAddr[ip]; q != nil && q.conns.Len() >= d.cfg.MaxPendingPerAddress {
		evict, why = q.oldest(), PerAddress
		d.lastFlood, d.floodAddr = d.now(), ip
	} else if d.npending >= d.cfg.MaxPending {
		// The address that holds the most pending gives up its oldest: a
		// client with one connection pending is not closed while others
		// hold more.
		evict, why = d.heavy[0].oldest(), PendingFull
		d.lastFull = d.now()
	}
	if evict != nil {
		d.unpendLocked(evict)
		d.uncountLocked(evict)
	}
	d.npending++
	if q := d.byAddr[ip]; q != nil {
		c.byIP = q.conns.PushBack(c)
		heap.Fix(&d.heavy, q.index)
	} else {
		q = &addrQueue{ip: ip}
		c.byIP = q.conns.PushBack(c)
		d.byAddr[ip] = q
		heap.Push(&d.heavy, q)
	}
	c.timer = d.after(d.cfg.HandshakeTimeout, func() { d.expire(c) })
	d.mu.Unlock()
	if evict != nil {
		d.refuse(why, evict.ip)
		evict.close()
	}
	d.wg.Go(func() { d.relay(c) })
}

// expire closes c if it is still pending.
func (d *Door) expire(c *conn) {
	d.mu.Lock()
	still := c.byIP != nil
	d.unpendLocked(c)
	if still {
		d.uncountLocked(c)
	}
	d.mu.Unlock()
	if still {
		d.refuse(Timeout, c.ip)
		c.close()
	}
}

// relay dials the server and copies both ways until either side ends.
func (d *Door) relay(c *conn) {
	defer d.done(c)
	up, err := net.DialTimeout("tcp", d.target, d.cfg.HandshakeTimeout)
	if err != nil {
		d.refuse(Upstream, c.ip)
		c.close()
		return
	}
	if !c.setUp(up) {
		return
	}
	d.mu.Lock()
	gone := d.closed
	c.local = up.LocalAddr().String()
	if !gone {
		d.byLocal[c.local] = c
	}
	d.mu.Unlock()
	if gone {
		c.close()
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { io.Copy(up, c.down); c.close() })
	io.Copy(c.down, up)
	c.close()
	wg.Wait()
}

// done forgets c once its relay has ended.
func (d *Door) done(c *conn) {
	c.timer.Stop()
	c.close()
	d.mu.Lock()
	d.unpendLocked(c)
	if c.local != "" && d.byLocal[c.local] == c {
		delete(d.byLocal, c.local)
	}
	d.uncountLocked(c)
	d.mu.Unlock()
}

// uncountLocked takes c out of Door.open (a no-op when it is out): when its
// relay ends, or at once when the door closes it, so that connections
// still being torn down do not keep newcomers out.
func (d *Door) uncountLocked(c *conn) {
	if c.counted {
		c.counted = false
		d.open--
	}
}

// unpendLocked takes c off the pending lists (a no-op when it is off).
func (d *Door) unpendLocked(c *conn) {
	if c.byIP == nil {
		return
	}
	q := d.byAddr[c.ip]
	q.conns.Remove(c.byIP)
	c.byIP = nil
	d.npending--
	if q.conns.Len() == 0 {
		delete(d.byAddr, c.ip)
		heap.Remove(&d.heavy, q.index)
		return
	}
	heap.Fix(&d.heavy, q.index)
}

// addrQueue is one source address's pending connections, oldest first.
type addrQueue struct {
	ip    string
	conns list.List
	index int // in Door.heavy
}

func (q *addrQueue) oldest() *conn { return q.conns.Front().Value.(*conn) }

// addrHeap orders the addresses by pending connections, most first; among
// equals, the one whose oldest came first.
type addrHeap []*addrQueue

func (h addrHeap) Len() int { return len(h) }
func (h addrHeap) Less(i, j int) bool {
	if a, b := h[i].conns.Len(), h[j].conns.Len(); a != b {
		return a > b
	}
	return h[i].oldest().seq < h[j].oldest().seq
}
func (h addrHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *addrHeap) Push(x any) {
	q := x.(*addrQueue)
	q.index = len(*h)
	*h = append(*h, q)
}
func (h *addrHeap) Pop() any {
	old := *h
	q := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return q
}

// Authenticated tells the door that the server authenticated the client
// that reaches it from local (the door's own end of the relay, which the
// server sees as the client's address). It returns the client's source
// address, or "" when local is no connection of the door's (a client that
// reached the server without it).
func (d *Door) Authenticated(local net.Addr) string {
	if local == nil {
		return ""
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.byLocal[local.String()]
	if c == nil {
		return ""
	}
	d.unpendLocked(c)
	return c.ip
}

// refuse counts one refusal of kind r and logs it, at most once per
// LogEvery per kind.
func (d *Door) refuse(r Refusal, ip string) {
	d.refused[r].Add(1)
	d.mu.Lock()
	now := d.now()
	if now.Sub(d.logged[r]) < LogEvery {
		d.quiet[r]++
		d.mu.Unlock()
		return
	}
	n := d.quiet[r] + 1
	d.logged[r], d.quiet[r] = now, 0
	d.mu.Unlock()
	d.log.Warn("connection refused before authentication", "reason", r.String(), "addr", ip, "count", n, "since", LogEvery.String())
}

// Stats is what the door holds and has refused.
type Stats struct {
	// Open counts every relayed connection, Pending those not yet
	// authenticated.
	Open, Pending int
	// Refused counts the connections closed before they authenticated,
	// by kind.
	Refused [refusals]uint64
}

// Stats returns the door's counts now.
func (d *Door) Stats() Stats {
	d.mu.Lock()
	s := Stats{Open: d.open, Pending: d.npending}
	d.mu.Unlock()
	for i := range s.Refused {
		s.Refused[i] = d.refused[i].Load()
	}
	return s
}

// Saturated returns why the door is short of room — full now, or it
// closed a connection for lack of room within SaturatedFor — or why it is
// flooded: it closed an address's connection past MaxPendingPerAddress
// within SaturatedFor. Otherwise nil.
func (d *Door) Saturated() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.open >= d.cfg.MaxConnections:
		return fmt.Errorf("%d connections open, the most nats.front_door.max_connections allows", d.open)
	case d.npending >= d.cfg.MaxPending:
		return fmt.Errorf("%d connections waiting to authenticate, the most nats.front_door.max_pending allows", d.npending)
	case !d.lastFull.IsZero() && d.now().Sub(d.lastFull) < SaturatedFor:
		return fmt.Errorf("connections closed for lack of room %s ago", d.now().Sub(d.lastFull).Round(time.Second))
	case !d.lastFlood.IsZero() && d.now().Sub(d.lastFlood) < SaturatedFor:
		return fmt.Errorf("connections from %s closed past nats.front_door.max_pending_per_address %s ago", d.floodAddr, d.now().Sub(d.lastFlood).Round(time.Second))
	}
	return nil
}
