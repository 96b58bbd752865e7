package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/colocd/colocd/internal/natstest"
	"github.com/colocd/colocd/observe"
)

// freeAddr is a local address no one listens on (just now).
func freeAddr(t *testing.T) string {
	t.Helper()
	// A port reserved across test processes: one the kernel hands out
	// (":0") may be taken by another package's server before the listen.
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(natstest.FreePort(t)))
}

// TestSimserve runs the simulated server next to a real sidecar: its page
// is vLLM's format, read by colocd's own scraper, and its requests grow.
func TestSimserve(t *testing.T) {
	t.Parallel()
	s := startSidecar(t, "gpu-simserve", nil)
	addr := freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"simserve", "--listen", addr, "--rate", "50", "--duration", "4s", "--linger", "1s", "--requests", "300",
			"--inference", profilesDir + "/v100-infer-200.json", "--training", profilesDir + "/v100-train-step.json",
			"--server", s.ClientURL(), "--nkey", s.LauncherNKeyFile(), "--sidecar", "gpu-simserve"}, io.Discard, io.Discard)
	}()
	vllm, err := observe.PresetNamed("vllm")
	if err != nil {
		t.Fatal(err)
	}
	sc := &observe.Scraper{URL: "http://" + addr + "/metrics", Preset: vllm}
	var first, last float64
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		r, err := sc.Scrape(ctx)
		if err != nil {
			continue // not listening yet
		}
		if first == 0 {
			first = max(r.Requests, 1e-9)
		}
		if last = r.Requests; last > first+20 {
			break
		}
	}
	if !(last > first+20) {
		t.Errorf("requests went from %g to %g, want them to grow", first, last)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), `vllm:e2e_request_latency_seconds_bucket{model_name="sim",le="0.005"}`) {
			t.Errorf("page:\n%s", body)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("simserve: %v", err)
	}
}

func TestSimserveErrors(t *testing.T) {
	t.Parallel()
	wantRefusals(t, []string{"simserve"}, []refusal{
		{"no profiles", []string{"--rate", "5"}, "--inference and --training"},
		{"no arrivals", []string{"--inference", "a", "--training", "b"}, "--trace or --rate: want one of the two"},
		{"no error factor", []string{"--inference", "a", "--training", "b", "--rate", "5", "--error", "0"}, "want factors above 0"},
	})
}
