package sidecar

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/configs"
)

// An inference team tightens its SLO in the file: the sidecar reloads it,
// keeps running, and throttles the live lease that no longer fits, with an
// event on the stream the launcher reads. An invalid edit changes nothing.
func TestSLOHotReloadThrottlesLease(t *testing.T) {
	dir := t.TempDir()
	profile, err := filepath.Abs(serviceProfile)
	if err != nil {
		t.Fatal(err)
	}
	p10, p100 := p99At(t, 10), p99At(t, 100)
	write := func(slo float64) {
		doc := fmt.Sprintf(`sidecar: {id: gpu-r, data_dir: %q}
nats: {listen: "127.0.0.1:0"}
gpu: {backend: sim}
predictor: {requests: %d}
telemetry: {http: "127.0.0.1:0"}
services:
  - {name: v100-infer, profile: %q, rate_rps: 8, slo: {p99_ms: %g}}
`, filepath.Join(dir, "data"), testRequests, profile, slo)
		tmp := filepath.Join(dir, ".colocd.yaml.tmp")
		if err := os.WriteFile(tmp, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "colocd.yaml")); err != nil { // as editors and ConfigMaps do
			t.Fatal(err)
		}
	}
	write(p100 / 0.9 * 1.05) // room for a job at 100 %
	path := filepath.Join(dir, "colocd.yaml")
	cfg, err := configs.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, cfg, Options{ConfigPath: path})
	c := client(t, s)
	ctx := context.Background()
	d, err := c.Admit(ctx, s.ID(), admitReq("job-r", 10, 100))
	if err != nil || d.Lease == nil || d.Lease.ActiveThreadPct != 100 {
		t.Fatalf("admit: %v %+v", err, d)
	}
	sub, err := c.Events(ctx, s.ID(), "job-r", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()

	os.WriteFile(path, []byte("services: [{name: broken"), 0o644) // invalid: ignored, logged
	write((p10 + p100) / 2 / 0.9)                                 // now only a lower percentage fits
	select {
	case rec := <-sub.C():
		ev := rec.Event
		if ev.Type != bus.EventThrottle || ev.LeaseID != d.Lease.ID || !(ev.ActiveThreadPct >= 10 && ev.ActiveThreadPct < 100) || ev.Deadline == nil {
			t.Errorf("event %+v, want a throttle of the lease below 100 %% with a deadline", ev)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no throttle event 60 s after the SLO was tightened")
	}
	st, err := c.Status(ctx, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Services[0].SLOP99MS; got != (p10+p100)/2/0.9 {
		t.Errorf("status SLO %v, want the new one", got)
	}
}
