package natsserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/colocd/colocd/api/v1"
	"github.com/colocd/colocd/internal/credfiles"

	"github.com/nats-io/nkeys"
)

// leafRemote names what is wrong with a leaf's options, and binds a good
// one to the sidecars' account with the seed it read.
func TestLeafRemote(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	seedFile := filepath.Join(dir, "sidecar.nk")
	if err := os.WriteFile(seedFile, append(seed, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	acct, _ := nkeys.CreateAccount()
	acctSeed, _ := acct.Seed()
	acctFile := filepath.Join(dir, "account.nk")
	if err := os.WriteFile(acctFile, acctSeed, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := leafRemote(LeafOptions{URLs: []string{"nats-leaf://hub-1:7422", " tls://hub-2:7422"}, NKeySeedFile: seedFile})
	if err != nil {
		t.Fatal(err)
	}
	if r.LocalAccount != v1.SidecarAccount || len(r.URLs) != 2 || r.URLs[1].Host != "hub-2:7422" || r.Nkey != string(seed) {
		t.Errorf("remote %+v", r)
	}
	for _, tc := range []struct {
		name string
		o    LeafOptions
		want string
	}{
		{"scheme", LeafOptions{URLs: []string{"http://hub:7422"}, NKeySeedFile: seedFile}, "scheme"},
		{"no host", LeafOptions{URLs: []string{"nats-leaf://"}, NKeySeedFile: seedFile}, "nats-leaf://host:port"},
		{"password in the url", LeafOptions{URLs: []string{"nats-leaf://u:p@hub:7422"}, NKeySeedFile: seedFile}, "no user or password"},
		{"no login", LeafOptions{URLs: []string{"nats-leaf://hub:7422"}}, "nkey or a credentials file"},
		{"both logins", LeafOptions{URLs: []string{"nats-leaf://hub:7422"}, NKeySeedFile: seedFile, Credentials: seedFile}, "exclusive"},
		{"missing seed", LeafOptions{URLs: []string{"nats-leaf://hub:7422"}, NKeySeedFile: filepath.Join(dir, "none")}, "leaf nkey"},
		{"an account seed", LeafOptions{URLs: []string{"nats-leaf://hub:7422"}, NKeySeedFile: acctFile}, "user NKey seed"},
		{"cert without key", LeafOptions{URLs: []string{"tls://hub:7422"}, NKeySeedFile: seedFile, TLS: credfiles.TLSFiles{Cert: seedFile}}, "go together"},
	} {
		if _, err := leafRemote(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	if err := ValidateHubDomain("gpu-a", "gpu-a"); err == nil {
		t.Error("a hub domain that is the leaf's own was accepted")
	}
	if err := ValidateHubDomain("hub.x", "gpu-a"); err == nil {
		t.Error("a hub domain of two tokens was accepted")
	}
}
