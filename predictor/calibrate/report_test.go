package calibrate

import (
	"strings"
	"testing"

	"github.com/colocd/colocd/predictor"
)

// The report gives the fitted values, each parameter's interval and prior,
// the objective, the warnings, and each record's metrics with their errors,
// in-sample and left out.
func TestWriteReport(t *testing.T) {
	low, high, cv, cvp := 800.0, 1300.0, 0.058, 9.9
	cal := &predictor.Calibration{Source: "fitted on m.json (1 records)",
		Timeslice: &predictor.TimesliceParams{SliceUS: 1024, SwitchUS: 60, HoldoverUS: 500},
		Fit: &predictor.FitReport{Records: 1, Metrics: 1, MAPE: 0.041, CVMAPE: &cv, CV: "leave-one-record-out", Evaluations: 40, Seeds: 1,
			Weights:    map[string]float64{"p99": 1, "mean": 0.1},
			Prior:      map[string]predictor.PriorTerm{"slice_us": {Centre: 1000, LogSD: 0.5}},
			Parameters: []predictor.ParameterFit{{Name: "slice_us", Value: 1024, Low: &low, High: &high, PinnedBy: predictor.PinnedByRecords}, {Name: "switch_us", Value: 60, PinnedBy: predictor.PinnedByNone}},
			Warnings:   []string{"one record for three parameters"},
			PerRecord:  []predictor.RecordFit{{Name: "r1", Metrics: []predictor.MetricFit{{Field: "p99", Measured: 10, Predicted: 11, CVPredicted: &cvp}}}}}}
	var b strings.Builder
	if err := WriteReport(&b, cal, "cal.json"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"fitted on m.json (1 records) → cal.json",
		"time slicing: slice 1024.0 µs, switch 60.0 µs, hold-over 500.0 µs",
		"slice_us   1024   800 – 1300",
		"switch_us  60     open – open",
		"1 records, 1 metrics: MAPE in-sample 4.10 %, leave-one-record-out 5.80 % (40 model evaluations, 1 seed per record)",
		"objective weights: mean=0.1, p99=1",
		"WARNING: one record for three parameters",
		"r1      p99     10.000    11.000     +10.0 %  9.900               -1.0 %",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}
