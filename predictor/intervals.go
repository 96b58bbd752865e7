package predictor

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// DefaultConfidence is the level of the intervals a prediction reports.
const DefaultConfidence = 0.95

// Batches is the number of batches of consecutive requests the sampling
// error is estimated from (batch means): requests that queue behind each
// other are correlated, so the spread of batch figures, not of single
// requests, measures it.
const Batches = 20

// Interval bounds one figure, in ms: [low, high].
type Interval [2]float64

// Intervals bound each figure of a Percentiles at Confidence.
type Intervals struct {
	Confidence float64  `json:"confidence"`
	Mean       Interval `json:"mean"`
	P50        Interval `json:"p50"`
	P90        Interval `json:"p90"`
	P95        Interval `json:"p95"`
	P99        Interval `json:"p99"`
}

// Get returns the named interval ("mean", "p50", …) and whether the name
// is known.
func (iv *Intervals) Get(key string) (got Interval, ok bool) {
	iv.each(func(k string, in *Interval) {
		if k == key {
			got, ok = *in, true
		}
	})
	return got, ok
}

// each calls f on every interval with its key.
func (iv *Intervals) each(f func(key string, in *Interval)) {
	f("mean", &iv.Mean)
	f("p50", &iv.P50)
	f("p90", &iv.P90)
	f("p95", &iv.P95)
	f("p99", &iv.P99)
}

// tQuantile is Student's t quantile for a two-sided interval at conf with
// dof degrees of freedom.
func tQuantile(conf float64, dof int) float64 {
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(dof)}.Quantile((1 + conf) / 2)
}

// tDefault is the quantile nearly every prediction's intervals take: at
// DefaultConfidence with Batches−1 degrees of freedom. The inverse
// incomplete beta behind it costs a small simulation (a calibration's
// records of a few hundred requests) as much as a tenth of its time.
var tDefault = tQuantile(DefaultConfidence, Batches-1)

// sampleIntervals bounds the mean and the percentiles of xs (µs, in
// arrival order) at conf by batch means; sorted is xs sorted. The mean's
// interval is the batch means' t interval. A quantile q̂ of p is bounded
// through the fraction of requests at or below it: its batch fractions
// give that fraction's t interval p ± h (never narrower than independent
// requests would give), and the interval is the quantiles at p − h and
// p + h. With fewer than 2·Batches requests every interval is the point.
func sampleIntervals(xs, sorted []float64, point Percentiles, conf float64) Intervals {
	n := len(xs)
	if n < 2*Batches {
		pt := func(v float64) Interval { return Interval{v, v} }
		return Intervals{Confidence: conf, Mean: pt(point.Mean), P50: pt(point.P50), P90: pt(point.P90), P95: pt(point.P95), P99: pt(point.P99)}
	}
	iv := Intervals{Confidence: conf}
	t := tDefault
	if conf != DefaultConfidence {
		t = tQuantile(conf, Batches-1)
	}
	size := n / Batches // the last batch takes the remainder
	batch := func(b int) []float64 {
		if b == Batches-1 {
			return xs[b*size:]
		}
		return xs[b*size : (b+1)*size]
	}
	// The mean.
	var m, s2 float64
	var ms [Batches]float64
	for b := range Batches {
		var sum float64
		for _, x := range batch(b) {
			sum += x
		}
		ms[b] = sum / float64(len(batch(b)))
		m += ms[b] / Batches
	}
	for _, v := range ms {
		s2 += (v - m) * (v - m)
	}
	h := t * math.Sqrt(s2/(Batches-1)/Batches)
	iv.Mean = Interval{point.Mean - h/1000, point.Mean + h/1000}
	// The percentiles.
	ps := [4]float64{0.5, 0.9, 0.95, 0.99}
	vs := [4]float64{point.P50, point.P90, point.P95, point.P99}
	var out [4]Interval
	for j, p := range ps {
		cut := quantileSorted(sorted, p) // in µs, as xs: no rounding through ms
		var fm, fs2 float64
		for b := range Batches {
			var k int
			for _, x := range batch(b) {
				if x <= cut {
					k++
				}
			}
			ms[b] = float64(k) / float64(len(batch(b)))
			fm += ms[b] / Batches
		}
		for _, v := range ms {
			fs2 += (v - fm) * (v - fm)
		}
		h := t * math.Sqrt(fs2/(Batches-1)/Batches)
		h = max(h, t*math.Sqrt(p*(1-p)/float64(n)))
		lo := quantileSorted(sorted, max(0, p-h)) / 1000
		hi := quantileSorted(sorted, min(1, p+h)) / 1000
		out[j] = Interval{min(lo, vs[j]), max(hi, vs[j])}
	}
	iv.P50, iv.P90, iv.P95, iv.P99 = out[0], out[1], out[2], out[3]
	return iv
}

// addInQuadrature widens the interval around its point c by another source
// of error whose squared rise is up2 and squared fall down2: each half-width
// becomes the root of the sum of the squares. A latency is never negative,
// so the lower end stops at 0.
func (in *Interval) addInQuadrature(c, up2, down2 float64) {
	lo, hi := c-in[0], in[1]-c
	in[0] = max(0, c-math.Sqrt(lo*lo+down2))
	in[1] = c + math.Sqrt(hi*hi+up2)
}

// openFactor is how far a parameter interval open on one side is taken to
// reach: the end of the range the calibration's profile searched.
const openFactor = 8

// WidenByParameters widens every service's intervals in pred by the
// calibration's parameter uncertainty: pred is predicted again with each
// fitted parameter at each end of its 95 % interval (an open end at 8
// times or an eighth of the value), the others as fitted, on the same
// arrivals. For every figure the rises above the point (and the falls
// below it) of the parameters add in quadrature to the sampling error's.
// Parameters other than the three time-slicing ones are ignored.
func (pr *Predictor) WidenByParameters(sc *Scenario, params TimesliceParams, fits []ParameterFit, pred *Prediction) error {
	fields := func(p *TimesliceParams) map[string]*float64 {
		return map[string]*float64{"slice_us": &p.SliceUS, "switch_us": &p.SwitchUS, "holdover_us": &p.HoldoverUS}
	}
	return pr.widen(pred, fits, true, predictAt(params, fields, func(p TimesliceParams) (*Prediction, error) {
		return pr.PredictTimeslice(sc, p)
	}))
}

// WidenMPSByParameters is WidenByParameters for the MPS model's stage-2
// coefficients (dram, l2, kernels); an open end is skipped.
func (pr *Predictor) WidenMPSByParameters(sc *Scenario, params MPSParams, fits []ParameterFit, pred *Prediction) error {
	fields := func(p *MPSParams) map[string]*float64 {
		return map[string]*float64{"dram": &p.DRAM, "l2": &p.L2, "kernels": &p.Kernels}
	}
	return pr.widen(pred, fits, false, predictAt(params, fields, func(p MPSParams) (*Prediction, error) {
		return pr.PredictMPS(sc, p)
	}))
}

// predictAt is widen's at for a parameter set P: it predicts with the
// field named (fields maps each name to its field of a P) set to v, the
// others as in params. A name fields does not know, a value that changes
// nothing and an invalid set predict nothing (nil).
func predictAt[P interface {
	comparable
	Validate() error
}](params P, fields func(*P) map[string]*float64, predict func(P) (*Prediction, error)) func(name string, v float64) (*Prediction, error) {
	return func(name string, v float64) (*Prediction, error) {
		p := params
		f, ok := fields(&p)[name]
		if !ok {
			return nil, nil
		}
		*f = v
		if p == params || p.Validate() != nil {
			return nil, nil
		}
		return predict(p)
	}
}

// widen predicts at each end of each parameter's interval (at: nil for a
// parameter it does not know) and folds the spread into pred's intervals;
// open ends reach openFactor when open is set, else are skipped.
func (pr *Predictor) widen(pred *Prediction, fits []ParameterFit, open bool, at func(name string, v float64) (*Prediction, error)) error {
	type dev struct{ up, down float64 }
	k := len(pred.Services)
	lat, svc := make([][5]dev, k), make([][5]dev, k)
	add := func(d *[5]dev, point Percentiles, q Percentiles) {
		for i, key := range PercentileKeys {
			v, _ := q.Get(key)
			c, _ := point.Get(key)
			if v > c {
				d[i].up += (v - c) * (v - c)
			} else {
				d[i].down += (c - v) * (c - v)
			}
		}
	}
	for _, f := range fits {
		for side, end := range []*float64{f.Low, f.High} {
			var v float64
			switch {
			case end != nil:
				v = *end
			case !open:
				continue
			case side == 0:
				v = f.Value / openFactor
			default:
				v = f.Value * openFactor
			}
			q, err := at(f.Name, v)
			if err != nil {
				return fmt.Errorf("widen by %s: %w", f.Name, err)
			}
			if q == nil {
				continue
			}
			for j := range k {
				add(&lat[j], pred.Services[j].LatencyMS, q.Services[j].LatencyMS)
				add(&svc[j], pred.Services[j].ServiceMS, q.Services[j].ServiceMS)
			}
		}
	}
	widenOne := func(iv *Intervals, point Percentiles, d *[5]dev) {
		i := 0
		iv.each(func(key string, in *Interval) {
			c, _ := point.Get(key)
			in.addInQuadrature(c, d[i].up, d[i].down)
			i++
		})
	}
	for j := range k {
		sp := &pred.Services[j]
		widenOne(&sp.LatencyInterval, sp.LatencyMS, &lat[j])
		widenOne(&sp.ServiceInterval, sp.ServiceMS, &svc[j])
		sp.ParameterUncertainty = true
	}
	pred.Inference = pred.Services[0]
	return nil
}
