package bus

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// Who may do what on NATS (docs/security.md). The sidecar's own identity
// may do everything; a launcher may only send requests to the API, discover
// services, read its events through a JetStream consumer on the events
// stream, and receive replies on its inbox. A launcher can therefore not
// read another connection's traffic to the sidecar, answer in the sidecar's
// name, or touch the lease bucket, the events stream or any other stream.

// LauncherInboxPrefix is the reply-subject prefix launchers use (nats.go's
// and the nats CLI's default). Launchers may subscribe below it only.
const LauncherInboxPrefix = "_INBOX"

// SidecarInboxPrefix returns the reply-subject prefix of the sidecar's own
// connection, _COLOCD_INBOX.<id>. It is outside LauncherInboxPrefix, so no
// launcher can subscribe to the answers the sidecar gets from JetStream.
func SidecarInboxPrefix(sidecarID string) string {
	return sidecarInboxRoot + "." + sidecarID
}

// sidecarInboxRoot starts every sidecar's inbox.
const sidecarInboxRoot = "_COLOCD_INBOX"

// The two NATS accounts colocd uses (docs/security.md). The sidecars'
// account holds JetStream (the lease buckets, the events streams, the
// profiles and the fleet's summaries) and serves the API; the launchers'
// account has no JetStream and reaches the sidecars' account only through
// the services it exports. Every answer to a launcher, JetStream's too,
// crosses back on a reply the server made, so no launcher can aim an answer
// at the JetStream API.
const (
	SidecarAccount  = "COLOCD"
	LauncherAccount = "COLOCD_LAUNCHERS"
)

// LauncherService is one subject the sidecars' account exports to the
// launchers' account, and the launchers may publish to.
type LauncherService struct {
	// Subject is the subject, the same in both accounts.
	Subject string
	// Streamed is true where more than one answer comes back to one
	// request: a scatter-gather (every sidecar answers) or a pull of
	// several events.
	Streamed bool
	// Threshold, when set, is how long the server keeps a request's way
	// back open for its answer (nats-server's default: 2 minutes). Lease
	// calls are answered in milliseconds or dropped (a launcher past its
	// rate): ResponseThreshold keeps a flood of them from holding the
	// server's memory for minutes.
	Threshold time.Duration
}

// ResponseThreshold is the Threshold of every endpoint but the decisions'.
const ResponseThreshold = 15 * time.Second

// LauncherServices returns what launchers may ask on the NATS system of
// sidecar sidecarID: the endpoints of any sidecar, and pulls from the
// consumers it makes on sidecarID's events stream. With sidecarID "*" it is
// the set for a server that many sidecars share (an external server or
// cluster), deploy/nats/colocd-auth.conf: consumers of any stream, in this
// server's JetStream or a leaf host's domain.
func LauncherServices(sidecarID string) []LauncherService {
	stream := EventStreamName(sidecarID)
	if sidecarID == "*" {
		stream = "*" // a stream name is one token
	}
	// The endpoints of every sidecar, so that asking one that is not there
	// is a quick "no responders", not a permission error and a timeout.
	out := make([]LauncherService, 0, 17)
	for _, ep := range []string{EndpointAdmit, EndpointRenew, EndpointRelease, EndpointRegister, EndpointStatus, EndpointProfile, quoteOneToken, EndpointWatch} {
		var threshold time.Duration
		if ep != EndpointAdmit && ep != quoteOneToken {
			threshold = ResponseThreshold
		}
		out = append(out, LauncherService{Subject: EndpointSubject("*", ep), Threshold: threshold})
	}
	out = append(out,
		LauncherService{Subject: QuoteSubject, Streamed: true},
		// micro discovery, which every sidecar answers: PING and INFO.
		// Not STATS: its per-endpoint counts and timings tell one
		// launcher how busy the others keep a sidecar; operators read
		// them as the sidecar's user (docs/security.md#tenant-privacy).
		LauncherService{Subject: "$SRV.PING", Streamed: true},
		LauncherService{Subject: "$SRV.PING.>", Streamed: true},
		LauncherService{Subject: "$SRV.INFO", Streamed: true},
		LauncherService{Subject: "$SRV.INFO.>", Streamed: true},
		// Reading its events: pulls from a consumer on the events stream
		// that the sidecar made (the watch endpoint), with a filter inside
		// the events subjects. A launcher never creates a consumer: the
		// config in the create request, which no permission sees, could
		// name a deliver subject inside the sidecars' account.
		LauncherService{Subject: "$JS.API.CONSUMER.MSG.NEXT." + stream + ".*", Streamed: true},
		LauncherService{Subject: "$JS.API.CONSUMER.INFO." + stream + ".*"},
		LauncherService{Subject: "$JS.API.CONSUMER.DELETE." + stream + ".*"},
		// The sidecars' account's JetStream usage (sizes and counts, no
		// names). An account without JetStream of its own that does not
		// import this subject gets the whole JetStream API of the server
		// instead, answering every request above with an error of its own.
		LauncherService{Subject: "$JS.API.INFO"},
		// The fleet's capacity summaries, through any sidecar.
		LauncherService{Subject: FleetSubject, Threshold: ResponseThreshold},
	)
	if sidecarID == "*" {
		// A hub's launchers read a leaf host's events in the host's own
		// JetStream domain (LeafDomain), across the leaf connection.
		out = append(out,
			LauncherService{Subject: "$JS.*.API.CONSUMER.MSG.NEXT.*.*", Streamed: true},
			LauncherService{Subject: "$JS.*.API.CONSUMER.INFO.*.*"},
			LauncherService{Subject: "$JS.*.API.CONSUMER.DELETE.*.*"},
		)
	}
	return out
}

// LauncherPermissions returns what launcher key may publish and subscribe
// to in the launchers' account: the subjects of LauncherServices, and its
// own inbox (LauncherInbox(key); every launcher's, _INBOX.>, when key is
// "", as on a shared server whose users share one permission set). The
// account boundary is what keeps a launcher away from JetStream; these
// permissions keep it from answering other launchers' requests in its own
// account, and from reading their replies.
func LauncherPermissions(sidecarID, key string) *server.Permissions {
	var pub []string
	for _, s := range LauncherServices(sidecarID) {
		pub = append(pub, s.Subject)
	}
	inbox := LauncherInboxPrefix
	if key != "" {
		inbox = LauncherInbox(key)
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub},
		Subscribe: &server.SubjectPermission{Allow: []string{inbox + ".>"}},
	}
}

// NKeySeedFile returns the public key of the user NKey whose seed is in
// path, creating the file with a new seed (mode 0600, in a directory it
// creates with mode 0700) when it does not exist. An existing file that
// others than its owner can read or write is refused: the seed is the
// launchers' credential.
func NKeySeedFile(path string) (string, error) {
	seed, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return createSeedFile(path)
	}
	if err != nil {
		return "", fmt.Errorf("nkey seed file: %w", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("nkey seed file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("nkey seed file %s: mode %04o lets others read it: want 0600 (chmod 600 %s)", path, fi.Mode().Perm(), path)
	}
	if err := privatePath(path); err != nil {
		return "", fmt.Errorf("nkey seed file: %w", err)
	}
	if err := privatePath(filepath.Dir(path)); err != nil {
		return "", fmt.Errorf("nkey seed file's directory: %w", err)
	}
	kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(seed))))
	if err != nil {
		return "", fmt.Errorf("nkey seed file %s: want a user seed (SU…): %w", path, err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return "", fmt.Errorf("nkey seed file %s: %w", path, err)
	}
	if !nkeys.IsValidPublicUserKey(pub) {
		return "", fmt.Errorf("nkey seed file %s: want a user seed (SU…), got another kind of key", path)
	}
	return pub, nil
}

// createSeedFile writes a new user seed to path, which must not exist.
func createSeedFile(path string) (string, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return "", fmt.Errorf("nkey seed file: %w", err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return "", fmt.Errorf("nkey seed file: %w", err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return "", fmt.Errorf("nkey seed file: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("nkey seed file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("nkey seed file: %w", err)
	}
	_, werr := f.Write(append(seed, '\n'))
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		_ = os.Remove(path)
		return "", fmt.Errorf("nkey seed file %s: %w", path, err)
	}
	return pub, nil
}

// privatePath refuses a file or directory that someone else could replace
// or change: owned by another user than this process's (root may own it:
// a mounted Secret), or writable by everyone (a directory with the sticky
// bit, like /tmp, lets others add files but not replace ours).
func privatePath(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if uid := int(st.Uid); uid != os.Geteuid() && uid != 0 {
			return fmt.Errorf("%s is owned by uid %d, not by this process's %d or root: another user could replace it", path, uid, os.Geteuid())
		}
	}
	if fi.Mode().Perm()&0o002 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return fmt.Errorf("%s: mode %04o lets anyone write it: want no write for others (chmod o-w %s)", path, fi.Mode().Perm(), path)
	}
	return nil
}
