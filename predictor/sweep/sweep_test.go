package sweep

import (
	"strings"
	"testing"

	"github.com/colocd/colocd/predictor"
)

// The chart marks the SLO's column, a bar past it, and the percentage
// chosen; without an SLO it says how to get one, and with none held that
// the job would be denied. The service's name loses its control characters.
func TestWriteText(t *testing.T) {
	r := &Result{Service: "chat\x1b[2J", Metric: "latency", SLOMS: 10, Chosen: 50,
		Points: []Point{{Pct: 50, P99MS: 8}, {Pct: 100, P99MS: 12}}}
	var b strings.Builder
	r.WriteText(&b)
	out := b.String()
	for _, want := range []string{"# latency p99 of chat[2J against", "SLO 10.00 ms (:)", "   50      8.00 |", "<- chosen", "  100     12.00 |"} {
		if !strings.Contains(out, want) {
			t.Errorf("chart lacks %q:\n%s", want, out)
		}
	}
	if lines := strings.Split(out, "\n"); !strings.Contains(lines[3], "!") || strings.Contains(lines[2], "!") {
		t.Errorf("want the bar over the SLO, and only it, to end in '!':\n%s", out)
	}
	for _, tc := range []struct {
		name   string
		slo    float64
		chosen int
		want   string
	}{
		{"no SLO", 0, 0, "give --slo-p99-ms"},
		{"none holds", 1, 0, "no percentage holds the SLO"},
	} {
		r.SLOMS, r.Chosen = tc.slo, tc.chosen
		b.Reset()
		r.WriteText(&b)
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("%s: chart lacks %q:\n%s", tc.name, tc.want, b.String())
		}
	}
}

func TestRunErrors(t *testing.T) {
	var pr predictor.Predictor
	if _, err := Run(&pr, &predictor.Scenario{}, nil, 5, 0); err == nil || !strings.Contains(err.Error(), "want exactly one --training job") {
		t.Errorf("no training job: %v", err)
	}
	sc := &predictor.Scenario{Training: []*predictor.Profile{{}}}
	if _, err := Run(&pr, sc, nil, 0, 0); err == nil || !strings.Contains(err.Error(), "--sweep-step: want 1 to 100") {
		t.Errorf("step 0: %v", err)
	}
}
