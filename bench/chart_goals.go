package main

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// extraPanels are drawn after panels: issue 17's figures, Redis CPU per operation relative to
// the pair and throughput against goroutines.
var extraPanels = []func(*Results) (*plot.Plot, error){
	panel{"1. Uncontended: Redis CPU per lock+unlock vs the pair", "Redis CPU / op over the pair's, median of rounds (lower is better)",
		"uncontended", "redis_cpu_vs_pair", unitRatio, false, true}.plot,
	panel{"2. Parallel (64 goroutines): Redis CPU per op vs the pair", "Redis CPU / op over the pair's, median of rounds (lower is better)",
		"parallel", "redis_cpu_vs_pair", unitRatio, false, true}.plot,
	panel{"3. Contended: Redis CPU per acquisition vs the floor", "Redis CPU / acquisition over the floor's (lower is better)",
		"contended", "redis_cpu_vs_floor", unitRatio, false, true}.plot,
	plotGoroutines,
}

// scaleColors tell the lines of the goroutines panel apart.
var scaleColors = []color.RGBA{
	{R: 120, G: 120, B: 120, A: 255}, // the pair
	{R: 70, G: 120, B: 190, A: 255},
	{R: 210, G: 110, B: 40, A: 255},
	{R: 60, G: 160, B: 80, A: 255},
	{R: 170, G: 60, B: 160, A: 255},
}

// plotGoroutines draws scenario 11: ops/s against goroutines, a line per contender; the
// goroutines axis is logarithmic.
func plotGoroutines(res *Results) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "11. Throughput against goroutines on one client"
	p.X.Label.Text = "goroutines, each on its own key (log scale)"
	p.Y.Label.Text = "lock+unlock ops/s (higher is better)"
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
			c := scaleColors[drawn%len(scaleColors)]
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
	p.Y.Min, p.Y.Max = 0, p.Y.Max*1.1
	p.Legend.Top, p.Legend.Left = true, true
	return p, nil
}
