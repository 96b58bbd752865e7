package calibrate

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/colocd/colocd/internal/fieldtest"
	"github.com/colocd/colocd/predictor"
)

func TestLoadMeasurementsResolvesPaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	inf := uniformProfile("inf", predictor.KindInference, 2, 100, 5)
	if err := predictor.SaveProfile(filepath.Join(dir, "inf.json"), inf); err != nil {
		t.Fatal(err)
	}
	doc := `{"format":"colocd.measurements/v1","source":"test","device":{"name":"NVIDIA H200","sms":132},"records":[
		{"name":"a","mode":"timeslice","inference":"inf.json","training":[{"format":"colocd.profile/v1","name":"t","kind":"training",
		  "summary":{"iteration_ms":50,"gpu_util":0.9,"mem_util":0.3}}],"rate_rps":100,
		 "measured":{"latency_ms":{"p99":2.5},"training_iteration_ms":55}}]}`
	path := filepath.Join(dir, "m.json")
	os.WriteFile(path, []byte(doc), 0o644)
	m, err := LoadMeasurements(path)
	if err != nil {
		t.Fatal(err)
	}
	r := m.Records[0]
	if r.Inference.Profile == nil || r.Inference.Profile.Name != "inf" || r.Training[0].Profile.Name != "t" {
		t.Fatalf("profiles not resolved: %+v", r)
	}
	got := r.metrics(0)
	want := []metric{{record: 0, quantity: "latency_ms", key: "p99", value: 2.5}, {record: 0, quantity: "training_iteration_ms", job: 0, value: 55}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("metrics %+v, want %+v (missing fields are skipped, not zero)", got, want)
	}
	if got[1].field() != "training_iteration_ms[0]" || got[0].field() != "latency_ms.p99" {
		t.Errorf("fields %q %q", got[0].field(), got[1].field())
	}
}

func TestParseMeasurementsErrors(t *testing.T) {
	t.Parallel()
	inline := `{"format":"colocd.profile/v1","name":"i","kind":"inference","summary":{"latency_ms":2,"gpu_util":0.5,"mem_util":0.1}}`
	tests := []struct {
		name, doc string
		want      []string
	}{
		{"format and no records", `{"format":"x","records":[]}`, []string{`format: want "colocd.measurements/v1", got "x"`, "records: want at least one record"}},
		{"mps without pct", `{"format":"colocd.measurements/v1","records":[{"name":"a","mode":"mps","inference":` + inline + `,"rate_rps":5,
			"measured":{"service_ms":{"mean":3}}}]}`, []string{"records[0].training_pct: want an active-thread percentage in (0,100]"}},
		{"iteration count", `{"format":"colocd.measurements/v1","records":[{"name":"a","mode":"timeslice","inference":` + inline + `,"rate_rps":5,
			"measured":{"training_iteration_ms":[3,4]}}]}`, []string{"records[0].measured.training_iteration_ms: want one iteration time per training job (0), got 2 values"}},
		{"nothing measured", `{"format":"colocd.measurements/v1","records":[{"name":"a","mode":"timeslice","inference":` + inline + `,"rate_rps":5,"measured":{}}]}`,
			[]string{"records[0].measured: want at least one of latency_ms"}},
		{"training as inference", `{"format":"colocd.measurements/v1","records":[{"name":"a","mode":"timeslice","inference":` + inline + `,"training":[` + inline + `],"rate_rps":5,
			"measured":{"latency_ms":{"mean":1}}}]}`, []string{`records[0].training[0].kind: want "training", got "inference"`}},
		{"negative metric", `{"format":"colocd.measurements/v1","records":[{"name":"a","mode":"timeslice","inference":` + inline + `,"rate_rps":5,
			"measured":{"latency_ms":{"mean":-1}}}]}`, []string{"records[0].measured.latency_ms.mean: want a finite number > 0, got -1"}},
		{"iteration of a stream trainer", `{"format":"colocd.measurements/v1","records":[{"name":"a","mode":"timeslice","inference":` + inline + `,"rate_rps":5,
			"training":[{"format":"colocd.profile/v1","name":"s","kind":"training","summary":{"gpu_util":0.5,"mem_util":0.1}}],
			"measured":{"training_iteration_ms":40}}]}`, []string{"records[0].measured.training_iteration_ms[0]: want no value: the training profile has no iteration"}},
		{"rate below the minimum", `{"format":"colocd.measurements/v1","device":{"sms":-3},"records":[{"name":"a","mode":"timeslice","inference":` + inline + `,"rate_rps":1e-9,
			"measured":{"latency_ms":{"mean":1}}}]}`, []string{"records[0].rate_rps: want a rate in [0.001, 1e9] req/s", "device.sms: want an SM count ≥ 0"}},
		{"a typo inside an inline profile", "{\"format\":\"colocd.measurements/v1\",\"records\":[{\"name\":\"a\",\n\"inference\":{\"nmae\":\"i\"}}]}",
			[]string{"line 2: records[0].inference.nmae: want a known key, got an unknown key"}},
		{"no inference", `{"format":"colocd.measurements/v1","records":[{"name":"a","mode":"timeslice","rate_rps":5,"measured":{"latency_ms":{"mean":1}}}]}`,
			[]string{"records[0].inference: want a profile path or an inline profile"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseMeasurements([]byte(tt.doc), t.TempDir())
			fieldtest.WantText(t, err, tt.want...)
		})
	}
}

func TestCalibrationLoadMerges(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(path, []byte(`{"format":"colocd.calibration/v1","source":"mps only","mps":{"coefficients":{"dram":0.4}}}`), 0o644)
	c, err := predictor.LoadCalibration(path)
	if err != nil {
		t.Fatal(err)
	}
	if *c.Timeslice != *predictor.DefaultCalibration().Timeslice || c.MPS.Coefficients["dram"] != 0.4 ||
		!strings.HasPrefix(c.Source, "mps only; timeslice otherwise from: built-in default") {
		t.Errorf("merged calibration %+v: want the default time-slicing values, the file's mps section, and a source that says so", c)
	}
	_, err = predictor.ParseCalibration([]byte(`{"format":"colocd.calibration/v1","timeslice":{"slice_us":0,"switch_us":-1,"holdover_us":1},"mps":{"coefficients":{"l2":-2}}}`))
	fieldtest.WantText(t, err, "timeslice.slice_us: want a slice in [1, 1e6] µs, got 0", "timeslice.switch_us", "mps.coefficients.l2")
}

func FuzzParseMeasurements(f *testing.F) {
	inline := `{"format":"colocd.profile/v1","name":"i","kind":"inference","summary":{"latency_ms":2,"gpu_util":0.5,"mem_util":0.1}}`
	f.Add([]byte(`{"format":"colocd.measurements/v1","records":[{"name":"a","mode":"timeslice","inference":` + inline + `,"rate_rps":5,"measured":{"latency_ms":{"p99":3}}}]}`))
	f.Add([]byte(`{"format":"colocd.measurements/v1","records":[{"name":"a","mode":"mps","training_pct":50,"inference":"x.json","training":[],"rate_rps":5,"measured":{"training_iteration_ms":[1]}}]}`))
	f.Add([]byte(`{"records":[{"measured":{"training_iteration_ms":"x"}}]}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMeasurements(data, dir)
		if err != nil {
			return
		}
		for i := range m.Records {
			r := &m.Records[i]
			if r.Inference.Profile == nil || r.Inference.Profile.Kind != predictor.KindInference {
				t.Fatalf("record %d accepted without an inference profile", i)
			}
			for _, mt := range r.metrics(i) {
				if !(mt.value > 0) {
					t.Fatalf("record %d metric %s = %v accepted", i, mt.field(), mt.value)
				}
			}
		}
	})
}

func FuzzParseCalibration(f *testing.F) {
	f.Add([]byte(`{"format":"colocd.calibration/v1","source":"x","timeslice":{"slice_us":1024,"switch_us":60,"holdover_us":500}}`))
	f.Add([]byte(`{"format":"colocd.calibration/v1","mps":{"coefficients":{"dram":0.4,"l2":0.1}},"fit":{"records":3,"metrics":9,"mape":0.1,"evaluations":5}}`))
	f.Add([]byte(`{"format":"colocd.calibration/v1","timeslice":{"slice_us":1024,"switch_us":60,"holdover_us":500},"blend":{"weight":0.25,"naive_ratio":{"latency_ms.p99":1.8,"training_iteration_ms":1.1},` +
		`"cv":"leave-one-workload-out","cv_mape":{"simulator":0.25,"naive":0.17,"blend":0.15,"metrics":198},"grid":[{"weight":0,"cv_mape":0.17}],"fold_weights":[0.25,0.5,0]},` +
		`"fit":{"records":2,"metrics":2,"mape":0.1,"evaluations":5,"per_record":[{"name":"a","metrics":[{"field":"latency_ms.p99","measured":3,"predicted":4,"cv_predicted":5,"naive":3.1,"cv_naive":2.9}]}]}}`))
	f.Add([]byte(`{"format":"colocd.calibration/v1","mps":{"coefficients":{"dram":0.4},"blend":{"weight":0,"naive_ratio":{"service_ms.mean":1.3}}}}`))
	f.Add([]byte(`{"format":"colocd.calibration/v1","mps":{"coefficients":{}},"blend":{"weight":1.5,"naive_ratio":{"latency_ms.p42":-1}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := predictor.ParseCalibration(data)
		if err != nil {
			return
		}
		merged := predictor.DefaultCalibration().Merge(c)
		if err := merged.Validate(); err != nil {
			t.Fatalf("merged calibration invalid: %v", err)
		}
		if err := merged.Timeslice.Validate(); err != nil {
			t.Fatalf("accepted time-slicing parameters are invalid: %v", err)
		}
		blends := []*predictor.Blend{merged.Blend}
		if merged.MPS != nil {
			blends = append(blends, merged.MPS.Blend)
		}
		for _, b := range blends {
			if w := b.SimulatorWeight(); !(w >= 0 && w <= 1) {
				t.Fatalf("accepted blend weight %v", w)
			}
			if b == nil {
				continue
			}
			for k, r := range b.NaiveRatio {
				if !slices.Contains(predictor.BlendFigures, k) || !(r > 0 && r <= predictor.MaxNaiveRatio) {
					t.Fatalf("accepted naive ratio %s = %v", k, r)
				}
			}
		}
	})
}
