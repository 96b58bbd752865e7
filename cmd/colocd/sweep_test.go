package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/colocd/colocd/predictor/sweep"
)

// predict --sweep predicts the service at every step of the trainer's
// percentage, and chooses the highest within the SLO, as the chart shows.
func TestPredictSweep(t *testing.T) {
	t.Parallel()
	args := []string{"predict", "--inference", profilesDir + "/v100-infer-200.json", "--training", profilesDir + "/v100-train-step.json",
		"--mode", "mps", "--rate", "8", "--requests", "300", "--sweep"}
	out, _, err := runCLI(t, append(args, "--json", "--slo-p99-ms", "100")...)
	var r sweep.Result
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

// predict --sweep --svg draws the same sweep as an SVG chart: a well-formed
// document with the service, the SLO and the percentage chosen named in it,
// written whole. --svg without --sweep, or into a directory that does not
// exist, is an error that leaves nothing behind.
func TestPredictSweepSVG(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "sweep.svg")
	args := []string{"predict", "--inference", profilesDir + "/v100-infer-200.json", "--training", profilesDir + "/v100-train-step.json",
		"--mode", "mps", "--rate", "8", "--requests", "300", "--slo-p99-ms", "100"}
	out, _, err := runCLI(t, append(args, "--sweep", "--json", "--svg", path)...)
	var r sweep.Result
	if err != nil || json.Unmarshal([]byte(out), &r) != nil || r.Chosen == 0 {
		t.Fatalf("sweep --svg --json: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	dec := xml.NewDecoder(bytes.NewReader(raw))
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
		case xml.CharData:
			if s := strings.TrimSpace(string(tok)); s != "" {
				texts = append(texts, s)
			}
		}
	}
	all := strings.Join(texts, "\n")
	for _, want := range []string{"latency p99 of v100-infer-200", "SLO 100.00 ms", fmt.Sprintf("chosen: %d %%", r.Chosen), "over the SLO", "training job's MPS active-thread percentage"} {
		if root != "svg" || !strings.Contains(all, want) {
			t.Errorf("the chart (root <%s>) lacks %q; its text:\n%s", root, want, all)
		}
	}
	if _, _, err := runCLI(t, append(args, "--svg", path)...); exitCode(err) != exitUsage || !strings.Contains(err.Error(), "--sweep") {
		t.Errorf("--svg without --sweep: %v, want a usage error naming --sweep", err)
	}
	missing := filepath.Join(dir, "no", "such", "dir", "sweep.svg")
	if _, _, err := runCLI(t, append(args, "--sweep", "--svg", missing)...); err == nil || !strings.Contains(err.Error(), "--svg") {
		t.Errorf("--svg into a missing directory: %v, want an error naming --svg", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%s holds %v, want the chart alone", dir, ents)
	}
}
