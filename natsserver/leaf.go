package natsserver

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/internal/credfiles"
	"github.com/colocd/colocd/internal/termtext"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// DefaultHubDomain is the JetStream domain of the hub cluster that
// embedded servers join as leaf nodes, where the fleet's capacity summaries
// live (docs/fleet.md#leaf-nodes).
const DefaultHubDomain = "hub"

// LeafOptions makes the embedded server a leaf node of a hub cluster: the
// sidecars' account on this server joins the sidecars' account on the hub,
// so that the hub's launchers reach this sidecar, while the server keeps
// JetStream of its own in the domain named by the sidecar's id, so that the
// host admits on its own while the link is down.
type LeafOptions struct {
	// URLs are the hub's leafnode listeners (nats-leaf://host:7422, or
	// tls:// for TLS); none: no leaf connection.
	URLs []string
	// NKeySeedFile holds the seed of the hub's sidecar user; Credentials
	// is a .creds file instead. One of them.
	NKeySeedFile, Credentials string
	// TLS names the CA that signs the hub's certificate and, for mutual
	// TLS, this host's certificate and key.
	TLS credfiles.TLSFiles
}

// LeafDomain is the JetStream domain of the embedded server of sidecar id
// when it is a leaf node: the id itself, so that a launcher on the hub finds
// a leaf host's event stream from the sidecar id alone.
func LeafDomain(id string) string { return id }

// ValidateHubDomain checks a hub's JetStream domain: a subject token, and
// not the sidecar's own domain.
func ValidateHubDomain(domain, sidecarID string) error {
	if domain == "" {
		return errors.New("hub domain is empty")
	}
	if err := v1.ValidateSidecarID(domain); err != nil { // the same rules: one subject token
		return fmt.Errorf("hub domain %q: want one NATS subject token", domain)
	}
	if domain == LeafDomain(sidecarID) {
		return fmt.Errorf("hub domain %q is the leaf's own domain (the sidecar id): rename one", domain)
	}
	return nil
}

// leafRemote turns LeafOptions into the server's remote: bound to the
// sidecars' account, authenticated as the hub's sidecar user.
func leafRemote(o LeafOptions) (*server.RemoteLeafOpts, error) {
	r := &server.RemoteLeafOpts{LocalAccount: v1.SidecarAccount}
	for i, raw := range o.URLs {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("leaf url %d: want nats-leaf://host:port, got %q", i, termtext.Clip(raw))
		}
		switch u.Scheme {
		case "nats-leaf", "nats", "tls":
		default:
			return nil, fmt.Errorf("leaf url %d: scheme %q: want nats-leaf, nats or tls", i, u.Scheme)
		}
		if u.User != nil {
			return nil, fmt.Errorf("leaf url %d: no user or password in the url: use the nkey or credentials file", i)
		}
		r.URLs = append(r.URLs, u)
		r.TLS = r.TLS || u.Scheme == "tls" // TLS whatever the hub's INFO says: no downgrade
	}
	switch {
	case o.NKeySeedFile != "" && o.Credentials != "":
		return nil, errors.New("leaf: nkey and credentials are exclusive")
	case o.NKeySeedFile != "":
		seed, err := os.ReadFile(o.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("leaf nkey: %w", err)
		}
		seed = []byte(strings.TrimSpace(string(seed)))
		kp, err := nkeys.FromSeed(seed)
		if err != nil {
			return nil, fmt.Errorf("leaf nkey %s: want a user NKey seed (SU…): %w", o.NKeySeedFile, err)
		}
		if pub, err := kp.PublicKey(); err != nil || !nkeys.IsValidPublicUserKey(pub) {
			return nil, fmt.Errorf("leaf nkey %s: want a user NKey seed (SU…)", o.NKeySeedFile)
		}
		r.Nkey = string(seed)
	case o.Credentials != "":
		if _, err := os.Stat(o.Credentials); err != nil {
			return nil, fmt.Errorf("leaf credentials: %w", err)
		}
		r.Credentials = o.Credentials
	default:
		return nil, errors.New("leaf: the hub's sidecar user is needed: an nkey or a credentials file")
	}
	if (o.TLS.Cert == "") != (o.TLS.Key == "") {
		return nil, errors.New("leaf tls: cert and key go together")
	}
	if o.TLS.CA != "" || o.TLS.Cert != "" {
		cfg, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: o.TLS.Cert, KeyFile: o.TLS.Key, CaFile: o.TLS.CA})
		if err != nil {
			return nil, fmt.Errorf("leaf tls: %w", err)
		}
		cfg.RootCAs = cfg.ClientCAs // ca_file verifies the hub: a client's roots
		r.TLS, r.TLSConfig, r.TLSTimeout = true, cfg, 2
	}
	return r, nil
}
