package mps

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// ServerState is the state get_server_status reports for an MPS server.
type ServerState string

// The server states of the MPS documentation. Any other answer is an error.
const (
	// ServerInitializing: the server is starting; the daemon queues new clients.
	ServerInitializing ServerState = "INITIALIZING"
	// ServerActive: the server accepts new clients.
	ServerActive ServerState = "ACTIVE"
	// ServerFault: a client hit a fatal fault; new clients are refused until
	// the faulting clients exit.
	ServerFault ServerState = "FAULT"
)

// Client is one row of the daemon's ps: an MPS client process.
type Client struct {
	PID       PID    // the client's PID in the daemon's PID namespace
	ID        int    // the identifier the server assigned to the client
	Server    PID    // the server the client is connected to
	Device    string // the partial UUID of the device, as ps prints it
	Namespace uint64 // the client's PID namespace (inode number)
	Command   string // the client's command line
	// ActiveThreadPct is the client's active-thread percentage where known:
	// Sim fills it; the real daemon's ps does not report it (0).
	ActiveThreadPct float64
}

// splitLines splits output into lines without their "\r\n" or "\n".
func splitLines(out string) []string {
	out = strings.TrimRight(out, "\r\n")
	if out == "" {
		return nil
	}
	ls := strings.Split(out, "\n")
	for i, l := range ls {
		ls[i] = strings.TrimSuffix(l, "\r")
	}
	return ls
}

// parsePIDLines parses one PID per line (get_server_list, get_client_list);
// blank lines are skipped, empty output is an empty list.
func parsePIDLines(verb, out string) ([]PID, error) {
	var pids []PID
	for i, l := range splitLines(out) {
		f := strings.TrimSpace(l)
		if f == "" {
			continue
		}
		p, err := ParsePID(f)
		if err != nil {
			return nil, &OutputError{Command: verb, Output: out, Reason: fmt.Sprintf("line %d: want one PID", i+1)}
		}
		pids = append(pids, p)
	}
	return pids, nil
}

// parseServerList parses get_server_list: one server PID per line.
func parseServerList(out string) ([]PID, error) { return parsePIDLines(verbGetServerList, out) }

// parseClientList parses get_client_list: one client PID per line.
func parseClientList(out string) ([]PID, error) { return parsePIDLines(verbGetClientList, out) }

// parseServerStatus parses get_server_status: one known state word.
func parseServerStatus(out string) (ServerState, error) {
	switch s := ServerState(strings.TrimSpace(out)); s {
	case ServerInitializing, ServerActive, ServerFault:
		return s, nil
	}
	return "", &OutputError{Command: verbGetServerStatus, Output: out, Reason: "want INITIALIZING, ACTIVE or FAULT"}
}

// psHeader is the header line of ps, field by field.
var psHeader = []string{"PID", "ID", "SERVER", "DEVICE", "NAMESPACE", "COMMAND"}

// psDevice is the partial device UUID of a ps row.
var psDevice = regexp.MustCompile(`^(GPU|MIG)-[0-9a-fA-F]{1,12}(-[0-9a-fA-F]{1,12}){0,4}$`)

// parsePS parses ps: the header line, then one row per client. Empty output
// (no header) is an empty list too.
func parsePS(out string) ([]Client, error) {
	ls := splitLines(out)
	bad := func(line int, why string) error {
		return &OutputError{Command: verbPS, Output: out, Reason: fmt.Sprintf("line %d: %s", line, why)}
	}
	var clients []Client
	header := false
	for i, l := range ls {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if !header {
			if !slicesEqual(strings.Fields(l), psHeader) {
				return nil, bad(i+1, "want the header PID ID SERVER DEVICE NAMESPACE COMMAND")
			}
			header = true
			continue
		}
		f, rest := cutFields(l, 5)
		if len(f) < 5 {
			return nil, bad(i+1, "want PID ID SERVER DEVICE NAMESPACE [COMMAND]")
		}
		var c Client
		var err error
		if c.PID, err = ParsePID(f[0]); err != nil {
			return nil, bad(i+1, "PID: want a PID")
		}
		id, ok := parseDigits(f[1], 9)
		if !ok {
			return nil, bad(i+1, "ID: want an integer ≥ 0")
		}
		c.ID = int(id)
		if c.Server, err = ParsePID(f[2]); err != nil {
			return nil, bad(i+1, "SERVER: want a PID")
		}
		if !psDevice.MatchString(f[3]) {
			return nil, bad(i+1, "DEVICE: want a (partial) GPU UUID")
		}
		c.Device = f[3]
		if c.Namespace, err = strconv.ParseUint(f[4], 10, 64); err != nil || f[4][0] == '+' {
			return nil, bad(i+1, "NAMESPACE: want an integer ≥ 0")
		}
		c.Command = rest
		clients = append(clients, c)
	}
	return clients, nil
}

// cutFields returns the first n whitespace-separated fields of line and the
// rest of the line after them, trimmed.
func cutFields(line string, n int) ([]string, string) {
	var fields []string
	rest := line
	for len(fields) < n {
		rest = strings.TrimLeft(rest, " \t")
		if rest == "" {
			break
		}
		end := strings.IndexAny(rest, " \t")
		if end < 0 {
			end = len(rest)
		}
		fields = append(fields, rest[:end])
		rest = rest[end:]
	}
	return fields, strings.TrimSpace(rest)
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// percentOut is a percentage as the daemon prints it: "100", "33.0".
var percentOut = regexp.MustCompile(`^[0-9]{1,3}(\.[0-9]{1,6})?$`)

// parsePercentage parses get_[default_]active_thread_percentage.
func parsePercentage(verb, out string) (float64, error) {
	s := strings.TrimSpace(out)
	if percentOut.MatchString(s) {
		if v, err := strconv.ParseFloat(s, 64); err == nil && v > 0 && v <= 100 {
			return v, nil
		}
	}
	return 0, &OutputError{Command: verb, Output: out, Reason: "want a percentage in (0, 100]"}
}

// memOut is a memory size with a unit ("10G", "900M", "8192 MB", "1.5GiB").
var memOut = regexp.MustCompile(`(?i)^([0-9]{1,16})(?:\.([0-9]{1,6}))? ?([KMGT])(?:i?B)?$`)

// memHex is a byte count in hex, as server.log prints limits ("0x140000000").
var memHex = regexp.MustCompile(`^0x[0-9a-fA-F]{1,13}$`)

// parseMemLimit parses get_[default_]device_pinned_mem_limit. A bare "0"
// is no limit; any other number needs a unit (K, M, G, T: binary) or a 0x
// prefix (bytes), because a bare number's unit is not documented.
func parseMemLimit(verb, out string) (MemLimit, error) {
	s := strings.TrimSpace(out)
	bad := &OutputError{Command: verb, Output: out, Reason: "want 0, a size with a unit (e.g. 10G, 900M) or a 0x byte count"}
	switch {
	case s == "0":
		return 0, nil
	case memHex.MatchString(s):
		v, err := strconv.ParseUint(s[2:], 16, 64)
		if err != nil || MemLimit(v) > MaxMemLimit {
			return 0, bad
		}
		return MemLimit(v), nil
	}
	m := memOut.FindStringSubmatch(s)
	if m == nil {
		return 0, bad
	}
	unit := map[string]uint64{"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[strings.ToUpper(m[3])]
	whole, _ := strconv.ParseUint(m[1], 10, 64)
	if whole > uint64(MaxMemLimit)/unit {
		return 0, bad
	}
	v := whole * unit
	if m[2] != "" {
		frac, _ := strconv.ParseUint(m[2], 10, 64)
		scale := uint64(1)
		for range len(m[2]) {
			scale *= 10
		}
		v += frac * unit / scale
	}
	if MemLimit(v) > MaxMemLimit {
		return 0, bad
	}
	return MemLimit(v), nil
}

// priorityOut is a priority as get_default_client_priority may print it:
// "0", "1", or with the documentation's label ("1 [BELOW NORMAL]").
var priorityOut = regexp.MustCompile(`^([01])(?: ?\[(NORMAL|BELOW NORMAL)\])?$`)

// parsePriority parses get_default_client_priority.
func parsePriority(out string) (Priority, error) {
	m := priorityOut.FindStringSubmatch(strings.TrimSpace(out))
	if m == nil || (m[2] != "" && (m[1] == "0") != (m[2] == "NORMAL")) {
		return 0, &OutputError{Command: verbGetDefaultClientPriority, Output: out, Reason: "want 0 or 1"}
	}
	return Priority(m[1][0] - '0'), nil
}

// parseTerminate parses terminate_client: the CUDA result code, 0 on success.
func parseTerminate(out string) error {
	s := strings.TrimSpace(out)
	code, ok := parseDigits(s, 4)
	if !ok {
		return &OutputError{Command: verbTerminateClient, Output: out, Reason: "want a CUDA result code"}
	}
	if code != 0 {
		return fmt.Errorf("%w: CUDA error %d", ErrTerminateFailed, code)
	}
	return nil
}

// parseEmpty checks the answer of a command that prints nothing on success:
// any text is the daemon's error message.
func parseEmpty(verb, out string) error {
	if strings.TrimSpace(out) != "" {
		return &OutputError{Command: verb, Output: out, Reason: "want no output"}
	}
	return nil
}

// parsePIDFile parses nvidia-cuda-mps-control.pid: one PID.
func parsePIDFile(data string) (PID, error) {
	p, err := ParsePID(strings.TrimSpace(data))
	if err != nil {
		return 0, fmt.Errorf("parse pid file: %w", err)
	}
	return p, nil
}
