package predictor

import (
	"testing"

	"github.com/colocd/colocd/internal/fieldtest"
)

// Two inference services on one GPU are each other's co-runners, in both
// modes: each one's p99 next to the other is above its p99 alone, its solo
// figure (no trainer) already counts the other service, and a trainer adds
// to both. Every service sees at least the scenario's requests.
func TestServicesShareTheGPU(t *testing.T) {
	t.Parallel()
	a := gappyProfile("a", KindInference, 6, 200, 20, 1)
	b := gappyProfile("b", KindInference, 10, 300, 50, 2)
	tr := gappyProfile("tr", KindTraining, 30, 400, 100, 3)
	for _, mode := range []Mode{ModeTimeslice, ModeMPS} {
		t.Run(string(mode), func(t *testing.T) {
			var pr Predictor
			predict := func(sc *Scenario) *Prediction {
				return predictIn(t, &pr, mode, sc, gappyTS, MPSParams{DRAM: 0.5, L2: 0.25, Kernels: 0.1})
			}
			aloneA := predict(&Scenario{Inference: a, Load: 0.3, Requests: 2000, Seed: 1})
			both := predict(&Scenario{Inference: a, Load: 0.3, Requests: 2000, Seed: 1, Others: []OtherService{{Profile: b, RateRPS: 100}}})
			withTrainer := predict(&Scenario{Inference: a, Load: 0.3, Requests: 2000, Seed: 1, Others: []OtherService{{Profile: b, RateRPS: 100}},
				Training: []*Profile{tr}})
			if len(both.Services) != 2 || both.Services[0].Name != "a" || both.Services[1].Name != "b" || both.Inference != both.Services[0] {
				t.Fatalf("services %+v: want a then b, the first as inference", both.Services)
			}
			if got := aloneA.Inference.LatencyMS.P99; !(both.Inference.LatencyMS.P99 > got) {
				t.Errorf("a's p99 next to b %.3f ms, alone %.3f ms: want it higher", both.Inference.LatencyMS.P99, got)
			}
			if !(both.Inference.SoloLatencyMS.P99 > aloneA.Inference.SoloLatencyMS.P99) {
				t.Errorf("a's solo p99 with b %.3f ms, without %.3f ms: the solo figure must count the other service",
					both.Inference.SoloLatencyMS.P99, aloneA.Inference.SoloLatencyMS.P99)
			}
			for j, s := range withTrainer.Services {
				if !(s.LatencyMS.P99 > both.Services[j].LatencyMS.P99) {
					t.Errorf("%s: p99 with the trainer %.3f ms, without %.3f ms: want it higher", s.Name, s.LatencyMS.P99, both.Services[j].LatencyMS.P99)
				}
				if s.SoloLatencyMS != both.Services[j].SoloLatencyMS {
					t.Errorf("%s: solo %+v with a trainer, %+v without: solo means no trainer", s.Name, s.SoloLatencyMS, both.Services[j].SoloLatencyMS)
				}
				if s.Requests != 2000 {
					t.Errorf("%s: %d requests, want 2000", s.Name, s.Requests)
				}
			}
			// Each service's figures are over its first 2,000 requests: the
			// same arrivals as alone, so its solo p99 can only rise.
			if n := both.Services[0].Requests; n != 2000 {
				t.Errorf("a: %d requests, want 2000", n)
			}
			t.Logf("a p99 %.2f ms alone, %.2f next to b, %.2f with a trainer; b p99 %.2f, %.2f with a trainer",
				aloneA.Inference.LatencyMS.P99, both.Services[0].LatencyMS.P99, withTrainer.Services[0].LatencyMS.P99,
				both.Services[1].LatencyMS.P99, withTrainer.Services[1].LatencyMS.P99)
		})
	}
}

func TestOtherServiceValidation(t *testing.T) {
	t.Parallel()
	a := gappyProfile("a", KindInference, 6, 200, 20, 1)
	tr := gappyProfile("tr", KindTraining, 30, 400, 100, 3)
	sc := &Scenario{Inference: a, Load: 0.3, Others: []OtherService{{Profile: tr, RateRPS: 5}, {Profile: a}, {Profile: nil, Load: 2}}}
	err := sc.Validate()
	fieldtest.WantText(t, err,
		`others[0].profile.kind: want "inference", got "training"`,
		"others[1].rate: want a rate in req/s (> 0) or a load fraction, got neither",
		"others[2].profile: want an inference profile",
		"others[2].load: want a fraction of solo capacity in (0,1), got 2",
	)
}
