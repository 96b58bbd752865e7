package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
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
}

// Embedded is a nats-server running inside colocd, with JetStream on.
type Embedded struct {
	srv    *server.Server
	listen bool
}

// StartEmbedded starts a nats-server in the process (JetStream on, store in
// StoreDir, no signal handlers) and waits until it accepts connections.
func StartEmbedded(opts EmbeddedOptions) (*Embedded, error) {
	if opts.StoreDir == "" {
		return nil, errors.New("start embedded nats: store dir is empty")
	}
	sopts := &server.Options{
		ServerName: opts.ServerName,
		JetStream:  true,
		StoreDir:   opts.StoreDir,
		NoSigs:     true,
		NoLog:      opts.Logger == nil,
	}
	if opts.Listen == "" {
		sopts.DontListen = true
	} else {
		host, port, err := net.SplitHostPort(opts.Listen)
		if err != nil {
			return nil, fmt.Errorf("start embedded nats: listen %q: %w", opts.Listen, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < -1 || p > 65535 {
			return nil, fmt.Errorf("start embedded nats: listen %q: bad port", opts.Listen)
		}
		if host == "" {
			host = "0.0.0.0"
		}
		sopts.Host, sopts.Port = host, p
	}
	srv, err := server.NewServer(sopts)
	if err != nil {
		return nil, fmt.Errorf("start embedded nats: %w", err)
	}
	if opts.Logger != nil {
		srv.SetLogger(slogLogger{opts.Logger}, opts.Logger.Enabled(context.Background(), slog.LevelDebug), false)
	}
	srv.Start()
	if !srv.ReadyForConnections(readyTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("start embedded nats: not ready after %s", readyTimeout)
	}
	if !srv.JetStreamEnabled() {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, errors.New("start embedded nats: jetstream did not start")
	}
	return &Embedded{srv: srv, listen: !sopts.DontListen}, nil
}

// Conn returns a connection to the server. It always connects in-process
// (nats.InProcessServer), also when the server listens, so the sidecar's own
// traffic does not go through TCP.
func (e *Embedded) Conn(opts ...nats.Option) (*nats.Conn, error) {
	opts = append([]nats.Option{nats.InProcessServer(e.srv)}, opts...)
	nc, err := nats.Connect("", opts...)
	if err != nil {
		return nil, fmt.Errorf("connect embedded nats: %w", err)
	}
	return nc, nil
}

// ClientURL returns the URL outside clients use, or "" when the server only
// serves in-process connections.
func (e *Embedded) ClientURL() string {
	if !e.listen {
		return ""
	}
	return e.srv.ClientURL()
}

// Shutdown stops the server and waits until it is down.
func (e *Embedded) Shutdown() {
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

// TLSFiles names PEM files for a TLS connection.
type TLSFiles struct {
	// CA verifies the server's certificate (default: system roots).
	CA string
	// Cert and Key are the client's certificate and key, for mutual TLS;
	// both or neither.
	Cert, Key string
}

// ConnectOptions configures Connect.
type ConnectOptions struct {
	// Credentials is a NATS .creds file (JWT and NKey seed).
	Credentials string
	// NKeySeedFile is a file holding an NKey seed; exclusive with
	// Credentials.
	NKeySeedFile string
	// TLS names the TLS files; zero means whatever the URL says.
	TLS TLSFiles
	// Name is the connection name servers show.
	Name string
	// Logger receives connection events (disconnect, reconnect, async
	// errors); nil logs nothing.
	Logger *slog.Logger
	// Options are applied after Connect's own.
	Options []nats.Option
}

// Connect connects to a remote server or cluster at url (comma-separated
// URLs allowed). The connection retries the first connect and reconnects
// forever, so a sidecar started before its NATS server waits for it; check
// nc.IsConnected for readiness. Its handlers are set before it is returned,
// so a micro service added afterwards chains them.
func Connect(url string, opts ConnectOptions) (*nats.Conn, error) {
	if url == "" {
		return nil, errors.New("connect nats: url is empty (use the embedded server)")
	}
	nopts, err := natsOptions(opts)
	if err != nil {
		return nil, fmt.Errorf("connect nats: %w", err)
	}
	nc, err := nats.Connect(url, nopts...)
	if err != nil {
		return nil, fmt.Errorf("connect nats: %w", err)
	}
	return nc, nil
}

// natsOptions turns ConnectOptions into nats.go options: reconnect forever,
// logging handlers, credentials and TLS, then the caller's extras.
func natsOptions(opts ConnectOptions) ([]nats.Option, error) {
	if opts.Credentials != "" && opts.NKeySeedFile != "" {
		return nil, errors.New("credentials and nkey are exclusive")
	}
	if (opts.TLS.Cert == "") != (opts.TLS.Key == "") {
		return nil, errors.New("tls cert and key go together")
	}
	nopts := []nats.Option{
		nats.Name(opts.Name),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		nats.ReconnectWait(time.Second),
	}
	nopts = append(nopts, logHandlers(opts.Logger)...)
	if opts.Credentials != "" {
		nopts = append(nopts, nats.UserCredentials(opts.Credentials))
	}
	if opts.NKeySeedFile != "" {
		o, err := nats.NkeyOptionFromSeed(opts.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("nkey: %w", err)
		}
		nopts = append(nopts, o)
	}
	if opts.TLS.CA != "" {
		nopts = append(nopts, nats.RootCAs(opts.TLS.CA))
	}
	if opts.TLS.Cert != "" {
		nopts = append(nopts, nats.ClientCert(opts.TLS.Cert, opts.TLS.Key))
	}
	return append(nopts, opts.Options...), nil
}

// logHandlers reports the connection's state changes and async errors to
// log (nil: nowhere).
func logHandlers(log *slog.Logger) []nats.Option {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return []nats.Option{
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("nats disconnected", "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted())
		}),
		nats.ClosedHandler(func(*nats.Conn) {
			log.Info("nats connection closed")
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			log.Warn("nats async error", "subject", subject, "err", err)
		}),
	}
}
