package sidecar

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/admission"
)

// getReadyz is /readyz's status and body.
func getReadyz(t *testing.T, s *running) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + s.HTTPAddr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// colocd drain's file drains a running sidecar: its lease is revoked
// with an event, admits are denied "draining", status, /readyz (still
// 200) and the capacity summary say so; a restart stays drained; the
// file removed, it admits again.
func TestDrainAndUndrain(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "gpu-drain", 10000)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := start(t, cfg, Options{})
	c := client(t, s)
	lease := leasedInFull(ctx, t, c, s.ID(), admitReq("job-running", 10, 100))
	sub, err := c.Events(ctx, s.ID(), "job-running", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()

	if _, err := WriteDrain(cfg.Sidecar.DataDir, "driver upgrade"); err != nil {
		t.Fatal(err)
	}
	select {
	case rec := <-sub.C():
		if rec.Event.Type != v1.EventRevoke || rec.Event.LeaseID != lease.Lease.ID || !strings.Contains(rec.Event.Reason, "driver upgrade") {
			t.Errorf("event %+v: want the running lease revoked for the drain", rec.Event)
		}
	case <-ctx.Done():
		t.Fatalf("no revoke after the drain: %v", sub.Err())
	}
	d, err := c.Admit(ctx, s.ID(), admitReq("job-new", 10, 100))
	if err != nil || d.Lease != nil || d.Reason.Code != string(admission.CodeDraining) {
		t.Errorf("admit while drained: %+v, %v; want a deny %q", d, err, admission.CodeDraining)
	}
	st, err := c.Status(ctx, s.ID())
	if err != nil || st.Draining == nil || st.Draining.Reason != "driver upgrade" {
		t.Errorf("status while drained: %+v, %v", st.Draining, err)
	}
	if code, body := getReadyz(t, s); code != http.StatusOK || !strings.Contains(body, `"draining":"drained by the operator`) {
		t.Errorf("/readyz while drained: %d %s; want 200 naming draining under degraded", code, body)
	}
	if sum, err := s.adm.Summarize(ctx, admission.Request{}); err != nil || !sum.Draining || sum.Healthy {
		t.Errorf("summary while drained: %+v, %v", sum, err)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}

	// A restart reads the file before it answers a single admit.
	again := start(t, cfg, Options{})
	c = client(t, again)
	if d, err := c.Admit(ctx, again.ID(), admitReq("job-after-restart", 10, 100)); err != nil || d.Reason.Code != string(admission.CodeDraining) {
		t.Errorf("first admit after a restart: %+v, %v; want a deny %q", d, err, admission.CodeDraining)
	}
	if was, err := RemoveDrain(cfg.Sidecar.DataDir); !was || err != nil {
		t.Fatalf("RemoveDrain = %v, %v", was, err)
	}
	if !eventually(ctx, func() bool { _, drained := again.adm.Draining(); return !drained }) {
		t.Fatal("still drained after the file was removed")
	}
	leasedInFull(ctx, t, c, again.ID(), admitReq("job-undrained", 10, 100))
}

// A drain file that cannot be read keeps the sidecar drained, and says
// why.
func TestUnreadableDrainFileDrains(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "gpu-drain-bad", 10000)
	if err := os.WriteFile(DrainPath(cfg.Sidecar.DataDir), []byte(`{"since": "yesterday"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, cfg, Options{})
	d, ok := s.adm.Draining()
	if !ok || !strings.Contains(d.Reason, "cannot be read") {
		t.Errorf("Draining = %+v, %v; want drained, saying the file cannot be read", d, ok)
	}
}
