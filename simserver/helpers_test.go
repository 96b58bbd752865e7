package simserver

import (
	"testing"

	"github.com/colocd/colocd/predictor"
)

// v100 loads the V100 testdata profile of kind afresh, a copy of its own
// each call: the 200-kernel inference service or the training step.
func v100(t *testing.T, kind predictor.Kind) *predictor.Profile {
	t.Helper()
	path := "../testdata/profiles/v100-train-step.json"
	if kind == predictor.KindInference {
		path = "../testdata/profiles/v100-infer-200.json"
	}
	p, err := predictor.LoadProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testModel is an H200 preset's MPS model of the V100 inference service.
func testModel(t *testing.T) *Model {
	t.Helper()
	cal, err := predictor.CalibrationPreset("NVIDIA H200")
	if err != nil {
		t.Fatal(err)
	}
	return &Model{Inference: v100(t, predictor.KindInference), Calibration: cal, Mode: predictor.ModeMPS, Requests: 300, Seed: 1, SMs: 132}
}
