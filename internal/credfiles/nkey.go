// Package credfiles holds the files a NATS connection's identity and
// encryption come from: user NKey seeds in files only their owner can read
// or replace (the launchers' and the sidecar's credentials), and the PEM
// files of a TLS connection. The client (bus) and the embedded server
// (natsserver) both read them.
package credfiles

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/nats-io/nkeys"
)

// Ensure returns the public key of the user NKey whose seed is in
// path, creating the file with a new seed (mode 0600, in a directory it
// creates with mode 0700) when it does not exist. An existing file that
// others than its owner can read or write is refused: the seed is the
// launchers' credential.
func Ensure(path string) (string, error) {
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
	if err := Private(path); err != nil {
		return "", fmt.Errorf("nkey seed file: %w", err)
	}
	if err := Private(filepath.Dir(path)); err != nil {
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

// Private refuses a file or directory that someone else could replace
// or change: owned by another user than this process's (root may own it:
// a mounted Secret), or writable by everyone (a directory with the sticky
// bit, like /tmp, lets others add files but not replace ours).
func Private(path string) error {
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
