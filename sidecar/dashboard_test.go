package sidecar

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// dashboardMetrics are the metric names the Grafana dashboard queries, a
// histogram's by its own name (its _bucket, _sum and _count series).
func dashboardMetrics(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("../deploy/grafana/colocd.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil || len(dash.Panels) == 0 {
		t.Fatalf("dashboard: %v (%d panels)", err, len(dash.Panels))
	}
	name := regexp.MustCompile(`\bcolocd_[a-z0-9_]+`)
	var out []string
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			for _, m := range name.FindAllString(tg.Expr, -1) {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					m = strings.TrimSuffix(m, suffix)
				}
				if !slices.Contains(out, m) {
					out = append(out, m)
				}
			}
		}
	}
	return out
}

// Every metric deploy/grafana/colocd.json queries is on /metrics of a
// running sidecar that has decided, leased, expired and watched its
// service's server: a renamed metric breaks this test, not the dashboard.
func TestDashboardQueriesExistingMetrics(t *testing.T) {
	t.Parallel()
	want := dashboardMetrics(t)
	srv := newMetricsServer(t, 100, loadPage) // 100 requests a scrape: enough for a p99 in a 2 s window
	cfg := watching(t, "gpu-dash", 10000, srv.url)
	cfg.Services[0].Metrics.Window = 2 * time.Second
	s := start(t, cfg, Options{})
	c := client(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	req := admitReq("dash", 10, 100)
	req.LeaseSeconds = 1 // it expires: an event
	if d, err := c.Admit(ctx, s.ID(), req); err != nil || d.Lease == nil {
		t.Fatalf("admit: %v %+v", err, d)
	}
	var missing []string
	if !eventually(ctx, func() bool {
		page := getMetrics(t, s)
		missing = slices.DeleteFunc(slices.Clone(want), func(m string) bool { return strings.Contains(page, "# TYPE "+m+" ") })
		return len(missing) == 0
	}) {
		t.Errorf("the dashboard queries metrics a sidecar does not export: %v", missing)
	}
}
