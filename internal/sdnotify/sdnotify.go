// Package sdnotify tells the service manager how the process stands, by
// the protocol of sd_notify(3): one datagram of newline-separated
// assignments (READY=1, STOPPING=1, STATUS=...) to the Unix socket named
// by $NOTIFY_SOCKET. A process that systemd did not start with
// Type=notify has no such socket, and every call is a no-op.
package sdnotify

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
)

// Env names the variable that carries the socket's path; a leading "@"
// names a socket in the abstract namespace.
const Env = "NOTIFY_SOCKET"

// Common states.
const (
	Ready    = "READY=1"
	Stopping = "STOPPING=1"
)

// Notify sends the assignments to the socket $NOTIFY_SOCKET names. It
// reports false, and no error, when there is none.
func Notify(assignments ...string) (bool, error) {
	return NotifySocket(os.Getenv(Env), assignments...)
}

// NotifySocket is Notify to the socket at path ("": none).
func NotifySocket(path string, assignments ...string) (bool, error) {
	if path == "" {
		return false, nil
	}
	for _, a := range assignments {
		if k, _, ok := strings.Cut(a, "="); !ok || k == "" || strings.ContainsRune(a, '\n') {
			return false, fmt.Errorf("sdnotify: %q: want one KEY=value on one line", a)
		}
	}
	if len(assignments) == 0 {
		return false, errors.New("sdnotify: nothing to send")
	}
	name := path
	if strings.HasPrefix(name, "@") {
		name = "\x00" + name[1:]
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return false, fmt.Errorf("sdnotify: %s: %w", path, err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(strings.Join(assignments, "\n") + "\n")); err != nil {
		return false, fmt.Errorf("sdnotify: %s: %w", path, err)
	}
	return true, nil
}
