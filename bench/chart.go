package main

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// panel is one bar chart of the figure.
type panel struct {
	title, axis   string
	scenario, key string
	unit          string // how bar labels are written (a table unit)
	log           bool
	references    bool // include the PING and baseline rows
}

var panels = []panel{
	{"1. Uncontended lock+unlock p50", "", "uncontended", "p50_us", unitMicros, false, true},
	{"2. Parallel (64 goroutines) throughput", "lock+unlock ops/s", "parallel", "ops_per_s", unitRate, false, true},
	{"3. Contended (3 processes x 16) wait p99", "log scale", "contended", "wait_p99_us", unitMicros, true, false},
	{"3. Contended: client commands per acquisition", "commands", "contended", "client_cmds_per_acq", unitNum, false, false},
	{"4. Ping-pong cross-process handoff p50", "log scale", "pingpong", "handoff_p50_us", unitMicros, true, true},
	{"5. FIFO: order inversions per round (0 = FIFO)", "inversions", "fifo", "inversions_per_round", unitNum1, false, false},
}

// writeChart draws the key comparisons as bar charts in one SVG, or PNG
// when path ends in .png.
func writeChart(path string, res *Results) error {
	const cols = 2
	rows := (len(panels) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for i, pn := range panels {
		p, err := pn.plot(res)
		if err != nil {
			return err
		}
		grid[i/cols] = append(grid[i/cols], p)
	}
	for len(grid[rows-1]) < cols {
		grid[rows-1] = append(grid[rows-1], plot.New())
	}

	header := vg.Inch / 2
	w, h := 12*vg.Inch, vg.Length(rows)*4*vg.Inch+header
	var c interface {
		vg.CanvasSizer
		io.WriterTo
	}
	if strings.EqualFold(filepath.Ext(path), ".png") {
		img := vgimg.New(w, h)
		img.SetColor(color.White)
		img.Fill(vg.Rectangle{Max: vg.Point{X: w, Y: h}}.Path())
		c = vgimg.PngCanvas{Canvas: img}
	} else {
		c = vgsvg.New(w, h)
	}
	dc := draw.New(c)

	// A title line, then the panels below it.
	title := draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, 13), Handler: plot.DefaultTextHandler}
	dc.FillText(title, vg.Point{X: vg.Inch / 4, Y: h - header/2}, chartTitle(res))
	body := draw.Crop(dc, 0, 0, 0, -header)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Inch / 2, PadY: vg.Inch / 3,
		PadTop: vg.Inch / 8, PadBottom: vg.Inch / 4, PadLeft: vg.Inch / 4, PadRight: vg.Inch / 4}
	canvases := plot.Align(grid, tiles, body)
	for r := range grid {
		for col, p := range grid[r] {
			p.Draw(canvases[r][col])
		}
	}

	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func chartTitle(res *Results) string {
	m := res.Meta
	t := fmt.Sprintf("rlock benchmark: Redis %s, %s, %d CPUs, %s, %s", m.RedisVersion, m.OSArch, m.CPUs,
		m.GoVersion, m.Started.Format("2006-01-02"))
	if m.Quick {
		t += " (-quick: rough figures)"
	}
	return t
}

// plot draws one horizontal bar chart, first contender on top. Rows with
// no figure (not run, failed, or not positive on a log scale) are left out.
func (pn panel) plot(res *Results) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = pn.title
	p.X.Label.Text = pn.axis
	var s *ScenarioResult
	for _, sc := range res.Scenarios {
		if sc.ID == pn.scenario {
			s = sc
		}
	}
	var names []string
	var vals plotter.Values
	if s != nil {
		for _, r := range s.Rows {
			if !pn.references && (r.Contender == "ping" || r.Contender == "baseline") {
				continue
			}
			v := r.value(pn.key)
			if math.IsNaN(v) || math.IsInf(v, 0) || (pn.log && v <= 0) {
				continue
			}
			names = append([]string{r.Name}, names...)
			vals = append(plotter.Values{v}, vals...)
		}
	}
	if len(vals) == 0 {
		p.Title.Text += " (not measured)"
		return p, nil
	}
	p.Add(plotter.NewGrid())
	width := vg.Points(14)
	// On a log axis a bar cannot start at 0: it starts at a power of ten
	// below the smallest value, stacked on an undrawn base bar.
	var base *plotter.BarChart
	if pn.log {
		floor := math.Pow(10, math.Floor(math.Log10(minOf(vals))))
		floors := make(plotter.Values, len(vals))
		for i := range vals {
			floors[i] = floor
			vals[i] -= floor
		}
		var err error
		if base, err = plotter.NewBarChart(floors, width); err != nil {
			return nil, err
		}
		base.Horizontal = true
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = microTicks{}
	} else if pn.unit == unitMicros {
		p.X.Tick.Marker = microTicks{linear: true}
	}
	bars, err := plotter.NewBarChart(vals, width)
	if err != nil {
		return nil, err
	}
	bars.Horizontal = true
	bars.Color = color.RGBA{R: 70, G: 120, B: 190, A: 255}
	bars.LineStyle.Width = 0
	if base != nil {
		bars.StackOn(base)
	}
	p.Add(bars)
	p.NominalY(names...)

	// The figure at the end of each bar.
	xys := make(plotter.XYs, len(vals))
	labels := make([]string, len(vals))
	for i := range vals {
		xys[i] = plotter.XY{X: bars.BarHeight(i), Y: float64(i)}
		labels[i] = " " + formatValue(bars.BarHeight(i), pn.unit)
	}
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
	if err != nil {
		return nil, err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].YAlign = draw.YCenter
	}
	p.Add(l)
	// Room for the labels right of the longest bar.
	if pn.log {
		p.X.Max *= 4
	} else {
		p.X.Min = 0
		p.X.Max *= 1.3
	}
	return p, nil
}

// microTicks labels an axis of microseconds as durations ("100µs", "1ms").
type microTicks struct{ linear bool }

func (t microTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	if t.linear {
		ticks = plot.DefaultTicks{}.Ticks(lo, hi)
	} else {
		ticks = plot.LogTicks{Prec: -1}.Ticks(lo, hi)
	}
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = shortMicros(ticks[i].Value)
		}
	}
	return ticks
}

func minOf(vs plotter.Values) float64 {
	m := math.Inf(1)
	for _, v := range vs {
		m = math.Min(m, v)
	}
	return m
}

// shortMicros writes round durations briefly: 100µs, 1ms, 10s.
func shortMicros(us float64) string {
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }
	switch {
	case us < 1000:
		return g(us) + "µs"
	case us < 1e6:
		return g(us/1e3) + "ms"
	}
	return g(us/1e6) + "s"
}
