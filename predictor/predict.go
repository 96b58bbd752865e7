package predictor

import (
	"errors"
	"fmt"
)

// Mode names a GPU sharing mode.
type Mode string

// The sharing modes colocd predicts.
const (
	ModeTimeslice Mode = "timeslice"
	ModeMPS       Mode = "mps"
)

// MinRateRPS is the lowest request rate accepted: one request per 1,000 s.
const MinRateRPS = 0.001

// MaxRateRPS is the highest request rate accepted.
const MaxRateRPS = 1e9

// RateRange is [MinRateRPS, MaxRateRPS] as errors say it.
const RateRange = "[0.001, 1e9] req/s"

// DefaultRequests is the number of simulated requests when a scenario sets none.
const DefaultRequests = 2000

// Scenario is one co-location to predict: an inference service under Poisson
// load and the training jobs that would share its GPU.
type Scenario struct {
	Inference *Profile
	Training  []*Profile
	// RateRPS is the request rate; when 0, Load sets it as a fraction of the
	// service's solo capacity (1 / solo service time).
	RateRPS float64
	Load    float64
	// Requests is the number of simulated requests (DefaultRequests when 0).
	Requests int
	// MaxEvents is the work budget: a scenario whose EventEstimate is
	// above it is refused before it is simulated, with ErrTooManyEvents
	// (0: MaxEvents).
	MaxEvents float64
	// Seed makes the arrivals reproducible.
	Seed uint64

	// MPS only: the inference server's active-thread percentage (0: 100),
	// the training jobs' (one for all, or one per job; none: 100), and the
	// device's SM count that percentages are rounded to (0: the inference
	// profile's, else DefaultDeviceSMs).
	InferencePct float64
	TrainingPct  []float64
	DeviceSMs    int

	// Confidence is the level of the reported intervals (0:
	// DefaultConfidence).
	Confidence float64
	// Done, when set and closed, ends the simulation early with
	// ErrCanceled: a caller whose deadline passed (a request's) stops
	// paying for it. It is no part of what is predicted.
	Done <-chan struct{} `json:"-"`

	// BurstSteps, when set (≥ 1), makes the first service an LLM engine
	// (continuous batching): its profile is one engine step, RateRPS is in
	// steps per second and Load is the fraction of time the engine has
	// work; steps come in bursts of this mean size that run back to back
	// (arrivalProcess). Its service_ms is then the step latency (TPOT).
	BurstSteps float64

	// Others are further inference services on the same GPU, each with its
	// own load: every service is a co-runner of the others and of the
	// trainers (under MPS, each at InferencePct).
	Others []OtherService

	// Instance, when set, is the MIG instance every context runs on: each
	// profile is scaled to it (Instance.Ops), percentages are of its SMs
	// (DeviceSMs is ignored), and solo figures are on the instance.
	Instance *Instance
}

// MaxBurstSteps bounds an engine's mean burst of back-to-back steps.
const MaxBurstSteps = 100_000

// OtherService is an inference service besides the scenario's first, at a
// rate or a load of its own capacity (one of the two, as for the first).
type OtherService struct {
	Profile *Profile
	RateRPS float64
	Load    float64
	// BurstSteps makes the service an engine, as Scenario.BurstSteps.
	BurstSteps float64
}

// services returns every service's profile, the first one's first.
func (sc *Scenario) services() []*Profile {
	out := []*Profile{sc.Inference}
	for _, o := range sc.Others {
		out = append(out, o.Profile)
	}
	return out
}

// Validate names every bad field of the scenario.
func (sc *Scenario) Validate() error {
	var c fieldChecker
	switch {
	case sc.Inference == nil:
		c.add("inference", "an inference profile", "none")
	case sc.Inference.Kind != KindInference:
		c.add("inference.kind", `"inference"`, fmt.Sprintf("%q", sc.Inference.Kind))
	}
	for i, t := range sc.Training {
		if t == nil {
			c.add(fmt.Sprintf("training[%d]", i), "a training profile", "none")
		} else if t.Kind != KindTraining {
			c.add(fmt.Sprintf("training[%d].kind", i), `"training"`, fmt.Sprintf("%q", t.Kind))
		}
	}
	n := sc.Requests
	if n <= 0 {
		n = DefaultRequests
	}
	checkRate(&c, "", sc.RateRPS, sc.Load)
	checkBurst(&c, "", sc.BurstSteps, n)
	if sc.Requests < 0 {
		c.add("requests", "a count ≥ 1 (0: the default)", fmt.Sprint(sc.Requests))
	}
	for i, o := range sc.Others {
		at := fmt.Sprintf("others[%d]", i)
		switch {
		case o.Profile == nil:
			c.add(at+".profile", "an inference profile", "none")
		case o.Profile.Kind != KindInference:
			c.add(at+".profile.kind", `"inference"`, fmt.Sprintf("%q", o.Profile.Kind))
		}
		checkRate(&c, at+".", o.RateRPS, o.Load)
		checkBurst(&c, at+".", o.BurstSteps, n)
	}
	if sc.Confidence != 0 && !(sc.Confidence >= 0.5 && sc.Confidence < 1) {
		c.add("confidence", "a level in [0.5, 1) (0: the default)", fmtFloat(sc.Confidence))
	}
	if sc.Instance != nil {
		sc.Instance.check(&c)
	}
	return c.err("scenario")
}

// checkRate checks one service's rate or load, its fields named with prefix.
func checkRate(c *fieldChecker, prefix string, rate, load float64) {
	switch {
	case rate != 0 && load != 0:
		c.add(prefix+"rate", "either a rate or a load, not both", fmt.Sprintf("rate %g and load %g", rate, load))
	case rate == 0 && load == 0:
		c.add(prefix+"rate", "a rate in req/s (> 0) or a load fraction", "neither")
	case rate != 0:
		if !(rate >= MinRateRPS && rate <= MaxRateRPS) {
			c.add(prefix+"rate", "a rate in "+RateRange, fmtFloat(rate))
		}
	default:
		if !(load > 0 && load < 1) {
			c.add(prefix+"load", "a fraction of solo capacity in (0,1)", fmtFloat(load))
		}
	}
}

// checkBurst checks an engine's mean burst (0: a request service): at
// most a tenth of the simulated steps, so that the figures cover about ten
// busy periods or more, not one back-to-back run.
func checkBurst(c *fieldChecker, prefix string, burst float64, requests int) {
	switch {
	case burst != 0 && !(burst >= 1 && burst <= MaxBurstSteps):
		c.add(prefix+"burst_steps", "a mean burst of steps in [1, 100000] (0: requests, not steps)", fmtFloat(burst))
	case burst > float64(requests)/MinBursts:
		c.add(prefix+"burst_steps", fmt.Sprintf("at most a tenth of the %d simulated steps (more requests, or a smaller burst)", requests), fmtFloat(burst))
	}
}

// MinBursts is how many busy periods an engine's simulated steps hold at
// least, on average: a burst is at most requests / MinBursts steps.
const MinBursts = 10

// Prediction is the model's answer for one scenario; its JSON form is what
// `colocd predict --json` prints.
type Prediction struct {
	Mode Mode `json:"mode"`
	// Inference is the first service's prediction; Services holds every
	// service's, in the scenario's order (the first is Inference).
	Inference InferencePrediction   `json:"inference"`
	Services  []InferencePrediction `json:"services"`
	Training  []TrainingPrediction  `json:"training"`
	Timeslice *TimesliceParams      `json:"timeslice,omitempty"`
	MPS       *MPSUsed              `json:"mps,omitempty"`
	// Blend is the simulator's weight when the calibration blends it with
	// the naive slowdown (Blend.Apply); absent, the simulator alone.
	Blend *float64 `json:"blend_weight,omitempty"`
	// Events is the number of simulated kernel events (for benchmarks).
	Events int `json:"events"`
}

// InferencePrediction is the inference service's latency, co-located and solo.
type InferencePrediction struct {
	Name     string  `json:"name"`
	RateRPS  float64 `json:"rate_rps"`
	Load     float64 `json:"load"`
	Requests int     `json:"requests"`
	// BurstSteps is set for an engine (Scenario.BurstSteps): each request
	// is then one engine step, RateRPS is in steps per second, Load is the
	// fraction of time the engine has work, and ServiceMS is the step
	// latency.
	BurstSteps    float64     `json:"burst_steps,omitempty"`
	LatencyMS     Percentiles `json:"latency_ms"`
	ServiceMS     Percentiles `json:"service_ms"`
	SoloLatencyMS Percentiles `json:"solo_latency_ms"`
	SoloServiceMS Percentiles `json:"solo_service_ms"`
	// LatencyInterval and ServiceInterval bound each figure: the sampling
	// error of the simulated requests (batch means), widened by the
	// calibration's parameter uncertainty when it carries one
	// (WidenByParameters).
	LatencyInterval Intervals `json:"latency_ms_interval"`
	ServiceInterval Intervals `json:"service_ms_interval"`
	// ParameterUncertainty says the intervals include the calibration's.
	ParameterUncertainty bool `json:"parameter_uncertainty,omitempty"`
	// ModelUncertainty says the intervals include the model's own error
	// as the calibration measured it (WidenByModelError).
	ModelUncertainty bool `json:"model_uncertainty,omitempty"`
}

// TrainingPrediction is one training job's iteration time, co-located and solo.
// The times are null for a trainer whose iteration is unknown (a summary with
// no iteration_ms); Slowdown (co-located / solo time per unit of work) is
// always set once the simulation has run (0 only for a run of no time).
type TrainingPrediction struct {
	Name            string   `json:"name"`
	IterationMS     *float64 `json:"iteration_ms"`
	SoloIterationMS *float64 `json:"solo_iteration_ms"`
	Slowdown        float64  `json:"slowdown"`
	// Throughput is the share of its solo speed the job keeps, 1 /
	// Slowdown (0 when Slowdown is): the work it does per second over what
	// it does alone, comparable between jobs, what joint allocation values.
	Throughput float64 `json:"throughput"`
	// IterationsPerS is its iterations per second co-located, Throughput /
	// the solo iteration time; null when the iteration is unknown.
	IterationsPerS *float64 `json:"iterations_per_s"`
}

// Predictor runs predictions and keeps the simulators' buffers between them.
// Not safe for concurrent use; make one per goroutine.
type Predictor struct {
	ts       timesliceSim
	soloTS   timesliceSim
	mps      mpsSim
	soloMPS  mpsSim
	arrivals [][]float64 // per service
	rates    []float64   // per service
	bursts   []float64   // per service
	solo     []float64
	sorted   []float64
	svcOps   [][]Op // per service
	training [][]Op
	// svcUS and trainUS are each workload's solo unit in µs, as it runs
	// (on the scenario's instance, when it has one).
	svcUS, trainUS []float64
}

// ops returns a workload's ops as the scenario runs them.
func (sc *Scenario) ops(p *Profile) []Op {
	if sc.Instance != nil {
		return sc.Instance.Ops(p)
	}
	return p.Expanded()
}

// prepare expands the scenario's workloads and draws every service's
// arrivals (arrivalsFor); pr.rates holds each service's rate.
func (pr *Predictor) prepare(sc *Scenario) error {
	pr.ts.stop, pr.soloTS.stop, pr.mps.stop, pr.soloMPS.stop = sc.Done, sc.Done, sc.Done, sc.Done
	svcs := sc.services()
	pr.svcOps = pr.svcOps[:0]
	pr.rates, pr.bursts = pr.rates[:0], pr.bursts[:0]
	pr.svcUS, pr.trainUS = pr.svcUS[:0], pr.trainUS[:0]
	for j, p := range svcs {
		ops := sc.ops(p)
		pr.svcOps = append(pr.svcOps, ops)
		pr.svcUS = append(pr.svcUS, opsUS(ops))
		rate, load, burst := sc.RateRPS, sc.Load, sc.BurstSteps
		if j > 0 {
			o := &sc.Others[j-1]
			rate, load, burst = o.RateRPS, o.Load, o.BurstSteps
		}
		pr.bursts = append(pr.bursts, burst)
		if rate == 0 {
			rate = load * 1e6 / pr.svcUS[j]
		}
		pr.rates = append(pr.rates, rate)
	}
	n := sc.Requests
	if n == 0 {
		n = DefaultRequests
	}
	var err error
	if pr.arrivals, err = arrivalsFor(pr.arrivals, pr.rates, pr.bursts, n, sc.Seed); err != nil {
		return err
	}
	pr.training = pr.training[:0]
	for _, t := range sc.Training {
		ops := sc.ops(t)
		pr.training = append(pr.training, ops)
		pr.trainUS = append(pr.trainUS, opsUS(ops))
	}
	return nil
}

// Predict predicts the scenario under mode with the calibration's
// parameters for that mode: the one place that chooses a model. When the
// calibration says how well its parameters are pinned, the intervals carry
// that uncertainty too (WidenByParameters); when it blends the simulator
// with the naive slowdown, every figure is that blend (Blend.Apply); and
// when it says how far its fit missed the measurements, the model's own
// error (WidenByModelError, on the blend's misses when it blends).
func (pr *Predictor) Predict(sc *Scenario, mode Mode, cal *Calibration) (*Prediction, error) {
	switch mode {
	case ModeMPS:
		pred, err := pr.PredictMPS(sc, cal.MPS.Params())
		if err != nil {
			return nil, err
		}
		if cal.MPS != nil && cal.MPS.Fit != nil && len(cal.MPS.Fit.Parameters) > 0 {
			if err := pr.WidenMPSByParameters(sc, cal.MPS.Params(), cal.MPS.Fit.Parameters, pred); err != nil {
				return nil, err
			}
		}
		if cal.MPS != nil {
			cal.MPS.Blend.Apply(pred)
			WidenByModelError(cal.MPS.Blend.BlendedFit(cal.MPS.Fit), pred)
		}
		return pred, nil
	case ModeTimeslice:
		if cal.Timeslice == nil {
			return nil, errors.New("predict timeslice: the calibration has no timeslice section")
		}
		pred, err := pr.PredictTimeslice(sc, *cal.Timeslice)
		if err != nil {
			return nil, err
		}
		if cal.Fit != nil && len(cal.Fit.Parameters) > 0 {
			if err := pr.WidenByParameters(sc, *cal.Timeslice, cal.Fit.Parameters, pred); err != nil {
				return nil, err
			}
		}
		cal.Blend.Apply(pred)
		WidenByModelError(cal.Blend.BlendedFit(cal.Fit), pred)
		return pred, nil
	}
	return nil, fmt.Errorf("predict: mode: want %q or %q, got %q", ModeTimeslice, ModeMPS, mode)
}

// PredictTimeslice predicts the scenario under time slicing with params.
func (pr *Predictor) PredictTimeslice(sc *Scenario, params TimesliceParams) (*Prediction, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	if err := sc.checkBudget(ModeTimeslice); err != nil {
		return nil, err
	}
	if err := params.Validate(); err != nil {
		return nil, err
	}
	if err := pr.prepare(sc); err != nil {
		return nil, fmt.Errorf("predict timeslice: %w", err)
	}
	res, err := pr.ts.run(pr.svcOps, pr.training, pr.arrivals, params)
	if err != nil {
		return nil, fmt.Errorf("predict timeslice: %w", err)
	}
	// Solo, with several services: the services without the trainers.
	var solo *simResult
	if len(pr.svcOps) > 1 {
		if solo, err = pr.soloTS.run(pr.svcOps, nil, pr.arrivals, params); err != nil {
			return nil, fmt.Errorf("predict timeslice: %w", err)
		}
	}
	pred := pr.prediction(ModeTimeslice, sc, res, solo)
	pred.Timeslice = &params
	return pred, nil
}

// prediction assembles what both models report from a simulation result:
// each service's co-located percentiles and its solo ones (from solo, the
// services without the trainers, when given; else the FIFO queue over the
// same arrivals), and each trainer's iteration time.
func (pr *Predictor) prediction(mode Mode, sc *Scenario, res, solo *simResult) *Prediction {
	pred := &Prediction{Mode: mode, Events: res.events, Training: []TrainingPrediction{}}
	conf := sc.Confidence
	if conf == 0 {
		conf = DefaultConfidence
	}
	// Every service's figures are over its first n requests; those that
	// arrive after them only interfere (arrivalsFor).
	n := sc.Requests
	if n == 0 {
		n = DefaultRequests
	}
	for j, p := range sc.services() {
		soloUS := pr.svcUS[j]
		in := InferencePrediction{
			Name:       p.Name,
			RateRPS:    pr.rates[j],
			Load:       pr.rates[j] * soloUS / 1e6,
			Requests:   n,
			BurstSteps: pr.bursts[j],
		}
		in.LatencyMS, in.LatencyInterval = pr.summarise(res.svc[j].latency[:n], conf)
		in.ServiceMS, in.ServiceInterval = pr.summarise(res.svc[j].service[:n], conf)
		if solo != nil {
			pr.sorted = append(pr.sorted[:0], solo.svc[j].latency[:n]...)
			in.SoloLatencyMS = percentilesUS(pr.sorted)
			pr.sorted = append(pr.sorted[:0], solo.svc[j].service[:n]...)
			in.SoloServiceMS = percentilesUS(pr.sorted)
		} else {
			pr.solo = growFloats(pr.solo, n)
			soloQueue(pr.arrivals[j][:n], soloUS, pr.solo)
			in.SoloLatencyMS = percentilesUS(pr.solo)
			s := soloUS / 1000
			in.SoloServiceMS = Percentiles{Mean: s, P50: s, P90: s, P95: s, P99: s}
		}
		pred.Services = append(pred.Services, in)
	}
	pred.Inference = pred.Services[0]
	for i, t := range sc.Training {
		tp := TrainingPrediction{Name: t.Name}
		solo := pr.trainUS[i]
		if p := res.progress[i]; p > 0 { // always, once any time has passed
			tp.Slowdown = res.endUS / p / solo
			tp.Throughput = 1 / tp.Slowdown
		}
		if t.IterationKnown() {
			soloMS := solo / 1000
			tp.SoloIterationMS = &soloMS
			if tp.Slowdown > 0 {
				it := soloMS * tp.Slowdown
				tp.IterationMS = &it
				ips := 1000 / it
				tp.IterationsPerS = &ips
			}
		}
		pred.Training = append(pred.Training, tp)
	}
	return pred
}

// summarise returns the percentiles of xs (µs, in arrival order; left
// as they are) and their intervals at conf.
func (pr *Predictor) summarise(xs []float64, conf float64) (Percentiles, Intervals) {
	pr.sorted = append(pr.sorted[:0], xs...)
	p := percentilesUS(pr.sorted)
	return p, sampleIntervals(xs, pr.sorted, p, conf)
}
