package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/colocd/colocd/internal/testfiles"
	"github.com/colocd/colocd/predictor"
)

func TestCalibrateErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := testfiles.Write(t, dir, "bad.json", `{"format":"colocd.measurements/v1","records":[{"name":"x","mode":"nvlink","inference":"missing.json","rate_rps":-1,
		"measured":{"latency_ms":{"p42":3}}}]}`)
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"no measurements", []string{"--out", "x"}, []string{"--measurements: want the path"}},
		{"no out", []string{"--measurements", bad}, []string{"--out: want the path"}},
		{"every bad field named", []string{"--measurements", bad, "--out", filepath.Join(dir, "c.json")}, []string{
			`records[0].mode: want "timeslice" or "mps", got "nvlink"`,
			"records[0].inference: want a readable, valid profile",
			"records[0].rate_rps: want a rate in [0.001, 1e9] req/s, got -1",
			`records[0].measured.latency_ms.p42: want one of mean, p50, p90, p95, p99`,
		}},
		{"unknown weight", []string{"--measurements", bad, "--out", "x", "--weight", "p42=1"}, []string{"weights.p42: want one of [mean p50 p90 p95 p99 iteration]"}},
		{"weight not a number", []string{"--measurements", bad, "--out", "x", "--weight", "p99=high"}, []string{"--weight p99=high: want a number ≥ 0"}},
		{"negative weight", []string{"--measurements", bad, "--out", "x", "--weight", "p99=-1"}, []string{"weights.p99: want a weight ≥ 0, got -1"}},
		{"no weight above 0", []string{"--measurements", bad, "--out", "x", "--weight", "p99=0"}, []string{"weights: want at least one weight above 0"}},
		{"too many seeds", []string{"--measurements", bad, "--out", "x", "--seeds", "99"}, []string{"--seeds: want a count from 1 to 16 (0: 3), got 99"}},
		{"noise above 1", []string{"--measurements", bad, "--out", "x", "--noise", "2"}, []string{"--noise: want a fraction in (0, 1] (0: 0.05), got 2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runCLI(t, append([]string{"calibrate"}, tt.args...)...)
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, want it to contain %q", err, w)
				}
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "c.json")); !os.IsNotExist(err) {
		t.Errorf("a failed calibration left a file behind (stat: %v)", err)
	}
}

// TestCalibrateMPSRoundTrip does the same for MPS: records predicted under
// known contention coefficients at three training percentages come back as a
// calibration whose mps section finds them again.
func TestCalibrateMPSRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, doc string) string { return testfiles.Write(t, dir, name, doc) }
	op := func(dur, sm, dram, l2 float64) string {
		return fmt.Sprintf(`{"dur_us":%g,"gap_us":5,"sm":%g,"occupancy":0.5,"dram":%g,"l2":%g}`, dur, sm, dram, l2)
	}
	inf := write("inf.json", `{"format":"colocd.profile/v1","name":"inf","kind":"inference","device":{"name":"NVIDIA H200","sms":132},"ops":[`+
		op(300, 0.6, 0.7, 0.3)+","+op(200, 0.9, 0.2, 0.6)+","+op(250, 0.5, 0.5, 0.5)+`]}`)
	tr := write("tr.json", `{"format":"colocd.profile/v1","name":"tr","kind":"training","device":{"name":"NVIDIA H200","sms":132},"ops":[`+
		op(800, 0.8, 0.6, 0.2)+","+op(500, 0.7, 0.1, 0.7)+","+op(900, 1, 0.3, 0.3)+`]}`)
	// A second service heavy on L2 where the first is heavy on DRAM: with
	// one service alone the two coefficients trade off against each other.
	inf2 := write("inf2.json", `{"format":"colocd.profile/v1","name":"inf2","kind":"inference","device":{"name":"NVIDIA H200","sms":132},"ops":[`+
		op(300, 0.6, 0.1, 0.9)+","+op(200, 0.4, 0.2, 0.8)+`]}`)
	truth := write("truth.json", `{"format":"colocd.calibration/v1","source":"test truth","mps":{"coefficients":{"dram":0.6,"l2":0.3,"kernels":0.2}}}`)
	var recs []string
	for i, pct := range []int{100, 60, 30} {
		for j, service := range []string{inf, inf2} {
			rate := 600
			p := predictJSON(t, "--mode", "mps", "--inference", service, "--training", tr, "--pct", fmt.Sprint(pct),
				"--rate", fmt.Sprint(rate), "--requests", "300", "--calibration", truth)
			recs = append(recs, fmt.Sprintf(`{"name":"r%d%d","mode":"mps","training_pct":%d,"inference":%q,"training":["tr.json"],"rate_rps":%d,"requests":300,
				"measured":{"latency_ms":{"mean":%g},"service_ms":{"mean":%g},"training_iteration_ms":%g}}`,
				i, j, pct, filepath.Base(service), rate, p.Inference.LatencyMS.Mean, p.Inference.ServiceMS.Mean, *p.Training[0].IterationMS))
		}
	}
	// The fit sees the very arrivals the measurements came from, so it
	// must find the truth exactly.
	stdout, cal := calibrateRecords(t, dir, `{"name":"NVIDIA H200","sms":132}`, recs)
	if !strings.Contains(stdout, "mps: contention dram") || !strings.Contains(stdout, "6 records, 18 metrics") {
		t.Errorf("output lacks the mps fit:\n%s", stdout)
	}
	got := cal.MPS.Params()
	for name, pair := range map[string][2]float64{"dram": {got.DRAM, 0.6}, "l2": {got.L2, 0.3}, "kernels": {got.Kernels, 0.2}} {
		if math.Abs(pair[0]-pair[1])/pair[1] > 0.05 {
			t.Errorf("%s = %.4f, truth %.2f", name, pair[0], pair[1])
		}
	}
	if cal.Fit != nil {
		t.Errorf("a time-slicing fit was reported with no time-slicing records: %+v", cal.Fit)
	}
}

// TestCalibrateChoosesBlend: a cross-validated calibration reports, per
// mode, the held-out error of the simulator, the naive slowdown and the
// blend, and writes the blend chosen; records the simulator made under
// known coefficients leave it the simulator alone. --no-blend writes none.
func TestCalibrateChoosesBlend(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, doc string) string { return testfiles.Write(t, dir, name, doc) }
	op := func(dur, sm, dram float64) string {
		return fmt.Sprintf(`{"dur_us":%g,"gap_us":5,"sm":%g,"occupancy":0.5,"dram":%g,"l2":0.2}`, dur, sm, dram)
	}
	dev := `"device":{"name":"NVIDIA H200","sms":132}`
	inf := write("inf.json", `{"format":"colocd.profile/v1","name":"inf","kind":"inference",`+dev+`,"ops":[`+op(300, 0.6, 0.7)+","+op(200, 0.9, 0.2)+`]}`)
	trs := []string{
		write("tr1.json", `{"format":"colocd.profile/v1","name":"tr1","kind":"training",`+dev+`,"ops":[`+op(800, 0.8, 0.6)+","+op(500, 0.7, 0.1)+`]}`),
		write("tr2.json", `{"format":"colocd.profile/v1","name":"tr2","kind":"training",`+dev+`,"ops":[`+op(400, 1, 0.3)+","+op(900, 0.5, 0.8)+`]}`),
	}
	truth := write("truth.json", `{"format":"colocd.calibration/v1","source":"test truth","mps":{"coefficients":{"dram":0.6,"l2":0.3,"kernels":0.2}}}`)
	var recs []string
	for _, tr := range trs {
		for _, pct := range []int{100, 50, 25} {
			p := predictJSON(t, "--mode", "mps", "--inference", inf, "--training", tr, "--pct", fmt.Sprint(pct),
				"--rate", "600", "--requests", "200", "--calibration", truth, "--seed", "7")
			recs = append(recs, fmt.Sprintf(`{"name":"%s@%d","mode":"mps","training_pct":%d,"inference":"inf.json","training":[%q],"rate_rps":600,"requests":200,"seed":7,
				"measured":{"latency_ms":{"mean":%g,"p99":%g},"training_iteration_ms":%g}}`,
				filepath.Base(tr), pct, pct, filepath.Base(tr), p.Inference.LatencyMS.Mean, p.Inference.LatencyMS.P99, *p.Training[0].IterationMS))
		}
	}
	meas := write("measurements.json", `{"format":"colocd.measurements/v1","source":"generated by colocd predict for a test",`+dev+`,"records":[`+strings.Join(recs, ",")+`]}`)
	out := filepath.Join(dir, "cal.json")
	stdout, _, err := runCLI(t, "calibrate", "--measurements", meas, "--out", out, "--seeds", "1")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"mps, held out (leave-one-workload-out, 18 metrics): simulator", "naive slowdown", "blend chosen: simulator weight 1 "} {
		if !strings.Contains(stdout, w) {
			t.Errorf("report lacks %q:\n%s", w, stdout)
		}
	}
	cal, err := predictor.LoadCalibration(out)
	if err != nil {
		t.Fatal(err)
	}
	b := cal.MPS.Blend
	if b == nil || b.CVMAPE == nil || len(b.FoldWeights) != 2 || b.NaiveRatio["latency_ms.p99"] <= 0 {
		t.Fatalf("mps blend %+v: want the choice, its folds and the naive ratios", b)
	}
	if !(b.CVMAPE.Simulator < b.CVMAPE.Naive) {
		t.Errorf("held out: simulator %v, naive %v: want the simulator, whose records these are, ahead", b.CVMAPE.Simulator, b.CVMAPE.Naive)
	}
	if _, _, err := runCLI(t, "calibrate", "--measurements", meas, "--out", out, "--seeds", "1", "--no-blend"); err != nil {
		t.Fatal(err)
	}
	if cal, err = predictor.LoadCalibration(out); err != nil || cal.MPS.Blend != nil {
		t.Errorf("--no-blend: blend %+v (err %v), want none", cal.MPS.Blend, err)
	}
}
