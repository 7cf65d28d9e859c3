package main

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
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

// panel is one bar chart of the figure: a figure of one scenario, a bar per contender.
type panel struct {
	title, axis   string // title: the figure, then its scenario; axis: its unit, and whether lower or higher is better
	scenario, key string
	unit          string // how bar and tick labels are written (a table unit)
	log           bool
	references    bool // include the reference rows: PING, baseline pair, floor
}

// chartPanel is a panel of the chart: it draws its plot from the results.
type chartPanel interface {
	plot(res *Results) (*plot.Plot, error)
}

// chartPanels are the panels of the chart in their order, scenario by scenario, left to right
// and top to bottom; writeChart numbers them 1, 2, ... in that order. Each title says what its
// figure is on its first line and which scenario (of the tables, README.md) on its second.
var chartPanels = []chartPanel{
	panel{"Median time of a lock+unlock\nscenario 1: uncontended, one goroutine", "µs (lower is better)",
		"uncontended", "p50_us", unitMicros, false, true},
	panel{"Client CPU per lock+unlock\nscenario 1: uncontended, one goroutine", "client CPU µs (lower is better)",
		"uncontended", "cpu_us_per_op", unitNum1, false, true},
	panel{"Redis CPU per lock+unlock, × the pair's\nscenario 1: uncontended, one goroutine", "× EVALSHA pair (lower is better)",
		"uncontended", "redis_cpu_vs_pair", unitRatio, false, true},
	panel{"Lock+unlock per second\nscenario 2: 64 goroutines, a key each", "ops/s (higher is better)",
		"parallel", "ops_per_s", unitRate, false, true},
	panel{"Redis CPU per lock+unlock, × the pair's\nscenario 2: 64 goroutines, a key each", "× EVALSHA pair (lower is better)",
		"parallel", "redis_cpu_vs_pair", unitRatio, false, true},
	panel{"Wait p99\nscenario 3: one key, 3 processes × 16", "wait p99, log scale (lower is better)",
		"contended", "wait_p99_us", unitMicros, true, false},
	panel{"Client commands per acquisition\nscenario 3: one key, 3 processes × 16", "commands (lower is better)",
		"contended", "client_cmds_per_acq", unitNum, false, false},
	panel{"Redis CPU per acquisition, × the floor's\nscenario 3: one key, 3 processes × 16", "× the floor's (lower is better)",
		"contended", "redis_cpu_vs_floor", unitRatio, false, true},
	panel{"Handoff p50, from release to next lock\nscenario 4: ping-pong, 2 processes", "p50, log scale (lower is better)",
		"pingpong", "handoff_p50_us", unitMicros, true, true},
	panel{"Order inversions per round, 0 = FIFO\nscenario 5: 20 waiters, 20ms apart", "inversions (lower is better)",
		"fifo", "inversions_per_round", unitNum1, false, false},
	panel{"Client commands per second of renewal\nscenario 6: 10,000 held locks", "commands, log scale (lower is better)",
		"renewal", "client_cmds_per_period", unitNum1, true, false},
	panel{"Holds per second, reads and writes\nscenario 7: 90% reads, 3 processes × 16", "holds/s (higher is better)",
		"readheavy", "ops_per_s", unitRate, false, false},
	panel{"Acquisitions per second\nscenario 8: semaphore of 4, 3 processes × 16", "acquisitions/s (higher is better)",
		"semaphore", "acq_per_s", unitRate, false, false},
	panel{"Wait p99\nscenario 8: semaphore of 4, 3 processes × 16", "wait p99 (lower is better)",
		"semaphore", "wait_p99_us", unitMicros, false, false},
	panel{"Client heap per hold\nscenario 9: watchdog holds on one client", "bytes (lower is better)",
		"holds", "heap_per_hold", unitBytes, false, false},
	goroutinesPanel{},
}

// The chart's layout: two columns of panels, each 4 inches high, under a title line.
const (
	chartCols       = 2
	chartWidth      = 12 * vg.Inch
	chartRowHeight  = 4 * vg.Inch
	chartHeader     = vg.Inch / 2
	chartTitleSize  = 13
	chartFontFamily = "'Liberation Serif','Times New Roman',Times,serif" // metric-compatible fallbacks
)

// writeChart draws the panels in one SVG, or PNG when path ends in .png. The SVG embeds its
// font, so that every label has the width it was laid out with in a browser, and anchors its
// names, titles and axis labels (anchorText) for viewers that draw it in another font.
func writeChart(path string, res *Results) error {
	rows := (len(chartPanels) + chartCols - 1) / chartCols
	w, h := chartWidth, vg.Length(rows)*chartRowHeight+chartHeader
	var c interface {
		vg.CanvasSizer
		io.WriterTo
	}
	if strings.EqualFold(filepath.Ext(path), ".png") {
		c = vgimg.PngCanvas{Canvas: vgimg.New(w, h)}
	} else {
		c = vgsvg.NewWith(vgsvg.UseWH(w, h), vgsvg.EmbedFonts(true))
	}
	plots, _, err := drawChart(c, res)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return err
	}
	out := b.Bytes()
	if !strings.EqualFold(filepath.Ext(path), ".png") {
		// A viewer that ignores the embedded font picks a metric-compatible one if it has one,
		// and keeps the names, titles and axis labels where they belong in any other.
		out = bytes.ReplaceAll(out, []byte("font-family:Liberation Serif;"), []byte("font-family:"+chartFontFamily+";"))
		out = anchorText(out, textAnchors(plots))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

// drawChart draws the chart's title and its panels, numbered in order, on c (white first),
// and returns the panels and the canvases they were drawn on.
func drawChart(c vg.CanvasSizer, res *Results) ([]*plot.Plot, []draw.Canvas, error) {
	rows := (len(chartPanels) + chartCols - 1) / chartCols
	grid := make([][]*plot.Plot, rows)
	var plots []*plot.Plot
	for i, pn := range chartPanels {
		p, err := pn.plot(res)
		if err != nil {
			return nil, nil, err
		}
		p.Title.Text = fmt.Sprintf("%d. %s", i+1, p.Title.Text)
		plots = append(plots, p)
		grid[i/chartCols] = append(grid[i/chartCols], p)
	}
	for len(grid[rows-1]) < chartCols {
		grid[rows-1] = append(grid[rows-1], plot.New())
	}
	w, h := c.Size()
	c.SetColor(color.White)
	c.Fill(vg.Rectangle{Max: vg.Point{X: w, Y: h}}.Path())
	dc := draw.New(c)

	// A title line, then the panels below it.
	title := draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, chartTitleSize), Handler: plot.DefaultTextHandler}
	dc.FillText(title, vg.Point{X: vg.Inch / 4, Y: h - chartHeader/2}, chartTitle(res))
	body := draw.Crop(dc, 0, 0, 0, -chartHeader)
	// Half an inch left of the names, for a viewer whose font is wider than the chart's.
	tiles := draw.Tiles{Rows: rows, Cols: chartCols, PadX: vg.Inch / 2, PadY: vg.Inch / 3,
		PadTop: vg.Inch / 8, PadBottom: vg.Inch / 4, PadLeft: vg.Inch / 2, PadRight: vg.Inch / 4}
	canvases := plot.Align(grid, tiles, body)
	var drawn []draw.Canvas
	for i, p := range plots {
		cv := canvases[i/chartCols][i%chartCols]
		p.Draw(cv)
		drawn = append(drawn, cv)
	}
	return plots, drawn, nil
}

// chartTitle names the run: Redis version and topology, machine, Go version and date.
func chartTitle(res *Results) string {
	m := res.Meta
	redis := m.RedisVersion
	if m.Topology == topoCluster {
		redis += " cluster"
	}
	t := fmt.Sprintf("rlock benchmark: Redis %s, %s, %d CPUs, %s, %s", redis, m.OSArch, m.CPUs,
		m.GoVersion, m.Started.Format("2006-01-02"))
	if m.Quick {
		t += " (-quick: rough figures)"
	}
	return t
}

// plot draws one horizontal bar chart, first contender on top, each bar in its contender's
// colour. Rows with no figure (not run, failed, or not positive on a log scale) are left out.
func (pn panel) plot(res *Results) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = pn.title
	p.X.Label.Text = pn.axis
	s := res.scenario(pn.scenario)
	var names, ids []string
	var vals plotter.Values
	if s != nil {
		for _, r := range s.Rows {
			if !pn.references && slices.Contains([]string{"ping", "baseline", floorSpec.ID, floorShardedSpec.ID}, r.Contender) {
				continue
			}
			v := r.value(pn.key)
			if math.IsNaN(v) || math.IsInf(v, 0) || (pn.log && v <= 0) {
				continue
			}
			names = append([]string{r.Name}, names...)
			ids = append([]string{r.Contender}, ids...)
			vals = append(plotter.Values{v}, vals...)
		}
	}
	if len(vals) == 0 {
		p.Title.Text += " (not measured)"
		return p, nil
	}
	p.Add(plotter.NewGrid())
	width := vg.Points(14)
	// A bar chart per row, so that each row has its contender's colour. On a log axis a bar
	// cannot start at 0: it starts at the axis' lower end, stacked on an undrawn base bar.
	floor := 0.0
	if pn.log {
		floor = logFloor(minOf(vals))
		p.X.Scale = plot.LogScale{}
	}
	p.X.Tick.Marker = unitTicks{unit: pn.unit, log: pn.log}
	for i, v := range vals {
		bars, err := plotter.NewBarChart(plotter.Values{v - floor}, width)
		if err != nil {
			return nil, err
		}
		bars.Horizontal = true
		bars.XMin = float64(i)
		bars.Color = contenderColor(ids[i])
		bars.LineStyle.Width = 0
		if pn.log {
			base, err := plotter.NewBarChart(plotter.Values{floor}, width)
			if err != nil {
				return nil, err
			}
			base.Horizontal, base.XMin = true, float64(i)
			bars.StackOn(base)
		}
		p.Add(bars)
	}
	p.NominalY(names...)
	// Half a row of space above and below, so few bars do not sit on the
	// panel's edges.
	p.Y.Min, p.Y.Max = -0.5, float64(len(vals))-0.5

	// The figure at the end of each bar.
	xys := make(plotter.XYs, len(vals))
	labels := make([]string, len(vals))
	for i, v := range vals {
		xys[i] = plotter.XY{X: v, Y: float64(i)}
		labels[i] = " " + formatValue(v, pn.unit)
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
		p.X.Max *= 1.4
	}
	return p, nil
}

// logFloor returns the power of ten at least a decade below v: a log axis
// starting there shows its smallest bar at least a decade long.
func logFloor(v float64) float64 {
	return math.Pow(10, math.Floor(math.Log10(v))-1)
}

// unitTicks places ticks as gonum does (powers of ten on a log axis) and
// labels them briefly in a table unit: "250µs", "1ms", "25k", "2.5".
type unitTicks struct {
	unit string
	log  bool
}

// Ticks returns the ticks between lo and hi.
func (t unitTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	if t.log {
		ticks = plot.LogTicks{}.Ticks(lo, hi)
	} else {
		ticks = plot.DefaultTicks{}.Ticks(lo, hi)
	}
	for i := range ticks {
		if ticks[i].Label == "" {
			continue
		}
		if t.unit == unitMicros {
			ticks[i].Label = shortMicros(ticks[i].Value)
		} else {
			ticks[i].Label = shortNumber(ticks[i].Value)
		}
	}
	return ticks
}

// minOf returns the smallest value, +Inf for none.
func minOf(vs plotter.Values) float64 {
	m := math.Inf(1)
	for _, v := range vs {
		m = math.Min(m, v)
	}
	return m
}

// shortMicros writes a duration given in microseconds briefly: 250µs, 1ms, 1.5s.
func shortMicros(us float64) string {
	switch {
	case us < 1000:
		return shortFloat(us) + "µs"
	case us < 1e6:
		return shortFloat(us/1e3) + "ms"
	}
	return shortFloat(us/1e6) + "s"
}

// shortNumber writes a number briefly, thousands as k and millions as M:
// 2.5, 160, 25k, 1.5M.
func shortNumber(v float64) string {
	switch a := math.Abs(v); {
	case a < 1000:
		return shortFloat(v)
	case a < 1e6:
		return shortFloat(v/1e3) + "k"
	}
	return shortFloat(v/1e6) + "M"
}

// shortFloat writes v with at most 4 significant digits and no trailing zeros.
func shortFloat(v float64) string {
	return strconv.FormatFloat(v, 'g', 4, 64)
}
