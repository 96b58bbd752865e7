package replay

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
)

// WriteTable prints one row per result, with a column of the work over
// the oracle at the guard's limit when it was replayed.
func WriteTable(w io.Writer, results []Result) error {
	atLimit := slices.ContainsFunc(results, func(r Result) bool { return r.Policy == OracleLimit })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	limitCol := ""
	if atLimit {
		limitCol = "\twork vs oracle-limit"
	}
	fmt.Fprintf(tw, "policy\tminutes over SLO (alone)\twork vs oracle%s\twork vs static\tchanges/h\tthrottles\traises\trevokes\tevictions\tworst p99 ms\t\n", limitCol)
	for _, r := range results {
		name := string(r.Policy)
		if r.Policy == BestStatic {
			name = fmt.Sprintf("%s (%d %%)", r.Policy, r.Pct)
		}
		vs := fmt.Sprintf("%.2f", r.WorkVsOracle)
		if atLimit {
			vs += fmt.Sprintf("\t%.2f", r.WorkVsOracleLimit)
		}
		fmt.Fprintf(tw, "%s\t%d of %d (%d)\t%s\t%.2f\t%.1f\t%d\t%d\t%d\t%d\t%.1f\t\n", name, r.MinutesOver, r.Minutes, r.MinutesOverAlone, vs, r.WorkVsStatic,
			r.ChangesPerHour, r.Throttles, r.Raises, r.Revokes, r.Evictions, r.WorstP99MS)
	}
	return tw.Flush()
}

// The picture's geometry, in SVG user units.
const (
	svgWidth  = 960
	svgLeft   = 60
	svgRight  = 60
	svgPanel  = 150 // one plot's height
	svgGap    = 40  // between plots
	svgHeader = 40
)

// SVG draws each result over time, two plots a policy: the load (the
// arrival rate each observer interval, the observed rate and its
// forecast), and each judged minute's p99 against the SLO with the
// training job's percentage, and the oracle's beside it when the oracle is
// among the results.
//
// load names the load plot's unit: "req/s", or for an engine, whose
// observed rate counts its steps, what each line counts.
func SVG(title, load string, sloMS float64, results []Result) []byte {
	var end float64 // minutes
	var maxRate, maxP99 float64
	for _, r := range results {
		for _, s := range r.Series {
			end = max(end, s.At.Minutes())
			maxRate = max(maxRate, finite(s.ArrivalRPS), finite(s.ObservedRPS), finite(s.ForecastRPS))
		}
		for _, m := range r.PerMinute {
			maxP99 = max(maxP99, m.P99MS)
		}
	}
	end = max(end, 1)
	maxRate = niceCeil(max(maxRate, 1))
	maxP99 = niceCeil(max(maxP99, 1.5*sloMS))
	height := svgHeader + len(results)*2*(svgPanel+svgGap)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		svgWidth, height, svgWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="20" font-size="14">%s</text>`+"\n", svgLeft, esc(title))
	plotW := float64(svgWidth - svgLeft - svgRight)
	x := func(min float64) float64 { return svgLeft + plotW*min/end }
	top := float64(svgHeader)
	var oracle []Sample // the oracle's percentage, drawn beside every policy's
	for _, r := range results {
		if r.Policy == Oracle {
			oracle = r.Series
		}
	}
	for _, r := range results {
		// The load.
		y := func(v float64) float64 { return top + svgPanel*(1-v/maxRate) }
		frame(&b, top, fmt.Sprintf("%s: load, %s", r.Policy, load), maxRate, end)
		line(&b, r.Series, x, y, func(s Sample) float64 { return s.ArrivalRPS }, "#bbbbbb", "")
		line(&b, r.Series, x, y, func(s Sample) float64 { return s.ObservedRPS }, "#1f77b4", "")
		line(&b, r.Series, x, y, func(s Sample) float64 { return s.ForecastRPS }, "#ff7f0e", "4 3")
		legend(&b, top, []string{"arrivals", "#bbbbbb", "observed", "#1f77b4", "forecast", "#ff7f0e"})
		top += svgPanel + svgGap
		// The p99 and the job's percentage.
		yp := func(v float64) float64 { return top + svgPanel*(1-v/maxP99) }
		ypct := func(v float64) float64 { return top + svgPanel*(1-v/100) }
		frame(&b, top, fmt.Sprintf("%s: p99 per minute, ms (%d of %d over the SLO); the job's %%, right", r.Policy, r.MinutesOver, r.Minutes), maxP99, end)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="start">100 %%</text>`+"\n", svgWidth-svgRight+4, top+4)
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#d62728" stroke-dasharray="6 3"/>`+"\n", svgLeft, svgWidth-svgRight, yp(sloMS), yp(sloMS))
		if r.Policy != Oracle {
			line(&b, oracle, x, ypct, func(s Sample) float64 { return float64(s.Pct) }, "#9467bd", "2 2")
		}
		line(&b, r.Series, x, ypct, func(s Sample) float64 { return float64(s.Pct) }, "#2ca02c", "")
		for _, m := range r.PerMinute {
			color := "#333333"
			if m.P99MS > sloMS {
				color = "#d62728"
			}
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x(float64(m.Minute)+0.5), yp(min(m.P99MS, maxP99)), color)
		}
		pairs := []string{"p99", "#333333", "SLO", "#d62728", "job %", "#2ca02c"}
		if oracle != nil && r.Policy != Oracle {
			pairs = append(pairs, "oracle %", "#9467bd")
		}
		legend(&b, top, pairs)
		top += svgPanel + svgGap
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// frame draws a plot's axes, its title, its y range and minute ticks.
func frame(b *strings.Builder, top float64, title string, ymax, end float64) {
	fmt.Fprintf(b, `<rect x="%d" y="%.1f" width="%d" height="%d" fill="none" stroke="#999999"/>`+"\n", svgLeft, top, svgWidth-svgLeft-svgRight, svgPanel)
	fmt.Fprintf(b, `<text x="%d" y="%.1f">%s</text>`+"\n", svgLeft, top-6, esc(title))
	fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%g</text><text x="%d" y="%.1f" text-anchor="end">0</text>`+"\n",
		svgLeft-4, top+4, ymax, svgLeft-4, top+svgPanel)
	step := niceCeil(end / 10)
	for m := 0.0; m <= end; m += step {
		xx := svgLeft + float64(svgWidth-svgLeft-svgRight)*m/end
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%g min</text>`+"\n", xx, top+svgPanel+14, m)
	}
}

// line draws v over the samples, leaving gaps where it is NaN.
func line(b *strings.Builder, samples []Sample, x, y func(float64) float64, v func(Sample) float64, color, dash string) {
	var pts []string
	flush := func() {
		if len(pts) > 1 {
			fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.2" stroke-dasharray="%s" points="%s"/>`+"\n", color, dash, strings.Join(pts, " "))
		}
		pts = pts[:0]
	}
	for _, s := range samples {
		val := v(s)
		if math.IsNaN(val) || math.IsInf(val, 0) {
			flush()
			continue
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.At.Minutes()), y(val)))
	}
	flush()
}

// legend writes name/color pairs at a plot's top right.
func legend(b *strings.Builder, top float64, pairs []string) {
	xx := float64(svgWidth - svgRight - 320)
	for i := 0; i+1 < len(pairs); i += 2 {
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="10" height="3" fill="%s"/><text x="%.1f" y="%.1f">%s</text>`+"\n",
			xx, top+10, pairs[i+1], xx+14, top+14, esc(pairs[i]))
		xx += 80
	}
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if !(v > 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

func esc(s string) string { return escaper.Replace(s) }
