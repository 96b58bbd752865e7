package calibrate

import (
	"fmt"
	"math"

	"github.com/colocd/colocd/predictor"
)

// PriorTerm is a log-normal prior on one parameter.
type PriorTerm = predictor.PriorTerm

// z is how many standard deviations v lies from t's centre.
func z(t PriorTerm, v float64) float64 {
	return (math.Log(v) - math.Log(t.Centre)) / t.LogSD
}

// TimeslicePrior holds the time-slicing parameters' priors, each centred
// on what is documented for recent NVIDIA GPUs with ±2 standard deviations
// spanning the documented range (docs/predictor.md#priors gives the
// sources):
//   - slice: the open kernel driver's default time slice of a channel
//     group is 1024 (×1.024 µs) on Volta and newer; other drivers and the
//     nvidia-smi levels move it within about 1 – 30 ms: 128 µs – 8 ms;
//   - switch: not published; a save and restore of a busy context costs
//     tens to a few hundred µs, an idle one a few µs: 5 – 250 µs;
//   - hold-over: a context keeps the GPU until its channels run out of
//     work, or for the rest of its slice after a yield; observed at
//     0.8 – 1 ms: 50 µs – 1.05 ms.
type TimeslicePrior [3]PriorTerm

// DefaultTimeslicePrior is the prior a fit uses unless told otherwise.
var DefaultTimeslicePrior = TimeslicePrior{
	{Centre: 1024, LogSD: math.Log(8) / 2},                  // 128 µs – 8.2 ms
	{Centre: math.Sqrt(5 * 250), LogSD: math.Log(50) / 4},   // 5 – 250 µs
	{Centre: math.Sqrt(50 * 1050), LogSD: math.Log(21) / 4}, // 50 µs – 1.05 ms
}

// DefaultNoise is the relative measurement error (the standard deviation of
// log(measured/true)) the prior's strength assumes: a fit on many records
// is led by them, one on two records leans on the prior.
const DefaultNoise = 0.05

// penalty is the prior's term in the objective: the weighted mean squared
// log error is the negative log-likelihood of the records up to a factor of
// n/(2·noise²), n the records' independent errors, so the prior's ½·Σz²
// enters it as noise²/n·Σz².
func (pr *TimeslicePrior) penalty(v [3]float64, noise, n float64) float64 {
	if pr == nil || n <= 0 {
		return 0
	}
	var s float64
	for i, t := range pr {
		z := z(t, v[i])
		s += z * z
	}
	return noise * noise / n * s
}

// Check names the first term that is not a positive, finite centre and
// spread.
func (pr *TimeslicePrior) Check() error {
	var c checker
	for i, t := range pr {
		if !(t.Centre > 0) || math.IsInf(t.Centre, 0) {
			c.Add("prior."+tsNames[i]+".centre", "a value > 0", fmtFloat(t.Centre))
		}
		if !(t.LogSD > 0) || math.IsInf(t.LogSD, 0) {
			c.Add("prior."+tsNames[i]+".log_sd", "a value > 0", fmtFloat(t.LogSD))
		}
	}
	return c.Err("fit options")
}

// Describe maps each parameter name to its term, for the fit report.
func (pr *TimeslicePrior) Describe() map[string]PriorTerm {
	if pr == nil {
		return nil
	}
	out := make(map[string]PriorTerm, len(pr))
	for i, t := range pr {
		out[tsNames[i]] = t
	}
	return out
}

// prior is the prior the fit uses: nil with NoPrior.
func (opts FitOptions) prior() *TimeslicePrior {
	switch {
	case opts.NoPrior:
		return nil
	case opts.Prior != nil:
		return opts.Prior
	}
	p := DefaultTimeslicePrior
	return &p
}

// noise is the assumed measurement error.
func (opts FitOptions) noise() float64 {
	if opts.Noise > 0 {
		return opts.Noise
	}
	return DefaultNoise
}

// checkFitOptions validates what a caller may set.
func checkFitOptions(opts FitOptions) error {
	if opts.Weights != nil {
		if err := CheckWeights(opts.Weights); err != nil {
			return err
		}
	}
	if opts.Prior != nil {
		if err := opts.Prior.Check(); err != nil {
			return err
		}
	}
	if opts.Noise < 0 || math.IsNaN(opts.Noise) || opts.Noise > 1 {
		return fmt.Errorf("fit options: noise: want a fraction in (0, 1] (0: %g), got %s", DefaultNoise, fmtFloat(opts.Noise))
	}
	if opts.Seeds < 0 || opts.Seeds > MaxSeeds {
		return fmt.Errorf("fit options: seeds: want a count from 1 to %d (0: %d), got %d", MaxSeeds, DefaultSeeds, opts.Seeds)
	}
	return nil
}
