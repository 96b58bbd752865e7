package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// predict --sweep predicts the service at every step of the trainer's
// percentage, and chooses the highest within the SLO, as the chart shows.
func TestPredictSweep(t *testing.T) {
	args := []string{"predict", "--inference", profilesDir + "/v100-infer-200.json", "--training", profilesDir + "/v100-train-step.json",
		"--mode", "mps", "--rate", "8", "--requests", "300", "--sweep"}
	out, _, err := runCLI(t, append(args, "--json", "--slo-p99-ms", "100")...)
	var r sweepResult
	if err != nil || json.Unmarshal([]byte(out), &r) != nil || len(r.Points) != 20 || r.Points[0].Pct != 5 || r.Points[19].Pct != 100 {
		t.Fatalf("sweep --json: %v\n%s", err, out)
	}
	want := 0
	for _, p := range r.Points {
		if p.P99MS <= 100 {
			want = p.Pct
		}
	}
	if want == 0 || want == 100 || r.Chosen != want {
		t.Fatalf("chosen %d, want %d, the highest within 100 ms (the points: %+v)", r.Chosen, want, r.Points)
	}
	// The chart marks that row, and the SLO column.
	out, _, err = runCLI(t, append(args, "--slo-p99-ms", "100")...)
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(fmt.Sprintf(`(?m)^ +%d +[0-9.]+ \|[^\n]*<- chosen`, want))
	if !row.MatchString(out) || strings.Count(out, "<- chosen") != 1 || !strings.Contains(out, "SLO 100.00 ms") || !strings.Contains(out, "!") {
		t.Errorf("sweep chart:\n%s", out)
	}
	// Nothing fits under 1 ms: a deny, said so.
	if out, _, err := runCLI(t, append(args, "--slo-p99-ms", "1")...); err != nil || !strings.Contains(out, "no percentage holds the SLO") {
		t.Errorf("sweep with an SLO nothing meets: %v\n%s", err, out)
	}
	if _, _, err := runCLI(t, "predict", "--inference", profilesDir+"/v100-infer-200.json", "--training", profilesDir+"/v100-train-step.json", "--rate", "8", "--sweep"); exitCode(err) != exitUsage {
		t.Errorf("sweep in timeslice mode: %v, want a usage error", err)
	}
}
