package admission

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/colocd/colocd/predictor"
)

// The sentences of decisions. They name the service closest to (or furthest
// over) its limit, with figures a person can check against `colocd predict`.

// fitsMessage explains a grant.
func (pol *policy) fitsMessage(preds []ServicePrediction, pct int) string {
	sp := pol.tightest(preds)
	if pol.cfg.Mode == predictor.ModeTimeslice {
		return fmt.Sprintf("under time slicing, predicted %s %s stays within %s", subject(sp), p99Text(sp), pol.limitText(sp))
	}
	return fmt.Sprintf("predicted %s %s stays within %s at %d %%", subject(sp), p99Text(sp), pol.limitText(sp), pct)
}

// throttleMessage explains a throttle: what fails one step higher, and the
// figure at the granted percentage.
func (pol *policy) throttleMessage(grid []int, best int, results [][]ServicePrediction) string {
	at := pol.tightest(results[best])
	msg := fmt.Sprintf("throttled to %d %% (asked up to %d %%)", grid[best], grid[len(grid)-1])
	if next := results[best+1]; next != nil {
		sp := pol.tightest(next)
		msg += fmt.Sprintf(": at %d %% predicted %s %s would exceed %s", grid[best+1], subject(sp), p99Text(sp), pol.limitText(sp))
	}
	return msg + fmt.Sprintf("; at %d %% %s is %s", grid[best], subject(at), p99Text(at))
}

// violation describes the service furthest over its limit.
func (pol *policy) violation(preds []ServicePrediction) string {
	sp := pol.tightest(preds)
	return fmt.Sprintf("predicted %s %s exceeds %s", subject(sp), p99Text(sp), pol.limitText(sp))
}

// subject names what a prediction bounds: "bert p99", or an engine's
// "llama step p99".
func subject(sp ServicePrediction) string {
	if sp.Step {
		return sp.Service + " step p99"
	}
	return sp.Service + " p99"
}

// p99Text is a prediction's p99, "18.2 ms"; with an interval "18.2 ms (up
// to 19.5 ms)"; with the observed correction "18.2 ms (up to 19.5 ms; 29.3
// ms with the ×1.50 the server's own p99 showed)".
func p99Text(sp ServicePrediction) string {
	switch {
	case math.IsInf(sp.Learned, 1):
		return fmtMS(sp.PredictedP99MS) + " ms (not measured: more than a step above what the guard has measured of this job on this GPU; it raises a step at a time)"
	case sp.Learned > 0:
		return fmt.Sprintf("%s ms (%s ms with the ×%s the server's own p99 showed for this job at this percentage)", fmtMS(sp.PredictedP99MS), fmtMS(sp.heldP99()),
			strconv.FormatFloat(sp.Learned, 'f', 2, 64))
	}
	var notes []string
	if sp.UpperP99MS > sp.PredictedP99MS {
		notes = append(notes, "up to "+fmtMS(sp.UpperP99MS)+" ms")
	}
	if sp.Correction > 1 {
		notes = append(notes, fmt.Sprintf("%s ms with the ×%s the server's own p99 showed", fmtMS(sp.heldP99()),
			strconv.FormatFloat(sp.Correction, 'f', 2, 64)))
	}
	if len(notes) == 0 {
		return fmtMS(sp.PredictedP99MS) + " ms"
	}
	return fmtMS(sp.PredictedP99MS) + " ms (" + strings.Join(notes, "; ") + ")"
}

// tightest is the prediction with the highest ratio of p99 to its limit.
func (pol *policy) tightest(preds []ServicePrediction) ServicePrediction {
	var best ServicePrediction
	ratio := -1.0
	for _, sp := range preds {
		if r := sp.heldP99() / sp.SLOP99MS; r > ratio {
			best, ratio = sp, r
		}
	}
	return best
}

// limitText names the limit a prediction is held to: "SLO 15 ms", or
// "13.5 ms (SLO 15 ms less 10 % headroom)".
func (pol *policy) limitText(sp ServicePrediction) string {
	slo := "SLO " + strconv.FormatFloat(sp.SLOP99MS, 'g', -1, 64) + " ms"
	if sp.Step {
		slo = "step " + slo
	}
	if pol.cfg.Headroom == 0 {
		return slo
	}
	return fmt.Sprintf("%s ms (%s less %s %% headroom)", fmtMS((1-pol.cfg.Headroom)*sp.SLOP99MS), slo,
		strconv.FormatFloat(pol.cfg.Headroom*100, 'g', 4, 64))
}

// fmtMS prints a latency with about three significant figures.
func fmtMS(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}
