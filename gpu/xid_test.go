package gpu

import "testing"

func TestIsAppXID(t *testing.T) {
	t.Parallel()
	// The application's faults: graphics engine exception, memory page
	// fault, stopped processing, preemptive cleanup, video processor,
	// context switch timeout.
	for _, xid := range []uint64{13, 31, 43, 45, 68, 109} {
		if !IsAppXID(xid) {
			t.Errorf("IsAppXID(%d) = false, want true", xid)
		}
	}
	// The GPU's own (double bit ECC, fallen off the bus, contained ECC),
	// none, and one not in the catalog.
	for _, xid := range []uint64{48, 79, 94, 0, 100000} {
		if IsAppXID(xid) {
			t.Errorf("IsAppXID(%d) = true, want false", xid)
		}
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
