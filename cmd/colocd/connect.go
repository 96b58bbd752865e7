package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/internal/termtext"
	"github.com/colocd/colocd/launch"
)

// Dial is launch.Endpoint.Dial for every launcher command: when the server
// refuses the credentials it names those the command used, where they came
// from, and what to do (authError).
func (f *launcherFlags) Dial(needSidecar bool) (*bus.Client, *nats.Conn, error) {
	c, nc, err := f.Endpoint.Dial(needSidecar)
	if refusedCredentials(err) {
		return nil, nil, &authError{server: f.Server, used: f.credentials(), err: err}
	}
	return c, nc, err
}

// refusedCredentials reports whether err is a server's refusal of the
// credentials a connection presented (or of none).
func refusedCredentials(err error) bool {
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked)
}

// authError is a connection the server refused for its credentials.
type authError struct {
	server string
	used   string // the credentials, as credentials says
	err    error
}

func (e *authError) Error() string {
	return fmt.Sprintf("--server %s refused the connection (%s); it was given %s. "+
		"To get a launcher identity, on the sidecar's host run `colocd launcher add NAME --out NAME.nk` (`colocd launcher list` shows those it lets in, with their keys) "+
		"and export %s=/path/to/NAME.nk (or pass --nkey FILE); the sidecar's own launcher.nk in its data dir, named by colocd serve at start, works too. "+
		"On a NATS server of your own, use --creds FILE (env %s) of a user its config lets in",
		e.server, nats.ErrAuthorization.Error(), e.used, launch.EnvNKey, launch.EnvCreds)
}

func (e *authError) Unwrap() error { return e.err }

// credentials says which identity the command connects with and where
// that came from: a flag or its environment variable, or none. It names a
// seed's public key (never the seed), which `colocd launcher list` shows.
func (f *launcherFlags) credentials() string {
	from := func(flag, env string) string {
		if f.flags != nil && f.flags.Changed(flag) {
			return "--" + flag
		}
		return "env " + env
	}
	describe := func(kind, path, source string) string {
		s := fmt.Sprintf("%s %s (from %s", kind, termtext.ShellQuote(path), source)
		if pub := publicKeyOf(path); pub != "" {
			s += ", public key " + pub
		}
		if filepath.Base(path) == "launcher.nk" {
			s += ", a sidecar's default launcher seed"
		}
		return s + ")"
	}
	switch {
	case f.Creds != "":
		return describe("the credentials file", f.Creds, from("creds", launch.EnvCreds))
	case f.NKey != "":
		return describe("the NKey seed file", f.NKey, from("nkey", launch.EnvNKey))
	}
	return fmt.Sprintf("no credentials (no --nkey or --creds, and %s and %s are unset)", launch.EnvNKey, launch.EnvCreds)
}

// publicKeyOf is the public key of the NKey seed (or the .creds file's
// seed) in path, "" when it cannot be read.
func publicKeyOf(path string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	kp, err := nkeys.ParseDecoratedNKey(raw)
	if err != nil {
		return ""
	}
	defer kp.Wipe()
	pub, err := kp.PublicKey()
	if err != nil {
		return ""
	}
	return pub
}
