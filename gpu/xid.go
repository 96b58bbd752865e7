package gpu

import "fmt"

// appXIDs are the XIDs NVIDIA's Xid catalog attributes to the application
// (a bad kernel, a page fault in the workload, a watchdog on its context):
// the GPU itself stays usable. The same list is what NVIDIA's Kubernetes
// device plugin ignores for health.
var appXIDs = map[uint64]bool{13: true, 31: true, 43: true, 45: true, 68: true, 109: true}

// IsAppXID reports whether xid is an application-level fault (13, 31, 43,
// 45, 68, 109): the workload's fault, reported, but the device stays healthy.
// Every other XID marks the device unhealthy.
func IsAppXID(xid uint64) bool { return appXIDs[xid] }

// xidText names the XIDs an operator is most likely to meet.
var xidText = map[uint64]string{
	13:  "graphics engine exception",
	31:  "GPU memory page fault",
	43:  "GPU stopped processing",
	45:  "preemptive cleanup, due to previous errors",
	48:  "double bit ECC error",
	63:  "ECC page retirement or row remapping event",
	64:  "ECC page retirement or row remapper recording failure",
	68:  "video processor exception",
	74:  "NVLink error",
	79:  "GPU has fallen off the bus",
	92:  "high single-bit ECC error rate",
	94:  "contained ECC error",
	95:  "uncontained ECC error",
	109: "context switch timeout",
	119: "GSP RPC timeout",
	120: "GSP error",
}

// XIDText describes an XID in a few words, e.g. "xid 79 (GPU has fallen off
// the bus)". XIDs without a description refer to NVIDIA's Xid catalog.
func XIDText(xid uint64) string {
	if t, ok := xidText[xid]; ok {
		return fmt.Sprintf("xid %d (%s)", xid, t)
	}
	return fmt.Sprintf("xid %d (see NVIDIA's Xid catalog)", xid)
}
