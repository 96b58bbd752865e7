package natsserver

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/internal/credfiles"
	"github.com/colocd/colocd/internal/frontdoor"
	"github.com/colocd/colocd/internal/termtext"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// Launcher identities (docs/security.md#launchers). Each launcher, or each
// team, has its own NKey: the server knows who sent every request (Tenant),
// each identity subscribes only below its own inbox (LauncherInbox), so no
// launcher reads another's replies, and one can be removed without
// touching the others. The embedded server checks them itself (an
// authenticator the set of which changes while it runs); `colocd launcher
// add NAME` writes a key's public half into the launchers directory, which
// the sidecar reads again while it runs.

// Launcher is one identity that may connect as a launcher.
type Launcher struct {
	// Name names it in logs and in `colocd launcher list`.
	Name string `json:"name"`
	// Key is its public user NKey ("U…").
	Key string `json:"key"`
}

// launcherName is what a launcher's name may be: a file name, a log field.
var launcherName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ValidateLauncherName checks a launcher's name.
func ValidateLauncherName(name string) error {
	if !launcherName.MatchString(name) {
		return fmt.Errorf("launcher name: want 1 to 64 letters, digits, '_', '-' or '.', starting with a letter or digit, got %q", termtext.Clip(name))
	}
	return nil
}

// launcherKeyExt ends the files of a launchers directory.
const launcherKeyExt = ".pub"

// ReadLaunchers reads a launchers directory: one file NAME.pub per
// launcher, holding its public user NKey. A directory that does not exist
// is empty. The directory and every file must be colocd's user's or
// root's and not writable by others: a key there lets its holder in.
func ReadLaunchers(dir string) ([]Launcher, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("launchers directory: %w", err)
	}
	if err := credfiles.Private(dir); err != nil {
		return nil, fmt.Errorf("launchers directory: %w", err)
	}
	var out []Launcher
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), launcherKeyExt)
		if !ok || e.IsDir() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := ValidateLauncherName(name); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if err := credfiles.Private(path); err != nil {
			return nil, fmt.Errorf("launcher %s: %w", name, err)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("launcher %s: %w", name, err)
		}
		key := string(bytes.TrimSpace(raw))
		if !nkeys.IsValidPublicUserKey(key) {
			return nil, fmt.Errorf("launcher %s: %s: want a public user NKey (U…), got %q", name, path, termtext.Clip(key))
		}
		out = append(out, Launcher{Name: name, Key: key})
	}
	return out, nil
}

// AddLauncher makes a new launcher identity NAME: its public key goes into
// dir (created mode 0700), and its seed is returned for its owner alone.
// A name already there is an error.
func AddLauncher(dir, name string) (seed []byte, l Launcher, err error) {
	if err := ValidateLauncherName(name); err != nil {
		return nil, l, err
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, l, err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, l, err
	}
	if seed, err = kp.Seed(); err != nil {
		return nil, l, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, l, fmt.Errorf("launchers directory: %w", err)
	}
	if err := credfiles.Private(dir); err != nil {
		return nil, l, fmt.Errorf("launchers directory: %w", err)
	}
	path := filepath.Join(dir, name+launcherKeyExt)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return nil, l, fmt.Errorf("launcher %s exists already (%s): remove it first, or choose another name", name, path)
	}
	if err != nil {
		return nil, l, err
	}
	_, werr := f.WriteString(pub + "\n")
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		_ = os.Remove(path)
		return nil, l, fmt.Errorf("launcher %s: %w", name, err)
	}
	return seed, Launcher{Name: name, Key: pub}, nil
}

// RemoveLauncher deletes launcher NAME from dir; a sidecar that reads dir
// closes its connections.
func RemoveLauncher(dir, name string) error {
	if err := ValidateLauncherName(name); err != nil {
		return err
	}
	err := os.Remove(filepath.Join(dir, name+launcherKeyExt))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no launcher %s in %s", name, dir)
	}
	return err
}

// authenticator decides who connects to the embedded server: the sidecar's
// own key, in process only, and the launchers of the moment, each in the
// launchers' account with its own inbox, and at most maxConns connections
// at a time. It is nats-server's custom authentication, so that the set of
// launchers changes without a reload.
type authenticator struct {
	sidecarKey string
	sidecars   *server.Account
	launchers  *server.Account
	sidecarID  string
	maxConns   int

	mu    sync.RWMutex
	srv   *server.Server  // set once the server exists
	door  *frontdoor.Door // set once the front door exists, if it does
	byKey map[string]Launcher
	// shunned are identities refused until the time given (Shun).
	shunned map[string]time.Time

	// log hears of refused launchers, once per refusalLogEvery per
	// identity and reason (logged: when each was last told).
	log    *slog.Logger
	logMu  sync.Mutex
	logged map[[2]string]time.Time
}

// refusalLogEvery is the least time between two log lines of one
// identity's refused connections for one reason.
const refusalLogEvery = 10 * time.Second

// refused logs that identity's connection was refused, and why, at most
// once per refusalLogEvery per identity and reason.
func (a *authenticator) refused(name, why string) {
	if a.log == nil {
		return
	}
	now, k := time.Now(), [2]string{name, why}
	a.logMu.Lock()
	if now.Sub(a.logged[k]) < refusalLogEvery {
		a.logMu.Unlock()
		return
	}
	if a.logged == nil || len(a.logged) > 4096 {
		a.logged = map[[2]string]time.Time{}
	}
	a.logged[k] = now
	a.logMu.Unlock()
	a.log.Warn("launcher connection refused", "launcher", name, "reason", why)
}

// attach binds the authenticator to srv, whose accounts users join.
func (a *authenticator) attach(srv *server.Server) error {
	sidecars, err := srv.LookupAccount(v1.SidecarAccount)
	if err != nil {
		return fmt.Errorf("account %s: %w", v1.SidecarAccount, err)
	}
	launchers, err := srv.LookupAccount(v1.LauncherAccount)
	if err != nil {
		return fmt.Errorf("account %s: %w", v1.LauncherAccount, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.srv, a.sidecars, a.launchers = srv, sidecars, launchers
	return nil
}

// Check is server.Authentication's: verify the NKey's signature of the
// nonce, then register the user with its account and permissions.
func (a *authenticator) Check(c server.ClientAuthentication) bool {
	if c.Kind() != server.CLIENT {
		return false
	}
	o := c.GetOpts()
	if o == nil || o.Nkey == "" || !verifyNonce(o.Nkey, o.Sig, c.GetNonce()) {
		return false
	}
	a.mu.RLock()
	l, ok := a.byKey[o.Nkey]
	srv, sidecars, launchers, door := a.srv, a.sidecars, a.launchers, a.door
	until := a.shunned[o.Nkey]
	a.mu.RUnlock()
	if time.Now().Before(until) {
		a.refused(l.Name, "shunned for flooding")
		return false
	}
	if o.Nkey == a.sidecarKey {
		if addr := c.RemoteAddress(); addr == nil || addr.Network() != (pipeAddr{}).Network() {
			return false // the sidecar's key is good in process only
		}
		c.RegisterUser(&server.User{Username: "sidecar", Account: sidecars})
		return true
	}
	if !ok {
		return false
	}
	if srv != nil && a.maxConns > 0 {
		// The connection being authenticated is counted too. (Total
		// counts before the user filter; NumConns after.)
		if cz, err := srv.Connz(&server.ConnzOptions{Username: true, User: o.Nkey, Limit: a.maxConns + 1}); err == nil && cz.NumConns > a.maxConns {
			a.refused(l.Name, fmt.Sprintf("over nats.launchers.max_connections (%d)", a.maxConns))
			return false
		}
	}
	c.RegisterUser(&server.User{Username: "launcher:" + l.Name, Account: launchers, Permissions: LauncherPermissions(a.sidecarID, l.Key)})
	if door != nil {
		door.Authenticated(c.RemoteAddress())
	}
	return true
}

// setDoor tells the authenticator of the front door whose connections it
// authenticates, so that it can tell the door which ones did.
func (a *authenticator) setDoor(d *frontdoor.Door) {
	a.mu.Lock()
	a.door = d
	a.mu.Unlock()
}

// pipeAddr stands for net.Pipe's address, which in-process connections have.
type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

var _ net.Addr = pipeAddr{}

// verifyNonce checks sig, base64 as a client sends it, against nonce and
// the public key key.
func verifyNonce(key, sig string, nonce []byte) bool {
	if len(nonce) == 0 || !nkeys.IsValidPublicUserKey(key) {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		if raw, err = base64.StdEncoding.DecodeString(sig); err != nil {
			return false
		}
	}
	kp, err := nkeys.FromPublicKey(key)
	if err != nil {
		return false
	}
	return kp.Verify(nonce, raw) == nil
}

// set replaces the launchers and closes the connections of those no
// longer there.
func (a *authenticator) set(ls []Launcher) error {
	byKey := make(map[string]Launcher, len(ls))
	for i, l := range ls {
		if !nkeys.IsValidPublicUserKey(l.Key) {
			return fmt.Errorf("launcher %d (%s): want a public user NKey (U…), got %q", i, l.Name, termtext.Clip(l.Key))
		}
		if l.Key == a.sidecarKey {
			return fmt.Errorf("launcher %s: the sidecar's own key", l.Name)
		}
		if _, dup := byKey[l.Key]; !dup {
			byKey[l.Key] = l
		}
	}
	a.mu.Lock()
	var gone []string
	for k := range a.byKey {
		if _, ok := byKey[k]; !ok {
			gone = append(gone, k)
		}
	}
	a.byKey = byKey
	srv := a.srv
	a.mu.Unlock()
	if srv == nil {
		return nil
	}
	for _, k := range gone {
		if cz, err := srv.Connz(&server.ConnzOptions{Username: true, User: k, Limit: 1 << 16}); err == nil {
			for _, ci := range cz.Conns {
				_ = srv.DisconnectClientByID(ci.Cid)
			}
		}
	}
	return nil
}

// shun closes connection cid (0: none) of launcher key and refuses the
// identity's new connections for d. It returns the launcher's name ("" for
// a key that is no launcher's: nothing is done).
func (a *authenticator) shun(key string, cid uint64, d time.Duration) string {
	a.mu.Lock()
	l, ok := a.byKey[key]
	srv := a.srv
	if ok {
		if a.shunned == nil {
			a.shunned = map[string]time.Time{}
		}
		now := time.Now()
		for k, t := range a.shunned {
			if now.After(t) {
				delete(a.shunned, k)
			}
		}
		a.shunned[key] = now.Add(d)
	}
	a.mu.Unlock()
	if !ok {
		return ""
	}
	if srv != nil && cid != 0 {
		// Only if that connection is the launcher's: the id came in a
		// header the server wrote, but check all the same.
		if cz, err := srv.Connz(&server.ConnzOptions{CID: cid, Username: true, User: key}); err == nil && len(cz.Conns) == 1 {
			_ = srv.DisconnectClientByID(cid)
		}
	}
	return l.Name
}

// list returns the launchers, sorted by name.
func (a *authenticator) list() []Launcher {
	a.mu.RLock()
	defer a.mu.RUnlock()
	out := make([]Launcher, 0, len(a.byKey))
	for _, l := range a.byKey {
		out = append(out, l)
	}
	slices.SortFunc(out, func(x, y Launcher) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// AddLauncherSeedFile makes a launcher identity name in dir (AddLauncher)
// and writes its seed to seedPath, mode 0600, which must not exist: the
// seed file first, so that a key never sits in the directory without its
// seed, and neither is left when either fails. Its errors name colocd
// launcher add's --out.
func AddLauncherSeedFile(dir, name, seedPath string) (Launcher, error) {
	f, err := os.OpenFile(seedPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return Launcher{}, fmt.Errorf("--out %s exists: choose another file", seedPath)
	}
	if err != nil {
		return Launcher{}, fmt.Errorf("--out: %w", err)
	}
	seed, l, err := AddLauncher(dir, name)
	if err != nil {
		f.Close()
		os.Remove(seedPath)
		return Launcher{}, err
	}
	_, werr := f.Write(append(seed, '\n'))
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		_ = RemoveLauncher(dir, name)
		_ = os.Remove(seedPath)
		return Launcher{}, fmt.Errorf("%s: %w", seedPath, err)
	}
	return l, nil
}
