package natsserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/internal/credfiles"
	"github.com/colocd/colocd/internal/frontdoor"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// readyTimeout bounds how long StartEmbedded waits for the server.
const readyTimeout = 10 * time.Second

// EmbeddedOptions configures StartEmbedded.
type EmbeddedOptions struct {
	// Listen is "host:port" for clients outside the process ("" host: every
	// interface; port -1: a free port), or "" for in-process clients only.
	Listen string
	// StoreDir holds JetStream's files (leases, events); required. The
	// sidecar uses its data dir, so leases survive a restart.
	StoreDir string
	// ServerName names the server (default: nats-server's generated id).
	ServerName string
	// Logger receives the server's log; nil turns logging off.
	Logger *slog.Logger
	// Log receives what colocd says of the listener: the front door's
	// refusals and launchers refused at authentication (nil: nothing).
	Log *slog.Logger
	// SidecarID is the sidecar whose API the server carries (required):
	// launchers get LauncherPermissions(SidecarID).
	SidecarID string
	// Launchers are the identities launchers connect with (SetLaunchers
	// changes them while the server runs). With none, only in-process
	// connections can authenticate. Nobody connects anonymously.
	Launchers []Launcher
	// MaxLauncherConns bounds each launcher identity's connections at a
	// time (0: DefaultMaxLauncherConns).
	MaxLauncherConns int
	// FrontDoor bounds the connections on Listen, in all and before they
	// authenticate: the listener is a front door that relays to the
	// server on a loopback port (docs/security.md#before-authentication).
	FrontDoor frontdoor.Config
	// TLS, when its Cert is set, makes the listener speak TLS only.
	TLS ServerTLSFiles
	// Leaf, when it names URLs, makes the server a leaf node of a hub
	// cluster, with JetStream domain LeafDomain(SidecarID).
	Leaf LeafOptions
}

// ServerTLSFiles names the PEM files of a TLS listener; it is also the
// nats.server_tls section of colocd's configuration.
type ServerTLSFiles struct {
	// Cert and Key are the server's certificate and key; both or neither.
	Cert string `mapstructure:"cert"`
	Key  string `mapstructure:"key"`
	// ClientCA, when set, makes TLS mutual: a client must present a
	// certificate this CA signed (and still authenticate with its NKey).
	ClientCA string `mapstructure:"client_ca"`
}

// Embedded is a nats-server running inside colocd, with JetStream on and
// authorization required: the sidecar's own identity is an NKey made at
// start, kept in memory and valid for in-process connections only; the
// launchers' NKeys get LauncherPermissions.
type Embedded struct {
	srv     *server.Server
	door    *frontdoor.Door // nil: in-process clients only
	scheme  string
	id      string
	sidecar nkeys.KeyPair
	auth    *authenticator
}

// StartEmbedded starts a nats-server in the process (JetStream on, store in
// StoreDir, no signal handlers) and waits until it accepts connections.
func StartEmbedded(opts EmbeddedOptions) (*Embedded, error) {
	if opts.StoreDir == "" {
		return nil, errors.New("start embedded nats: store dir is empty")
	}
	if err := v1.ValidateSidecarID(opts.SidecarID); err != nil {
		return nil, fmt.Errorf("start embedded nats: %w", err)
	}
	if err := writableDir(opts.StoreDir); err != nil {
		return nil, fmt.Errorf("start embedded nats: store dir: %w", err)
	}
	if err := moveGlobalStore(opts.StoreDir); err != nil {
		return nil, fmt.Errorf("start embedded nats: %w", err)
	}
	sideAcc, launchAcc, err := Accounts(opts.SidecarID)
	if err != nil {
		return nil, fmt.Errorf("start embedded nats: %w", err)
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("start embedded nats: %w", err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("start embedded nats: %w", err)
	}
	auth := &authenticator{sidecarKey: pub, sidecarID: opts.SidecarID,
		maxConns: cmp.Or(opts.MaxLauncherConns, DefaultMaxLauncherConns), log: opts.Log}
	if err := auth.set(opts.Launchers); err != nil {
		return nil, fmt.Errorf("start embedded nats: %w", err)
	}
	sopts := &server.Options{
		ServerName: opts.ServerName,
		JetStream:  true,
		StoreDir:   opts.StoreDir,
		NoSigs:     true,
		NoLog:      opts.Logger == nil,
		Accounts:   []*server.Account{sideAcc, launchAcc},
		// Who connects is the authenticator's to say (launchers.go); the
		// nonce it checks signatures of is sent to every client.
		CustomClientAuthentication: auth,
		AlwaysEnableNonce:          true,
		// The front door bounds outside connections; in-process ones
		// (the sidecar's own) get a little room beside them.
		MaxConn: opts.FrontDoor.WithDefaults().MaxConnections + inProcessConns,
		MaxSubs: MaxSubsPerConn,
	}
	if err := serverTLS(sopts, opts.TLS); err != nil {
		return nil, fmt.Errorf("start embedded nats: %w", err)
	}
	if len(opts.Leaf.URLs) > 0 {
		remote, err := leafRemote(opts.Leaf)
		if err != nil {
			return nil, fmt.Errorf("start embedded nats: %w", err)
		}
		sopts.JetStreamDomain = LeafDomain(opts.SidecarID)
		sopts.LeafNode.Remotes = []*server.RemoteLeafOpts{remote}
	}
	var ln net.Listener
	if opts.Listen == "" {
		sopts.DontListen = true
	} else {
		if err := opts.FrontDoor.Validate("nats.front_door."); err != nil {
			return nil, fmt.Errorf("start embedded nats: %w", err)
		}
		addr, err := listenAddr(opts.Listen)
		if err != nil {
			return nil, fmt.Errorf("start embedded nats: %w", err)
		}
		// A taken port is said at once, by its address, not as a server
		// that is never ready.
		if ln, err = net.Listen("tcp", addr); err != nil {
			return nil, fmt.Errorf("start embedded nats: nats.listen %s: %w (another colocd serve or nats-server there? choose another nats.listen)", opts.Listen, err)
		}
		// The server itself listens on loopback only, behind the door.
		sopts.Host, sopts.Port = "127.0.0.1", -1
	}
	fail := func(err error) (*Embedded, error) {
		if ln != nil {
			ln.Close()
		}
		return nil, fmt.Errorf("start embedded nats: %w", err)
	}
	srv, err := server.NewServer(sopts)
	if err != nil {
		return fail(err)
	}
	// The server registers copies of the accounts in sopts: users join those.
	if err := auth.attach(srv); err != nil {
		return fail(err)
	}
	if opts.Logger != nil {
		srv.SetLogger(slogLogger{opts.Logger}, opts.Logger.Enabled(context.Background(), slog.LevelDebug), false)
	}
	srv.Start()
	if !srv.ReadyForConnections(readyTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return fail(fmt.Errorf("not ready after %s (nats.listen %q)", readyTimeout, opts.Listen))
	}
	if err := enableJetStream(srv); err != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
		return fail(err)
	}
	e := &Embedded{srv: srv, scheme: "nats", id: opts.SidecarID, sidecar: kp, auth: auth}
	if sopts.TLSConfig != nil {
		e.scheme = "tls"
	}
	if ln != nil {
		var log *slog.Logger
		if opts.Log != nil {
			log = opts.Log.With("component", "front door")
		}
		e.door = frontdoor.New(ln, srv.Addr().String(), opts.FrontDoor, log)
		auth.setDoor(e.door)
		e.door.Start()
	}
	return e, nil
}

// listenAddr is nats.listen as net.Listen takes it: "" host means every
// interface, port -1 a free port.
func listenAddr(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("nats.listen %q: %w", listen, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < -1 || p > 65535 {
		return "", fmt.Errorf("nats.listen %q: bad port", listen)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return net.JoinHostPort(host, strconv.Itoa(max(p, 0))), nil
}

// inProcessConns is the room the server keeps beside the front door's
// connections for in-process ones.
const inProcessConns = 64

// Limits of the embedded server's connections.
const (
	// DefaultMaxLauncherConns is how many connections one launcher
	// identity may hold at a time: a launcher needs one per job.
	DefaultMaxLauncherConns = 256
	// MaxSubsPerConn bounds one connection's subscriptions: a launcher
	// needs a few (its inbox, a watch).
	MaxSubsPerConn = 1024
)

// SetLaunchers replaces the identities launchers may connect with; the
// connections of those left out are closed.
func (e *Embedded) SetLaunchers(ls []Launcher) error { return e.auth.set(ls) }

// Shun closes connection cid of the launcher whose key is key (a flood
// from it: WithFloodHandler) and refuses that identity's new connections
// for d; its other connections stay. It returns the launcher's name, or ""
// when key is no launcher's (nothing is done).
func (e *Embedded) Shun(key string, cid uint64, d time.Duration) string {
	return e.auth.shun(key, cid, d)
}

// Launchers returns the identities launchers may connect with, by name.
func (e *Embedded) Launchers() []Launcher { return e.auth.list() }

// enableJetStream turns JetStream on for the sidecars' account, and for it
// alone: the launchers' account must have none of its own.
func enableJetStream(srv *server.Server) error {
	if !srv.JetStreamEnabled() {
		return errors.New("jetstream did not start")
	}
	acc, err := srv.LookupAccount(v1.SidecarAccount)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	if err := acc.EnableJetStream(nil, nil); err != nil {
		return fmt.Errorf("jetstream for account %s: %w", v1.SidecarAccount, err)
	}
	return nil
}

// Accounts makes the sidecars' and the launchers' accounts of a server that
// carries sidecar sidecarID's API: the sidecars' account exports
// LauncherServices to the launchers' account alone, which imports them
// under the same subjects, sharing the requester's identity (Tenant).
func Accounts(sidecarID string) (sidecars, launchers *server.Account, err error) {
	sidecars, launchers = server.NewAccount(v1.SidecarAccount), server.NewAccount(v1.LauncherAccount)
	for _, s := range v1.LauncherServices(sidecarID) {
		resp := server.Singleton
		if s.Streamed {
			resp = server.Streamed
		}
		if err := sidecars.AddServiceExportWithResponse(s.Subject, resp, []*server.Account{launchers}); err != nil {
			return nil, nil, fmt.Errorf("export %s: %w", s.Subject, err)
		}
		if s.Threshold > 0 {
			if err := sidecars.SetServiceExportResponseThreshold(s.Subject, s.Threshold); err != nil {
				return nil, nil, fmt.Errorf("export %s: response threshold: %w", s.Subject, err)
			}
		}
		if err := launchers.AddServiceImport(sidecars, s.Subject, s.Subject); err != nil {
			return nil, nil, fmt.Errorf("import %s: %w", s.Subject, err)
		}
		// The server then tells the sidecar who asked (Tenant).
		if err := launchers.SetServiceImportSharing(sidecars, s.Subject, true); err != nil {
			return nil, nil, fmt.Errorf("import %s: share: %w", s.Subject, err)
		}
	}
	return sidecars, launchers, nil
}

// moveGlobalStore moves the JetStream store of a server that kept
// everything in the global account (colocd before the account split) to the
// sidecars' account, so that a restarted sidecar finds its leases. A rename
// is atomic: the store is in one place or the other, never in both.
func moveGlobalStore(storeDir string) error {
	old := filepath.Join(storeDir, "jetstream", server.DEFAULT_GLOBAL_ACCOUNT)
	next := filepath.Join(storeDir, "jetstream", v1.SidecarAccount)
	if _, err := os.Stat(old); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("store dir: %w", err)
	}
	if _, err := os.Stat(next); err == nil {
		return fmt.Errorf("store dir: both %s and %s exist: keep the one that holds the leases", old, next)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("store dir: %w", err)
	}
	if err := os.Rename(old, next); err != nil {
		return fmt.Errorf("store dir: move the global account's store: %w", err)
	}
	return nil
}

// Conn returns a connection with the sidecar's own identity, which may do
// everything. It connects in-process (nats.InProcessServer), also when the
// server listens, so the sidecar's traffic never goes through TCP, and its
// replies come on SidecarInboxPrefix, where no launcher may subscribe.
func (e *Embedded) Conn(opts ...nats.Option) (*nats.Conn, error) {
	pub, err := e.sidecar.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("connect embedded nats: %w", err)
	}
	return e.ConnAs(append([]nats.Option{nats.Nkey(pub, e.sidecar.Sign), nats.CustomInboxPrefix(v1.SidecarInboxPrefix(e.id))}, opts...)...)
}

// ConnAs returns an in-process connection that authenticates with what opts
// give (e.g. nats.NkeyOptionFromSeed of a launcher's seed).
func (e *Embedded) ConnAs(opts ...nats.Option) (*nats.Conn, error) {
	nc, err := nats.Connect("", append([]nats.Option{nats.InProcessServer(e.srv)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("connect embedded nats: %w", err)
	}
	return nc, nil
}

// ClientURL returns the URL outside clients use (the front door's), or ""
// when the server only serves in-process connections.
func (e *Embedded) ClientURL() string {
	if e.door == nil {
		return ""
	}
	return e.scheme + "://" + e.door.Addr().String()
}

// FrontDoor is the listener's front door, for its counts and saturation;
// nil when the server serves in-process connections only.
func (e *Embedded) FrontDoor() *frontdoor.Door { return e.door }

// Shutdown stops the server and waits until it is down.
func (e *Embedded) Shutdown() {
	if e.door != nil {
		e.door.Close()
	}
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

// slogLogger is nats-server's Logger on top of slog.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Noticef(format string, v ...any) { s.l.Info(fmt.Sprintf(format, v...)) }
func (s slogLogger) Warnf(format string, v ...any)   { s.l.Warn(fmt.Sprintf(format, v...)) }
func (s slogLogger) Fatalf(format string, v ...any)  { s.l.Error(fmt.Sprintf(format, v...)) }
func (s slogLogger) Errorf(format string, v ...any)  { s.l.Error(fmt.Sprintf(format, v...)) }
func (s slogLogger) Debugf(format string, v ...any)  { s.l.Debug(fmt.Sprintf(format, v...)) }
func (s slogLogger) Tracef(format string, v ...any)  { s.l.Debug(fmt.Sprintf(format, v...)) }

// writableDir makes dir if need be and checks that files can be written in
// it: JetStream cannot start on a read-only store, and nats-server only says
// so by never becoming ready.
func writableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := credfiles.Private(dir); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".colocd-write-check-*")
	if err != nil {
		return fmt.Errorf("%s is not writable: %w", dir, err)
	}
	name := f.Name()
	return errors.Join(f.Close(), os.Remove(name))
}

// serverTLS turns on TLS for the listener (mutual with a client CA).
func serverTLS(sopts *server.Options, f ServerTLSFiles) error {
	if f.Cert == "" && f.Key == "" && f.ClientCA == "" {
		return nil
	}
	if f.Cert == "" || f.Key == "" {
		return errors.New("tls: the server's certificate and key go together")
	}
	cfg, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: f.Cert, KeyFile: f.Key, CaFile: f.ClientCA, Verify: f.ClientCA != ""})
	if err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	sopts.TLS, sopts.TLSConfig, sopts.TLSVerify, sopts.TLSTimeout = true, cfg, f.ClientCA != "", 2
	return nil
}
