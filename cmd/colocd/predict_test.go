package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/colocd/colocd/predictor"
)

// update rewrites golden files instead of comparing with them.
var update = flag.Bool("update", false, "rewrite golden files under testdata/")

const profilesDir = "../../testdata/profiles"

// TestPredictGolden pins two full predictions byte for byte. A change in the
// model shows up here; refresh with go test ./cmd/colocd -run Golden -update
// and say in the commit why the numbers moved.
func TestPredictGolden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
	}{
		{"v100-timeslice", []string{"--inference", profilesDir + "/v100-infer-200.json", "--training", profilesDir + "/v100-train-step.json",
			"--load", "0.2", "--requests", "2000", "--seed", "1"}},
		{"v100-mps-h200-preset", []string{"--inference", profilesDir + "/v100-infer-200.json", "--training", profilesDir + "/v100-train-step.json",
			"--mode", "mps", "--pct", "40", "--load", "0.4", "--requests", "2000", "--seed", "1", "--calibration", "../../predictor/presets/h200.json"}},
		{"summary-mps-two-pcts", []string{"--inference", profilesDir + "/summary-bert.json",
			"--training", profilesDir + "/summary-train.json", "--training", profilesDir + "/summary-stream.json",
			"--mode", "mps", "--pct", "30", "--pct", "60", "--rate", "40", "--requests", "1000", "--seed", "7"}},
		{"summary-two-trainers", []string{"--inference", profilesDir + "/summary-bert.json",
			"--training", profilesDir + "/summary-train.json", "--training", profilesDir + "/summary-stream.json",
			"--rate", "40", "--requests", "1000", "--seed", "7", "--calibration", "../../testdata/golden/calibration-example.json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := runCLI(t, append([]string{"predict", "--json"}, tt.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("..", "..", "testdata", "golden", "predict-"+tt.name+".json")
			if *update {
				if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if out != string(want) {
				t.Errorf("prediction differs from %s (run with -update if the change is intended):\n%s", golden, out)
			}
		})
	}
}

// The --json output carries exactly the keys the issue and docs promise.
func TestPredictJSONShape(t *testing.T) {
	t.Parallel()
	out, _, err := runCLI(t, "predict", "--inference", profilesDir+"/summary-bert.json", "--training", profilesDir+"/summary-train.json",
		"--load", "0.3", "--requests", "100", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["mode"] != "timeslice" {
		t.Errorf("mode = %v, want timeslice", doc["mode"])
	}
	inf := doc["inference"].(map[string]any)
	for _, k := range []string{"name", "rate_rps", "requests"} {
		if _, ok := inf[k]; !ok {
			t.Errorf("inference.%s missing", k)
		}
	}
	for _, q := range []string{"latency_ms", "service_ms", "solo_latency_ms", "solo_service_ms"} {
		m, ok := inf[q].(map[string]any)
		if !ok {
			t.Fatalf("inference.%s missing", q)
		}
		for _, k := range predictor.PercentileKeys {
			if _, ok := m[k].(float64); !ok {
				t.Errorf("inference.%s.%s missing or not a number", q, k)
			}
		}
	}
	tr := doc["training"].([]any)[0].(map[string]any)
	for _, k := range []string{"name", "iteration_ms", "solo_iteration_ms"} {
		if _, ok := tr[k]; !ok {
			t.Errorf("training[0].%s missing", k)
		}
	}
}

func TestPredictTable(t *testing.T) {
	t.Parallel()
	out, _, err := runCLI(t, "predict", "--inference", profilesDir+"/summary-bert.json", "--training", profilesDir+"/summary-stream.json",
		"--rate", "50", "--requests", "200")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"bert-summary at 50.00 req/s", "latency         co-located", "stream-train-summary", "—"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestPredictErrors(t *testing.T) {
	t.Parallel()
	bert, train := profilesDir+"/summary-bert.json", profilesDir+"/summary-train.json"
	wantRefusals(t, []string{"predict"}, []refusal{
		{"no inference", []string{"--load", "0.5"}, "--inference: want the path of an inference profile"},
		{"unknown mode", []string{"--inference", bert, "--mode", "mig", "--load", "0.5"}, `--mode: want timeslice or mps, got "mig"`},
		{"pct without mps", []string{"--inference", bert, "--pct", "50", "--load", "0.5"}, "--pct and --inference-pct: want --mode mps"},
		{"pct out of range", []string{"--inference", bert, "--training", train, "--mode", "mps", "--pct", "150", "--load", "0.5"}, "training_pct[0]: want an active-thread percentage in (0,100], got 150"},
		{"pct count", []string{"--inference", bert, "--training", train, "--mode", "mps", "--pct", "50,60", "--load", "0.5"}, "training_pct: want one percentage for all training jobs or one per job (1), got 2 values"},
		{"rate and load", []string{"--inference", bert, "--rate", "5", "--load", "0.5"}, "[load rate] were all set"},
		{"no rate", []string{"--inference", bert}, "rate: want a rate in req/s"},
		{"load out of range", []string{"--inference", bert, "--load", "1.5"}, "load: want a fraction of solo capacity in (0,1), got 1.5"},
		{"training as inference", []string{"--inference", train, "--load", "0.5"}, `inference.kind: want "inference", got "training"`},
		{"missing file", []string{"--inference", "nope.json", "--load", "0.5"}, "nope.json"},
		{"zero requests", []string{"--inference", bert, "--load", "0.5", "--requests", "0"}, "--requests: want a count ≥ 1, got 0"},
		{"confidence 1", []string{"--inference", bert, "--load", "0.5", "--confidence", "1"}, "confidence: want a level in [0.5, 1) (0: the default), got 1"},
		{"rates for two of three services", []string{"--inference", bert, "--inference", bert, "--inference", bert, "--rate", "5,6"}, "--rate: want one value for every service or one per --inference (3), got 2"},
		{"second service a trainer", []string{"--inference", bert, "--inference", train, "--rate", "5"}, `others[0].profile.kind: want "inference", got "training"`},
		{"second service missing", []string{"--inference", bert, "--inference", "nope.json", "--rate", "5"}, "--inference nope.json"},
		{"bad calibration", []string{"--inference", bert, "--load", "0.5", "--calibration", train}, "--calibration"},
	})
}

// Two services: --rate once per service, each reported in the order given
// under services, the first also as inference, and each other's co-runner
// (the first's p99 is above what it predicts alone).
func TestPredictTwoServices(t *testing.T) {
	t.Parallel()
	bert, infer, train := profilesDir+"/summary-bert.json", profilesDir+"/v100-infer-200.json", profilesDir+"/v100-train-step.json"
	run := func(args ...string) predictor.Prediction {
		t.Helper()
		return predictJSON(t, append([]string{"--training", train, "--mode", "mps", "--pct", "50", "--requests", "300"}, args...)...)
	}
	both := run("--inference", infer, "--inference", bert, "--rate", "4", "--rate", "20")
	alone := run("--inference", infer, "--rate", "4")
	if len(both.Services) != 2 || both.Services[0].Name != "v100-infer-200" || both.Services[1].Name != "bert-summary" {
		t.Fatalf("services %+v, want v100-infer-200 then bert-summary", both.Services)
	}
	if both.Services[1].RateRPS != 20 || both.Inference.Name != both.Services[0].Name || both.Inference.LatencyMS != both.Services[0].LatencyMS {
		t.Errorf("inference %+v, services[1] at %v req/s: want the first service, and 20 req/s", both.Inference, both.Services[1].RateRPS)
	}
	if !(both.Inference.LatencyMS.P99 > alone.Inference.LatencyMS.P99) {
		t.Errorf("p99 %.2f ms next to bert, %.2f ms without it: want it higher", both.Inference.LatencyMS.P99, alone.Inference.LatencyMS.P99)
	}
	if len(alone.Services) != 1 || alone.Services[0].LatencyMS != alone.Inference.LatencyMS {
		t.Errorf("one service: services %+v, want the inference one alone", alone.Services)
	}
	// One --rate for both.
	if same := run("--inference", infer, "--inference", bert, "--rate", "4"); same.Services[1].RateRPS != 4 {
		t.Errorf("one --rate: the second service at %v req/s, want 4", same.Services[1].RateRPS)
	}
}
