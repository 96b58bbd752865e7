package replay

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/colocd/colocd/simserver/llm"
)

// Synthetic arrival traces, for choosing and checking the guard's defaults
// on traffic nobody tuned to: an hour of requests whose rate follows a
// shape (SyntheticKinds) around the shared conversation trace's mean rate,
// with prompt and output lengths drawn from log-normal laws fitted to that
// trace. A kind and a seed give the same trace every time.
const (
	// SyntheticPrefix starts a --trace that names a synthetic trace,
	// "synthetic:KIND" or "synthetic:KIND:SEED".
	SyntheticPrefix = "synthetic:"
	// SyntheticMeanRPS is the conversation trace's mean rate (19,366
	// requests in 58.4 minutes), which every shape averages to about.
	SyntheticMeanRPS = 5.53
	// SyntheticMinutes is a synthetic trace's length.
	SyntheticMinutes = 60
)

// The log-normal laws of a request's token counts: the conversation
// trace's mean and deviation of the logs, and its largest counts as
// bounds.
const (
	promptLogMean, promptLogSD = 6.63, 0.985
	outputLogMean, outputLogSD = 5.02, 0.859
	maxPromptTokens            = 14050
	maxOutputTokens            = 1000
)

// SyntheticKinds are the shapes of the rate:
//   - onoff: bursts at 1.5× the mean rate and lulls at 0.5×, each of a
//     length drawn from an exponential law of mean 4 minutes;
//   - diurnal: a day pressed into the hour, 0.5× at its ends and 1.5× at
//     its middle, a sine;
//   - flash: 0.8× the mean with three flash crowds at random times, each
//     2.2× for 2 minutes with 30 s ramps.
var SyntheticKinds = []string{"onoff", "diurnal", "flash"}

// ParseSynthetic reads "synthetic:KIND[:SEED]": its kind and seed (1 when
// none is given). ok is false when name is not a synthetic trace's.
func ParseSynthetic(name string) (kind string, seed uint64, ok bool, err error) {
	rest, ok := strings.CutPrefix(name, SyntheticPrefix)
	if !ok {
		return "", 0, false, nil
	}
	kind, s, hasSeed := strings.Cut(rest, ":")
	if !slices.Contains(SyntheticKinds, kind) {
		return "", 0, true, fmt.Errorf("%q: want %s%s[:SEED]", name, SyntheticPrefix, strings.Join(SyntheticKinds, "|"))
	}
	seed = 1
	if hasSeed {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			return "", 0, true, fmt.Errorf("%q: the seed %q: want a whole number ≥ 0", name, s)
		}
	}
	return kind, seed, true, nil
}

// Synthetic returns SyntheticMinutes of requests shaped as kind, drawn
// with seed.
func Synthetic(kind string, seed uint64) ([]llm.Request, error) {
	rng := rand.New(rand.NewPCG(seed, uint64(len(kind))<<32|uint64(kind[0])))
	span := SyntheticMinutes * time.Minute
	var rate func(t time.Duration) float64 // × the mean
	peak := 1.5
	switch kind {
	case "onoff":
		rate = onOff(rng, span)
	case "diurnal":
		rate = func(t time.Duration) float64 {
			return 1 - 0.5*math.Cos(2*math.Pi*t.Seconds()/span.Seconds())
		}
	case "flash":
		rate, peak = flashCrowds(rng, span), 2.2
	default:
		return nil, fmt.Errorf("synthetic trace %q: want one of %s", kind, strings.Join(SyntheticKinds, ", "))
	}
	// Thinning: arrivals at the peak rate, each kept with the rate's share
	// of the peak at its time.
	top := peak * SyntheticMeanRPS
	var out []llm.Request
	for t := time.Duration(0); ; {
		t += time.Duration(rng.ExpFloat64() / top * float64(time.Second))
		if t >= span {
			break
		}
		if rng.Float64()*peak > rate(t) {
			continue
		}
		out = append(out, llm.Request{Arrival: t,
			PromptTokens: logNormalTokens(rng, promptLogMean, promptLogSD, maxPromptTokens),
			OutputTokens: logNormalTokens(rng, outputLogMean, outputLogSD, maxOutputTokens)})
	}
	return out, nil
}

// onOff is a rate that switches between 1.5 and 0.5 after exponential
// spells of mean 4 minutes, starting with a lull.
func onOff(rng *rand.Rand, span time.Duration) func(time.Duration) float64 {
	var switches []time.Duration
	for t := time.Duration(0); t < span; {
		t += time.Duration(rng.ExpFloat64() * float64(4*time.Minute))
		switches = append(switches, t)
	}
	return func(t time.Duration) float64 {
		i, _ := slices.BinarySearch(switches, t)
		if i%2 == 1 {
			return 1.5
		}
		return 0.5
	}
}

// flashCrowds is 0.8 with three crowds of 2.2 for 2 minutes each, ramping
// up and down over 30 s, at random times within the span.
func flashCrowds(rng *rand.Rand, span time.Duration) func(time.Duration) float64 {
	const base, crowd = 0.8, 2.2
	hold, ramp := 2*time.Minute, 30*time.Second
	starts := make([]time.Duration, 3)
	for i := range starts {
		starts[i] = time.Duration(rng.Float64() * float64(span-hold-2*ramp))
	}
	return func(t time.Duration) float64 {
		r := base
		for _, s := range starts {
			var f float64
			switch d := t - s; {
			case d < 0 || d > hold+2*ramp:
				continue
			case d < ramp:
				f = float64(d) / float64(ramp)
			case d > hold+ramp:
				f = float64(hold+2*ramp-d) / float64(ramp)
			default:
				f = 1
			}
			r = max(r, base+f*(crowd-base))
		}
		return r
	}
}

// logNormalTokens draws a token count from the log-normal law, at least 1
// and at most top.
func logNormalTokens(rng *rand.Rand, mean, sd float64, top int) int {
	n := int(math.Round(math.Exp(mean + sd*rng.NormFloat64())))
	return min(top, max(1, n))
}
