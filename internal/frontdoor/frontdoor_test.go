package frontdoor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/colocd/colocd/internal/syncio"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// upstream is a server that authenticates a client when it sends the line
// "auth", telling the door, and then echoes every line back.
type upstream struct {
	ln   net.Listener
	door *Door
	wg   sync.WaitGroup
}

func startUpstream(t *testing.T) *upstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{ln: ln}
	u.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.wg.Go(func() {
				defer c.Close()
				r := bufio.NewScanner(c)
				for r.Scan() {
					if r.Text() == "auth" {
						if u.door.Authenticated(c.RemoteAddr()) == "" {
							c.Write([]byte("unknown\n"))
							return
						}
						c.Write([]byte("ok\n"))
						continue
					}
					c.Write(append(r.Bytes(), '\n'))
				}
			})
		}
	})
	t.Cleanup(func() { ln.Close(); u.wg.Wait() })
	return u
}

// open starts a door with cfg in front of a new upstream.
func open(t *testing.T, cfg Config, log *slog.Logger) *Door {
	t.Helper()
	u := startUpstream(t)
	d, err := Listen("127.0.0.1:0", u.ln.Addr().String(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	u.door = d
	t.Cleanup(func() { d.Close() })
	return d
}

// dial connects to d from the loopback address from.
func dial(t *testing.T, d *Door, from string) net.Conn {
	t.Helper()
	dl := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	c, err := dl.Dial("tcp", d.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// say sends line on c and returns the answer.
func say(c net.Conn, line string) (string, error) {
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	s, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(s), err
}

// closedByDoor waits until the door closes c (a read ends with EOF or a
// reset) and says whether it did within a minute.
func closedByDoor(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(time.Minute))
	_, err := io.ReadAll(c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// until polls cond (a state of the door, not a time) for up to a minute.
func until(cond func() bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		if cond() {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

// deadlines replaces d's handshake timers with ones the test fires, and
// returns a function that fires every one set so far.
func deadlines(d *Door) func() {
	var mu sync.Mutex
	var fs []func()
	d.mu.Lock()
	d.after = func(_ time.Duration, f func()) *time.Timer {
		mu.Lock()
		defer mu.Unlock()
		fs = append(fs, f)
		return time.AfterFunc(time.Hour, func() {})
	}
	d.mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		for _, f := range fs {
			f()
		}
	}
}

func TestRelaysBothWaysAndKeepsAuthenticated(t *testing.T) {
	d := open(t, Config{}, nil)
	expire := deadlines(d)
	c := dial(t, d, "127.0.0.1")
	if got, err := say(c, "auth"); err != nil || got != "ok" {
		t.Fatalf("auth through the door: %q, %v", got, err)
	}
	if s := d.Stats(); s.Open != 1 || s.Pending != 0 {
		t.Errorf("after auth: %+v, want 1 open and none pending", s)
	}
	expire() // the handshake deadline passes: it no longer applies
	if got, err := say(c, "hello"); err != nil || got != "hello" {
		t.Errorf("echo after the deadline: %q, %v; an authenticated connection must stay", got, err)
	}
}

func TestClosesWhoDoesNotAuthenticateInTime(t *testing.T) {
	var logs syncio.Buffer
	d := open(t, Config{HandshakeTimeout: 20 * time.Millisecond}, slog.New(slog.NewTextHandler(&logs, nil)))
	var cs []net.Conn
	for range 3 {
		cs = append(cs, dial(t, d, "127.0.0.1"))
	}
	for i, c := range cs {
		if !closedByDoor(c) {
			t.Errorf("connection %d still open a minute after a 20 ms handshake deadline", i)
		}
	}
	if !until(func() bool { return d.Stats().Refused[Timeout] == 3 && d.Stats().Open == 0 }) {
		t.Fatalf("stats %+v, want 3 handshake timeouts and nothing open", d.Stats())
	}
	if n := strings.Count(logs.String(), "reason=handshake_timeout"); n != 1 {
		t.Errorf("%d log lines for 3 timeouts within %s, want 1:\n%s", n, LogEvery, logs.String())
	}
	if d.Saturated() != nil {
		t.Errorf("Saturated after timeouts alone = %v, want nil", d.Saturated())
	}
}

func TestOneAddressCannotCrowdOutAnother(t *testing.T) {
	d := open(t, Config{MaxPendingPerAddress: 2, HandshakeTimeout: time.Minute}, nil)
	first := dial(t, d, "127.0.0.2")
	dial(t, d, "127.0.0.2")
	if !until(func() bool { return d.Stats().Pending == 2 }) {
		t.Fatal("two pending connections never counted")
	}
	dial(t, d, "127.0.0.2")
	if !closedByDoor(first) {
		t.Fatal("the address's oldest pending connection stayed open past its limit")
	}
	honest := dial(t, d, "127.0.0.1")
	if got, err := say(honest, "auth"); err != nil || got != "ok" {
		t.Errorf("another address while one floods: %q, %v", got, err)
	}
	if got := d.Stats().Refused[PerAddress]; got != 1 {
		t.Errorf("refused per address = %d, want 1", got)
	}
	if err := d.Saturated(); err == nil || !strings.Contains(err.Error(), "127.0.0.2") {
		t.Errorf("Saturated = %v, want the flooding address named", err)
	}
}

func TestFullPendingPoolMakesRoomForNewcomers(t *testing.T) {
	d := open(t, Config{MaxPending: 3, MaxPendingPerAddress: 3, HandshakeTimeout: time.Minute}, nil)
	var flood []net.Conn
	for i := range 3 {
		flood = append(flood, dial(t, d, "127.0.0."+string(rune('2'+i))))
	}
	if !until(func() bool { return d.Stats().Pending == 3 }) {
		t.Fatal("three pending connections never counted")
	}
	honest := dial(t, d, "127.0.0.1")
	if got, err := say(honest, "auth"); err != nil || got != "ok" {
		t.Fatalf("a newcomer to a full pending pool: %q, %v", got, err)
	}
	if !closedByDoor(flood[0]) {
		t.Error("the oldest pending connection stayed open when the pool was full")
	}
	if d.Saturated() == nil {
		t.Error("Saturated = nil right after closing a connection for lack of room")
	}
	if got := d.Stats().Refused[PendingFull]; got != 1 {
		t.Errorf("refused for a full pool = %d, want 1", got)
	}
}

// A full pool closes a connection of the address that holds the most
// pending, not an older lone one of another's.
func TestFullPoolClosesTheHeaviestAddress(t *testing.T) {
	d := open(t, Config{MaxPending: 4, MaxPendingPerAddress: 4, HandshakeTimeout: time.Minute}, nil)
	lone := dial(t, d, "127.0.0.5")
	if !until(func() bool { return d.Stats().Pending == 1 }) {
		t.Fatal("the lone connection never counted")
	}
	var flood []net.Conn
	for range 3 {
		flood = append(flood, dial(t, d, "127.0.0.2"))
	}
	if !until(func() bool { return d.Stats().Pending == 4 }) {
		t.Fatal("four pending connections never counted")
	}
	dial(t, d, "127.0.0.3")
	if !closedByDoor(flood[0]) {
		t.Error("the heaviest address's oldest connection stayed open when the pool was full")
	}
	if got, err := say(lone, "auth"); err != nil || got != "ok" {
		t.Errorf("the lone, older connection: %q, %v; want it kept", got, err)
	}
	if st := d.Stats(); st.Refused[PendingFull] != 1 || st.Pending > 4 {
		t.Errorf("stats %+v, want one max_pending refusal and at most 4 pending", st)
	}
}

// A connection the door closes stops counting against max_connections at
// once, not when its relay has wound down.
func TestClosedConnectionsFreeTheirRoom(t *testing.T) {
	d := open(t, Config{MaxConnections: 4, MaxPending: 2, MaxPendingPerAddress: 2, HandshakeTimeout: time.Minute}, nil)
	for range 20 {
		dial(t, d, "127.0.0.2")
	}
	if !until(func() bool { st := d.Stats(); return st.Refused[PerAddress] == 18 && st.Open == 2 }) {
		t.Fatalf("stats %+v, want 18 closed per address and 2 open", d.Stats())
	}
	if st := d.Stats(); st.Refused[Full] != 0 {
		t.Errorf("stats %+v: connections closed by the door kept a newcomer out", st)
	}
}

func TestAuthenticatedKeepTheirRoom(t *testing.T) {
	d := open(t, Config{MaxConnections: 4, MaxPending: 2, MaxPendingPerAddress: 2, HandshakeTimeout: time.Minute}, nil)
	for range 2 {
		if got, err := say(dial(t, d, "127.0.0.1"), "auth"); err != nil || got != "ok" {
			t.Fatalf("auth: %q, %v", got, err)
		}
	}
	dial(t, d, "127.0.0.2")
	dial(t, d, "127.0.0.3")
	if !until(func() bool { return d.Stats().Open == 4 }) {
		t.Fatal("four connections never counted")
	}
	if !closedByDoor(dial(t, d, "127.0.0.4")) {
		t.Fatal("a fifth connection past max_connections stayed open")
	}
	if d.Stats().Refused[Full] != 1 || d.Saturated() == nil {
		t.Errorf("stats %+v, saturated %v: want one max_connections refusal and saturated", d.Stats(), d.Saturated())
	}
}

func TestUnknownLocalAddressIsNotTheDoors(t *testing.T) {
	d := open(t, Config{}, nil)
	if got := d.Authenticated(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}); got != "" {
		t.Errorf("Authenticated(a stranger) = %q, want \"\"", got)
	}
	if got := d.Authenticated(nil); got != "" {
		t.Errorf("Authenticated(nil) = %q, want \"\"", got)
	}
}

func TestCloseEndsEveryRelay(t *testing.T) {
	u := startUpstream(t)
	d, err := Listen("127.0.0.1:0", u.ln.Addr().String(), Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	u.door = d
	a, p := dial(t, d, "127.0.0.1"), dial(t, d, "127.0.0.1")
	if got, err := say(a, "auth"); err != nil || got != "ok" {
		t.Fatal(got, err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if !closedByDoor(a) || !closedByDoor(p) {
		t.Error("a connection outlived the door's Close")
	}
}

func TestUnreachableServerIsARefusal(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := ln.Addr().String()
	ln.Close()
	d, err := Listen("127.0.0.1:0", target, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !closedByDoor(dial(t, d, "127.0.0.1")) {
		t.Fatal("a connection to a door whose server is gone stayed open")
	}
	if !until(func() bool { return d.Stats().Refused[Upstream] == 1 }) {
		t.Errorf("stats %+v, want one upstream refusal", d.Stats())
	}
}

func TestValidateNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		field string
	}{
		{"negative max", Config{MaxConnections: -1}, "nats.front_door.max_connections"},
		{"pending over half", Config{MaxConnections: 100, MaxPending: 60}, "nats.front_door.max_pending"},
		{"per address over pending", Config{MaxPending: 10, MaxPendingPerAddress: 11}, "nats.front_door.max_pending_per_address"},
		{"deadline too long", Config{HandshakeTimeout: time.Hour}, "nats.front_door.handshake_timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate("nats.front_door.")
			if err == nil || !strings.Contains(err.Error(), tc.field+":") {
				t.Errorf("Validate = %v, want an error naming %s", err, tc.field)
			}
		})
	}
	if err := (Config{}).Validate("x."); err != nil {
		t.Errorf("the defaults: %v", err)
	}
	if _, err := Listen("127.0.0.1:0", "127.0.0.1:1", Config{MaxPending: -1}, nil); err == nil {
		t.Error("Listen took a bad config")
	}
}

func TestRefusalNamesAreStable(t *testing.T) {
	var b bytes.Buffer
	for _, r := range Refusals() {
		b.WriteString(r.String() + " ")
	}
	if got, want := b.String(), "max_connections max_pending max_pending_per_address handshake_timeout upstream "; got != want {
		t.Errorf("refusal names %q, want %q (metrics and alerts use them)", got, want)
	}
}
