package main

import (
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

// panel is one bar chart of the figure.
type panel struct {
	title, axis   string // the axis label says whether lower or higher is better
	scenario, key string
	unit          string // how bar and tick labels are written (a table unit)
	log           bool
	references    bool // include the reference rows: PING, baseline pair, floor
}

var panels = []panel{
	{"1. Uncontended lock+unlock p50", "lock+unlock time (lower is better)",
		"uncontended", "p50_us", unitMicros, false, true},
	{"1. Uncontended: client CPU per lock+unlock", "client CPU µs / lock+unlock (lower is better)",
		"uncontended", "cpu_us_per_op", unitNum1, false, true},
	{"2. Parallel (64 goroutines) throughput", "lock+unlock ops/s (higher is better)",
		"parallel", "ops_per_s", unitRate, false, true},
	{"3. Contended (3 processes x 16) wait p99", "wait p99, log scale (lower is better)",
		"contended", "wait_p99_us", unitMicros, true, false},
	{"3. Contended: client commands per acquisition", "client commands / acquisition (lower is better)",
		"contended", "client_cmds_per_acq", unitNum, false, false},
	{"4. Ping-pong cross-process handoff p50", "handoff p50, log scale (lower is better)",
		"pingpong", "handoff_p50_us", unitMicros, true, true},
	{"5. FIFO: order inversions per round (0 = FIFO)", "inversions / round (lower is better)",
		"fifo", "inversions_per_round", unitNum1, false, false},
	{"6. Renewal of 10,000 held locks: commands per 1s period", "client commands / period, log scale (lower is better)",
		"renewal", "client_cmds_per_period", unitNum1, true, false},
	{"7. Read-heavy (90% reads, 3 processes x 16) throughput", "holds/s, reads and writes (higher is better)",
		"readheavy", "ops_per_s", unitRate, false, false},
	{"8. Semaphore (4 permits, 3 processes x 16) throughput", "acquisitions/s (higher is better)",
		"semaphore", "acq_per_s", unitRate, false, false},
	{"8. Semaphore (4 permits, 48 contenders) wait p99", "wait p99 (lower is better)",
		"semaphore", "wait_p99_us", unitMicros, false, false},
	{"9. Watchdog holds on one client: client heap per hold", "bytes / hold (lower is better)",
		"holds", "heap_per_hold", unitBytes, false, false},
}

// writeChart draws the key comparisons as bar charts in one SVG, or PNG
// when path ends in .png.
func writeChart(path string, res *Results) error {
	const cols = 2
	draws := make([]func(*Results) (*plot.Plot, error), 0, len(panels)+len(extraPanels))
	for _, pn := range panels {
		draws = append(draws, pn.plot)
	}
	draws = append(draws, extraPanels...)
	rows := (len(draws) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for i, draw := range draws {
		p, err := draw(res)
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
	for i := range draws {
		grid[i/cols][i%cols].Draw(canvases[i/cols][i%cols])
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

// plot draws one horizontal bar chart, first contender on top. Rows with
// no figure (not run, failed, or not positive on a log scale) are left out.
func (pn panel) plot(res *Results) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = pn.title
	p.X.Label.Text = pn.axis
	s := res.scenario(pn.scenario)
	var names []string
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
			vals = append(plotter.Values{v}, vals...)
		}
	}
	if len(vals) == 0 {
		p.Title.Text += " (not measured)"
		return p, nil
	}
	p.Add(plotter.NewGrid())
	width := vg.Points(14)
	// On a log axis a bar cannot start at 0: it starts at the axis' lower
	// end, stacked on an undrawn base bar.
	var base *plotter.BarChart
	if pn.log {
		floor := logFloor(minOf(vals))
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
	}
	p.X.Tick.Marker = unitTicks{unit: pn.unit, log: pn.log}
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
	// Half a row of space above and below, so few bars do not sit on the
	// panel's edges.
	p.Y.Min, p.Y.Max = -0.5, float64(len(vals))-0.5

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
