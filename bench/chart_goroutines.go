package main

import (
	"fmt"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// goroutinesPanel is the line chart of scenario 11.
type goroutinesPanel struct{}

// plot draws scenario 11: ops/s against goroutines, a line per contender in its colour; the
// goroutines axis is logarithmic.
func (goroutinesPanel) plot(res *Results) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Lock+unlock/s against goroutines\nscenario 11: one client, a key per goroutine"
	p.X.Label.Text = "goroutines, log scale"
	p.Y.Label.Text = "ops/s (higher is better)"
	s := res.scenario("goroutines")
	drawn := 0
	if s != nil {
		for _, r := range s.Rows {
			var xys plotter.XYs
			for _, n := range scaleGoroutines {
				if v := r.value(opsKey(n)); !math.IsNaN(v) && v > 0 {
					xys = append(xys, plotter.XY{X: float64(n), Y: v})
				}
			}
			if len(xys) == 0 {
				continue
			}
			l, pts, err := plotter.NewLinePoints(xys)
			if err != nil {
				return nil, err
			}
			c := contenderColor(r.Contender)
			l.Color, pts.Color = c, c
			l.Width = vg.Points(1.5)
			pts.Shape = draw.CircleGlyph{}
			p.Add(l, pts)
			p.Legend.Add(r.Name, l, pts)
			drawn++
		}
	}
	if drawn == 0 {
		p.Title.Text += " (not measured)"
		return p, nil
	}
	p.Add(plotter.NewGrid())
	p.X.Scale = plot.LogScale{}
	var ticks []plot.Tick
	for _, n := range scaleGoroutines {
		ticks = append(ticks, plot.Tick{Value: float64(n), Label: fmt.Sprint(n)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Tick.Marker = unitTicks{unit: unitRate}
	p.X.Min, p.X.Max = float64(scaleGoroutines[0])/1.5, float64(scaleGoroutines[len(scaleGoroutines)-1])*1.5
	p.Y.Min, p.Y.Max = 0, p.Y.Max*1.35 // room for the legend above the lines
	p.Legend.Top, p.Legend.Left = true, true
	return p, nil
}
