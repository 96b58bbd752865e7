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
	for xid, want := range map[uint64]string{
		79:   "xid 79 (GPU has fallen off the bus)", // in the catalog
		1234: "xid 1234 (see NVIDIA's Xid catalog)", // not in it
	} {
		if got := XIDText(xid); got != want {
			t.Errorf("XIDText(%d) = %q, want %q", xid, got, want)
		}
	}
}
