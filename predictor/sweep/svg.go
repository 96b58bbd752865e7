package sweep

import (
	"bytes"
	"fmt"
	"image/color"

	"github.com/colocd/colocd/internal/atomicfile"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The chart's colours: the service's p99, the SLO and the chosen percentage.
var (
	sweepLine   = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	sweepSLO    = color.RGBA{R: 214, G: 39, B: 40, A: 255}
	sweepChosen = color.RGBA{R: 44, G: 160, B: 44, A: 255}
)

// plot draws the sweep: the p99 at each percentage, the SLO as a
// dashed line, the percentage chosen as a vertical line, and the points
// over the SLO in its colour.
func (r *Result) plot() (*plot.Plot, error) {
	p := plot.New()
	sans := func(f *font.Font) { f.Variant = "Sans" }
	for _, f := range []*font.Font{&p.Title.TextStyle.Font, &p.X.Label.TextStyle.Font, &p.Y.Label.TextStyle.Font,
		&p.X.Tick.Label.Font, &p.Y.Tick.Label.Font, &p.Legend.TextStyle.Font} {
		sans(f)
	}
	p.Title.Text = fmt.Sprintf("%s p99 of %s next to a training job under MPS", r.Metric, r.Service)
	p.X.Label.Text = "training job's MPS active-thread percentage"
	p.Y.Label.Text = r.Metric + " p99 (ms)"
	p.X.Min, p.X.Max = 0, 100
	var ticks []plot.Tick
	for pct := 0; pct <= 100; pct += 10 {
		ticks = append(ticks, plot.Tick{Value: float64(pct), Label: fmt.Sprint(pct)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	p.Title.Padding = vg.Points(8)
	// Bottom right, where the rising line leaves room.
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(8), vg.Points(8)

	in, over := plotter.XYs{}, plotter.XYs{}
	all := make(plotter.XYs, len(r.Points))
	top := r.SLOMS
	for i, pt := range r.Points {
		all[i] = plotter.XY{X: float64(pt.Pct), Y: pt.P99MS}
		top = max(top, pt.P99MS)
		if r.SLOMS > 0 && pt.P99MS > r.SLOMS {
			over = append(over, all[i])
		} else {
			in = append(in, all[i])
		}
	}
	p.Y.Max = top * 1.1
	line, err := plotter.NewLine(all)
	if err != nil {
		return nil, err
	}
	line.Color, line.Width = sweepLine, vg.Points(2)
	p.Add(line)
	p.Legend.Add("predicted p99", line)
	for _, set := range []struct {
		xys   plotter.XYs
		color color.Color
		label string
	}{{in, sweepLine, ""}, {over, sweepSLO, "over the SLO"}} {
		if len(set.xys) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(set.xys)
		if err != nil {
			return nil, err
		}
		sc.Color, sc.Shape, sc.Radius = set.color, draw.CircleGlyph{}, vg.Points(3)
		p.Add(sc)
		if set.label != "" {
			p.Legend.Add(set.label, sc)
		}
	}
	if r.SLOMS > 0 {
		slo, err := plotter.NewLine(plotter.XYs{{X: 0, Y: r.SLOMS}, {X: 100, Y: r.SLOMS}})
		if err != nil {
			return nil, err
		}
		slo.Color, slo.Width, slo.Dashes = sweepSLO, vg.Points(1.5), []vg.Length{vg.Points(6), vg.Points(4)}
		p.Add(slo)
		p.Legend.Add(fmt.Sprintf("SLO %.2f ms", r.SLOMS), slo)
	}
	if r.Chosen > 0 {
		x := float64(r.Chosen)
		chosen, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: p.Y.Max}})
		if err != nil {
			return nil, err
		}
		chosen.Color, chosen.Width = sweepChosen, vg.Points(1.5)
		p.Add(chosen)
		p.Legend.Add(fmt.Sprintf("chosen: %d %%", r.Chosen), chosen)
	}
	return p, nil
}

// WriteSVG writes the sweep's chart to path as SVG, whole or not at all.
func (r *Result) WriteSVG(path string) error {
	p, err := r.plot()
	if err != nil {
		return fmt.Errorf("predict: --svg: %w", err)
	}
	// Liberation Sans is laid out with Arial's metrics, which viewers
	// without it substitute.
	c := vgsvg.New(8*vg.Inch, 5*vg.Inch)
	// A margin on the right for the last tick's label, centred on the end.
	p.Draw(draw.Crop(draw.New(c), 0, -vg.Points(14), 0, 0))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return fmt.Errorf("predict: --svg: %w", err)
	}
	if err := atomicfile.Write(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("predict: --svg: %w", err)
	}
	return nil
}
