package predictor

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestProfileSaveLoadRoundTrip(t *testing.T) {
	t.Parallel()
	d := 0.3
	p := &Profile{Format: ProfileFormat, Name: "rt <a>", Kind: KindTraining, Device: Device{Name: "NVIDIA H200", SMs: 132},
		Ops: []Op{{Name: "k<float>", DurUS: 10.5, GapUS: 1, SM: 0.5, Occupancy: 0.25, DRAM: &d}}}
	path := filepath.Join(t.TempDir(), "p.json")
	if err := SaveProfile(path, p); err != nil {
		t.Fatal(err)
	}
	got, err := LoadProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, p) {
		t.Errorf("round trip changed the profile:\n got %+v\nwant %+v", got, p)
	}
	raw, _ := os.ReadFile(path)
	if !strings.Contains(string(raw), "k<float>") {
		t.Errorf("saved file escapes kernel names: %s", raw)
	}
	// An invalid profile is refused and leaves the old file untouched.
	bad := *p
	bad.Kind = "serving"
	if err := SaveProfile(path, &bad); err == nil {
		t.Fatal("SaveProfile accepted kind serving")
	}
	if again, _ := os.ReadFile(path); string(again) != string(raw) {
		t.Error("a refused save changed the file")
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*tmp*")); len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}
