package sidecar

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/colocd/colocd/internal/sdnotify"
)

// Under Type=notify the sidecar says READY=1 once it is ready, never
// before, and STOPPING=1 when it stops.
func TestSystemdNotify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	t.Setenv(sdnotify.Env, path)
	s := start(t, testConfig(t, "gpu-notify", 10000), Options{})

	// await reads datagrams until one holds want; every datagram before
	// it is returned too.
	await := func(want string) []string {
		t.Helper()
		var seen []string
		buf := make([]byte, 4096)
		for {
			// A bound on a hang, not a speed goal: a loaded machine
			// still gets there well within it.
			_ = sock.SetReadDeadline(time.Now().Add(2 * time.Minute))
			n, err := sock.Read(buf)
			if err != nil {
				t.Fatalf("waiting for %s, got %q: %v", want, seen, err)
			}
			seen = append(seen, string(buf[:n]))
			if strings.Contains(string(buf[:n]), want+"\n") {
				return seen
			}
		}
	}
	seen := await(sdnotify.Ready)
	if err := s.Ready(); err != nil {
		t.Errorf("READY=1 sent while not ready: %v", err)
	}
	if !strings.HasPrefix(seen[0], "STATUS=starting sidecar gpu-notify") {
		t.Errorf("first datagram %q, want the starting status", seen[0])
	}
	if last := seen[len(seen)-1]; !strings.Contains(last, "STATUS=serving sidecar gpu-notify") {
		t.Errorf("the READY datagram %q, want the serving status with it", last)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	s.stop = func() error { return nil }
	await(sdnotify.Stopping)
}
