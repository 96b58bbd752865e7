package bus

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	v1 "github.com/colocd/colocd/api/v1"
	"github.com/colocd/colocd/internal/credfiles"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// TLSFiles names PEM files for a TLS connection; it is also the tls
// section of colocd's configuration (nats.tls, nats.leaf.tls).
type TLSFiles = credfiles.TLSFiles

// ConnectOptions configures Connect: every colocd connection to a NATS
// server that is not the embedded one in the same process (the sidecar's,
// the launcher commands', the fleet's, the load test's) is made by Connect.
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
	// Timeout bounds each attempt to reach a server (0: 2 s).
	Timeout time.Duration
	// Policy says what the connection does when no server answers.
	Policy ConnectPolicy
	// Logger receives connection events (disconnect, reconnect, async
	// errors); nil logs nothing.
	Logger *slog.Logger
	// Options are applied after Connect's own.
	Options []nats.Option
}

// ConnectPolicy says what a connection does when no server answers.
type ConnectPolicy int

const (
	// WaitForServer retries the first connect and reconnects forever: a
	// sidecar started before its NATS server waits for it.
	WaitForServer ConnectPolicy = iota
	// StayConnected fails at once when no server answers the first
	// connect, then reconnects forever: a launcher that holds a lease
	// (colocd run) must not lose it to a server's restart.
	StayConnected
	// OneShot fails at once, and retries a lost connection a bounded
	// number of times (nats.go's default): a command that asks once.
	OneShot
)

// OptionsError is Connect's error about its options (as opposed to the
// server): Field names the option ("nkey", "credentials", "tls"), Err says
// what is wrong with it.
type OptionsError struct {
	Field string
	Err   error
}

func (e *OptionsError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns the problem with the options.
func (e *OptionsError) Unwrap() error { return e.Err }

// Connect connects to a server or cluster at url (comma-separated URLs
// allowed), as the identity in opts: a launcher's NKey seed or .creds file
// also sets the inbox prefix its permissions allow (LauncherAuth).
// Reconnects wait a second with jitter, so that a fleet's clients do not
// all come back at once; opts.Policy says how long they go on (with
// WaitForServer, check nc.IsConnected for readiness). Its handlers are set
// before it is returned, so a micro service added afterwards chains them.
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
		return nil, fmt.Errorf("connect nats %s: %w", url, err)
	}
	return nc, nil
}

// natsOptions turns ConnectOptions into nats.go options: the reconnect
// policy, logging handlers, credentials and TLS, then the caller's extras.
func natsOptions(opts ConnectOptions) ([]nats.Option, error) {
	if opts.Credentials != "" && opts.NKeySeedFile != "" {
		return nil, &OptionsError{"nkey", errors.New("credentials and nkey are exclusive")}
	}
	if (opts.TLS.Cert == "") != (opts.TLS.Key == "") {
		return nil, &OptionsError{"tls", errors.New("tls cert and key go together")}
	}
	nopts := []nats.Option{nats.Name(opts.Name)}
	if opts.Timeout > 0 {
		nopts = append(nopts, nats.Timeout(opts.Timeout))
	}
	nopts = append(nopts, nats.ReconnectWait(time.Second), nats.ReconnectJitter(500*time.Millisecond, time.Second))
	// Forever means through refusals too: nats.go alone closes a
	// connection for good at the second refusal in a row, and a refusal
	// can pass (an identity over its cap while a fleet reconnects, one
	// shunned for a while, a .creds file rotated after its server).
	switch opts.Policy {
	case WaitForServer:
		nopts = append(nopts, nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true), nats.IgnoreAuthErrorAbort())
	case StayConnected:
		nopts = append(nopts, nats.MaxReconnects(-1), nats.IgnoreAuthErrorAbort())
	}
	nopts = append(nopts, LogHandlers(opts.Logger)...)
	// The key, and the inbox below it that a launcher's permissions allow
	// (a sidecar's Options set its own).
	auth, err := LauncherAuth(opts.NKeySeedFile, opts.Credentials)
	if err != nil {
		which := "nkey"
		if opts.Credentials != "" {
			which = "credentials"
		}
		return nil, &OptionsError{which, err}
	}
	nopts = append(nopts, auth...)
	if opts.TLS.CA != "" {
		nopts = append(nopts, nats.RootCAs(opts.TLS.CA))
	}
	if opts.TLS.Cert != "" {
		nopts = append(nopts, nats.ClientCert(opts.TLS.Cert, opts.TLS.Key))
	}
	return append(nopts, opts.Options...), nil
}

// LogHandlers reports the connection's state changes and async errors to
// log (nil: nowhere).
func LogHandlers(log *slog.Logger) []nats.Option {
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
		ErrorLogHandler(log),
	}
}

// ErrorLogHandler reports a connection's async errors (a slow consumer's
// dropped messages) to log, instead of nats.go's default line on stderr.
// Unlike LogHandlers it reports nothing of the connection's closing, which
// comes after the owner has returned (an in-process connection's).
func ErrorLogHandler(log *slog.Logger) nats.Option {
	return nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
		subject := ""
		if sub != nil {
			subject = sub.Subject
		}
		log.Warn("nats async error", "subject", subject, "err", err)
	})
}

// LauncherAuth returns the nats.go options a launcher connects with from
// an NKey seed file or a .creds file: its key, and the inbox prefix its
// permissions allow (LauncherInbox of its public key; on a server whose
// launchers may use all of _INBOX.> it is as good).
func LauncherAuth(nkeyFile, credsFile string) ([]nats.Option, error) {
	switch {
	case nkeyFile != "" && credsFile != "":
		return nil, errors.New("an NKey seed file and a credentials file: want one of the two")
	case nkeyFile == "" && credsFile == "":
		return nil, nil
	}
	path := nkeyFile
	if path == "" {
		path = credsFile
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	kp, err := nkeys.ParseDecoratedNKey(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: want a user NKey seed (SU…) or a .creds file: %w", path, err)
	}
	pub, err := kp.PublicKey()
	if err != nil || !nkeys.IsValidPublicUserKey(pub) {
		return nil, fmt.Errorf("%s: want a user NKey seed (SU…), got another kind of key", path)
	}
	kp.Wipe()
	opts := []nats.Option{nats.CustomInboxPrefix(v1.LauncherInbox(pub))}
	if credsFile != "" {
		return append(opts, nats.UserCredentials(credsFile)), nil
	}
	o, err := nats.NkeyOptionFromSeed(nkeyFile)
	if err != nil {
		return nil, err
	}
	return append(opts, o), nil
}
