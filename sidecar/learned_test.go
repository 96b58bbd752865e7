package sidecar

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/bus"
)

// What the guard learned is saved in the data directory, restored at the
// next start, shown in status and on /metrics; a file that cannot be
// read back is set aside and the sidecar starts all the same.
func TestLearnedResponseSurvivesARestart(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "gpu-a", 200)
	last := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	point := admission.ResponsePoint{Service: "v100-infer", Trainer: strings.Repeat("0f", 32), Name: "v100-train", Pct: 30,
		Ratios: []float64{1.1, 1.25}, Ratio: 1.25, Windows: 4, Last: last}

	s, err := New(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.adm.RestoreResponse([]admission.ResponsePoint{point}); n != 1 || err != nil {
		t.Fatalf("RestoreResponse = %d, %v", n, err)
	}
	s.saveLearned()
	s.Close(context.Background())
	path := filepath.Join(cfg.Sidecar.DataDir, learnedFile)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("saved file: %v, %v; want mode 0600", fi, err)
	}

	r := start(t, cfg, Options{})
	got := r.adm.Response()
	if len(got) != 1 || got[0].Pct != 30 || got[0].Ratio != 1.25 || got[0].Windows != 4 || !got[0].Last.Equal(last) {
		t.Fatalf("after a restart the guard knows %+v, want %+v", got, point)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := bus.NewClient(launcherConn(t, r)).Status(ctx, "gpu-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Services) != 1 || len(st.Services[0].Response) != 1 || st.Services[0].Response[0] != (v1.ResponsePoint{Trainer: "v100-train", Pct: 30, Ratio: 1.25, Windows: 4, Last: last}) {
		t.Errorf("status services %+v: want the learned point", st.Services)
	}
	if m := getMetrics(t, r); !regexp.MustCompile(`colocd_guard_learned_ratio\{.*pct="30",service="v100-infer",trainer="v100-train"\} 1.25\n`).MatchString(m) {
		t.Errorf("/metrics has no learned ratio of 1.25 at 30 %%:\n%s", m[:min(len(m), 2000)])
	}

	bad := testConfig(t, "gpu-b", 200)
	if err := os.WriteFile(filepath.Join(bad.Sidecar.DataDir, learnedFile), []byte(`{"version":1,"points":[{"pct":"x"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	b := start(t, bad, Options{})
	if pts := b.adm.Response(); len(pts) != 0 {
		t.Errorf("from a bad file the guard knows %+v", pts)
	}
	if _, err := os.Stat(filepath.Join(bad.Sidecar.DataDir, learnedFile+".bad")); err != nil {
		t.Errorf("the bad file was not set aside: %v", err)
	}
}
