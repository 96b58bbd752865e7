package gpu

import "testing"

func TestIsAppXID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		xid  uint64
		want bool
	}{
		{name: "13 graphics engine exception", xid: 13, want: true},
		{name: "31 memory page fault", xid: 31, want: true},
		{name: "43 stopped processing", xid: 43, want: true},
		{name: "45 preemptive cleanup", xid: 45, want: true},
		{name: "68 video processor", xid: 68, want: true},
		{name: "109 context switch timeout", xid: 109, want: true},
		{name: "48 double bit ECC", xid: 48},
		{name: "79 fallen off the bus", xid: 79},
		{name: "94 contained ECC", xid: 94},
		{name: "0", xid: 0},
		{name: "unknown", xid: 100000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsAppXID(tt.xid); got != tt.want {
				t.Errorf("IsAppXID(%d) = %v, want %v", tt.xid, got, tt.want)
			}
		})
	}
}

func TestXIDText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		xid  uint64
		want string
	}{
		{name: "known", xid: 79, want: "xid 79 (GPU has fallen off the bus)"},
		{name: "unknown", xid: 1234, want: "xid 1234 (see NVIDIA's Xid catalog)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := XIDText(tt.xid); got != tt.want {
				t.Errorf("XIDText(%d) = %q, want %q", tt.xid, got, tt.want)
			}
		})
	}
}
