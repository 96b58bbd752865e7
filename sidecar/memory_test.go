//go:build !race

// The race detector's shadow memory is what these tests would measure:
// make test runs this file in its plain pass.

package sidecar

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	v1 "github.com/colocd/colocd/api/v1"
)

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// vmRSS is the process's resident set from /proc, in bytes (0 where there
// is no /proc).
func vmRSS() uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestMemoryAfterDistinctLargeProfiles: 200 distinct profiles of about
// 320 KB each (56 MiB parsed) pass through the profile path of the API; what
// the sidecar keeps of them stays within the cache's byte budget, here
// 16 MiB (64 MiB in production, which would take 1,000 such profiles to
// fill). Before, the cache kept 128 profiles whatever their size, so 16
// distinct profiles of the 16 MiB a reference may name held 1 GB.
func TestMemoryAfterDistinctLargeProfiles(t *testing.T) {
	const profiles, budget = 200, 16 << 20
	h := &handler{profiles: newProfileCache(budget)}
	var p map[string]any
	if err := json.Unmarshal(bigTrainingProfile(t, 250<<10), &p); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	before, rssBefore := heapInUse(), vmRSS()
	parsed, size := 0, 0
	for i := range profiles {
		// Each copy has another name: another profile to the cache, of
		// the same size.
		p["name"] = "copy-" + strconv.Itoa(i)
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		pp, err := h.profile(ctx, &v1.AdmitRequest{Profile: raw})
		if err != nil {
			t.Fatalf("profile %d: %v", i, err)
		}
		parsed, size = parsedBytes(pp.p), len(raw)
	}
	after, rssAfter := heapInUse(), vmRSS()
	n, held := h.profiles.Len()
	t.Logf("%d profiles of %d bytes (%d parsed): the cache holds %d (%.1f MiB); heap in use %.1f → %.1f MiB; VmRSS %d → %d MiB",
		profiles, size, parsed, n, float64(held)/(1<<20), float64(before)/(1<<20), float64(after)/(1<<20), rssBefore>>20, rssAfter>>20)
	if held > budget || n != budget/parsed {
		t.Errorf("the cache holds %d profiles, %d bytes: want the %d that fit in %d bytes", n, held, budget/parsed, budget)
	}
	// All of them would take 56 MiB, the 128 the old cache kept 36 MiB;
	// the heap may grow by the budget, a few profiles in flight and the
	// fragmentation that freeing the others leaves in the heap's spans.
	if growth := int64(after) - int64(before); growth > int64(budget+4*parsed+8<<20) {
		t.Errorf("heap grew %.1f MiB after %d distinct profiles: want at most the cache's %d MiB and a few more", float64(growth)/(1<<20), profiles, budget>>20)
	}
	// The most recent profile is still there, the first is gone.
	if _, ok := h.profile(ctx, &v1.AdmitRequest{Profile: mustMarshal(t, p)}); ok != nil {
		t.Fatal(ok)
	}
	p["name"] = "copy-0"
	if _, ok := h.profiles.Get(sha256.Sum256(mustMarshal(t, p))); ok {
		t.Error("the least recently used profile is still cached")
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
