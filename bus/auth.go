package bus

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

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

// LauncherPermissions returns what a launcher may publish and subscribe to
// on the NATS system of sidecar sidecarID: the endpoints of any sidecar, and
// consumers on sidecarID's events stream. With sidecarID "*" it is the set
// for a server that many sidecars share (an external server or cluster),
// deploy/nats/colocd-auth.conf: consumers on any stream, bound by a filter
// inside the events subjects.
func LauncherPermissions(sidecarID string) *server.Permissions {
	stream := EventStreamName(sidecarID)
	if sidecarID == "*" {
		stream = "*" // a stream name is one token; the filter below still binds
	}
	// The endpoints of every sidecar, so that asking one that is not there
	// is a quick "no responders", not a permission error and a timeout.
	pub := make([]string, 0, 12)
	for _, ep := range []string{EndpointAdmit, EndpointRenew, EndpointRelease, EndpointRegister, EndpointStatus, EndpointProfile, quoteOneToken} {
		pub = append(pub, EndpointSubject("*", ep))
	}
	events := EndpointSubject("*", "events") + ".>"
	pub = append(pub,
		QuoteSubject,
		"$SRV.>", // micro discovery: PING, INFO, STATS
		// Reading its events: an ordered consumer on the events stream,
		// created with a filter inside the events subjects, so that it can
		// read nothing else even where the stream token is a wildcard.
		"$JS.API.CONSUMER.CREATE."+stream+".*."+events,
		"$JS.API.CONSUMER.MSG.NEXT."+stream+".*",
		"$JS.API.CONSUMER.INFO."+stream+".*",
		"$JS.API.CONSUMER.DELETE."+stream+".*",
		// The fleet's capacity summaries, through any sidecar: a direct
		// get of its own would let a launcher aim JetStream's answer at
		// the JetStream API (docs/security.md).
		FleetSubject,
	)
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub},
		Subscribe: &server.SubjectPermission{Allow: []string{LauncherInboxPrefix + ".>"}},
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
