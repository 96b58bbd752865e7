package sweep

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/colocd/colocd/internal/termtext"
	"github.com/colocd/colocd/predictor"
)

// Point is one row of a sweep (predict --sweep): the service's p99 with the
// training job at Pct.
type Point struct {
	Pct   int     `json:"pct"`
	P99MS float64 `json:"p99_ms"`
}

// Result is a sweep: the service, its metric, the SLO, the percentage
// chosen and every point (predict --sweep --json).
type Result struct {
	Service string  `json:"service"`
	Metric  string  `json:"metric"` // "latency" (a request service) or "step" (an engine)
	SLOMS   float64 `json:"slo_p99_ms,omitempty"`
	Chosen  int     `json:"chosen_pct"` // the highest percentage within the SLO; 0: none, or no SLO given
	Points  []Point `json:"points"`
}

// Run predicts the first service's p99 with the one training job at every
// step from step to 100 % (MPS), and chooses the highest percentage whose
// p99 is within slo (0: none chosen). Its errors name the flags of colocd
// predict.
func Run(pr *predictor.Predictor, sc *predictor.Scenario, cal *predictor.Calibration, step int, slo float64) (*Result, error) {
	if len(sc.Training) != 1 {
		return nil, fmt.Errorf("predict: --sweep: want exactly one --training job, got %d", len(sc.Training))
	}
	if step < 1 || step > 100 {
		return nil, fmt.Errorf("predict: --sweep-step: want 1 to 100, got %d", step)
	}
	r := &Result{Metric: "latency", SLOMS: slo}
	if sc.BurstSteps > 0 {
		r.Metric = "step"
	}
	for pct := step; pct <= 100; pct += step {
		s := *sc
		s.TrainingPct = []float64{float64(pct)}
		pred, err := pr.Predict(&s, predictor.ModeMPS, cal)
		if err != nil {
			return nil, fmt.Errorf("predict: --sweep at %d %%: %w", pct, err)
		}
		r.Service = pred.Inference.Name
		p99 := pred.Inference.LatencyMS.P99
		if r.Metric == "step" {
			p99 = pred.Inference.ServiceMS.P99
		}
		r.Points = append(r.Points, Point{Pct: pct, P99MS: p99})
		if slo > 0 && p99 <= slo {
			r.Chosen = pct
		}
	}
	return r, nil
}

// chartWidth is the chart's width in characters.
const chartWidth = 48

// WriteText draws the sweep in the terminal: a bar per percentage, the
// SLO as a column of ':' (a bar that passes it ends in '!'), and the
// percentage chosen.
func (r *Result) WriteText(w io.Writer) {
	top := r.SLOMS
	for _, p := range r.Points {
		top = math.Max(top, p.P99MS)
	}
	if top <= 0 {
		top = 1
	}
	col := func(v float64) int { return int(math.Round(v / top * chartWidth)) }
	slo := -1
	head := fmt.Sprintf("# %s p99 of %s against the training job's MPS active-thread percentage", r.Metric, termtext.Line(r.Service))
	if r.SLOMS > 0 {
		slo = col(r.SLOMS)
		head += fmt.Sprintf(", SLO %.2f ms (:)", r.SLOMS)
	}
	fmt.Fprintln(w, head)
	fmt.Fprintf(w, "%5s %9s\n", "pct", "p99 ms")
	for _, p := range r.Points {
		n := col(p.P99MS)
		var b strings.Builder
		for i := range chartWidth + 1 {
			switch {
			case i < n && i == slo:
				b.WriteByte('!')
			case i < n:
				b.WriteString("█")
			case i == slo:
				b.WriteByte(':')
			default:
				b.WriteByte(' ')
			}
		}
		line := fmt.Sprintf("%5d %9.2f |%s", p.Pct, p.P99MS, strings.TrimRight(b.String(), " "))
		if p.Pct == r.Chosen {
			line += "  <- chosen: the highest percentage within the SLO"
		}
		fmt.Fprintln(w, line)
	}
	switch {
	case r.SLOMS <= 0:
		fmt.Fprintln(w, "# give --slo-p99-ms to see which percentage an admission would grant")
	case r.Chosen == 0:
		fmt.Fprintln(w, "# no percentage holds the SLO: the job would be denied")
	}
}
