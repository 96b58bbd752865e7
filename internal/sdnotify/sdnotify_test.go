package sdnotify

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// listen is a notify socket as systemd opens one, in a temporary folder.
func listen(t *testing.T) (string, *net.UnixConn) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return path, c
}

func TestNotifySendsOneDatagram(t *testing.T) {
	path, c := listen(t)
	sent, err := NotifySocket(path, Ready, "STATUS=serving gpu-a")
	if err != nil || !sent {
		t.Fatalf("NotifySocket = %v, %v; want sent", sent, err)
	}
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(buf[:n]), "READY=1\nSTATUS=serving gpu-a\n"; got != want {
		t.Errorf("datagram %q, want %q", got, want)
	}
}

func TestNotifyWithoutSocketIsANoOp(t *testing.T) {
	t.Setenv(Env, "")
	if sent, err := Notify(Ready); sent || err != nil {
		t.Errorf("Notify without a socket = %v, %v; want false, nil", sent, err)
	}
}

func TestNotifyRefusesBadAssignments(t *testing.T) {
	path, _ := listen(t)
	for _, bad := range []string{"READY", "=1", "STATUS=two\nlines"} {
		if _, err := NotifySocket(path, bad); err == nil || !strings.Contains(err.Error(), "KEY=value") {
			t.Errorf("NotifySocket(%q) = %v, want an error naming KEY=value", bad, err)
		}
	}
}

func TestNotifyMissingSocketIsAnError(t *testing.T) {
	if _, err := NotifySocket(filepath.Join(t.TempDir(), "absent"), Ready); err == nil {
		t.Error("a socket that does not exist: want an error")
	}
}
