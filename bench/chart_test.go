package main

import (
	"bytes"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/vgimg"
)

func TestLogFloor(t *testing.T) {
	for _, c := range []struct{ v, want float64 }{{72800, 1000}, {100000, 10000}, {101000, 10000}, {67.3, 1}} {
		if got := logFloor(c.v); got != c.want {
			t.Errorf("logFloor(%v) = %v, want %v", c.v, got, c.want)
		}
	}
}

func TestTickLabels(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{shortNumber(0), "0"}, {shortNumber(2.5), "2.5"}, {shortNumber(160), "160"},
		{shortNumber(25000), "25k"}, {shortNumber(1.5e6), "1.5M"},
		{shortMicros(250), "250µs"}, {shortMicros(1000), "1ms"}, {shortMicros(1.5e6), "1.5s"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	// gonum's own labels here are "0.00", "2500.00", "5000.00", "7500.00".
	var labels []string
	for _, tk := range (unitTicks{unit: unitRate}).Ticks(0, 7600) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if want := []string{"0", "2.5k", "5k", "7.5k"}; !slices.Equal(labels, want) {
		t.Errorf("rate ticks = %q, want %q", labels, want)
	}
}

// chartContenders returns the contenders of scenario's rows, as the scenarios make them.
func chartContenders(scenario string) []contenderSpec {
	var rows []contenderSpec
	switch scenario {
	case "uncontended":
		rows = append(rows, pingSpec)
	case "contended":
		rows = append(rows, floorSpec, floorShardedSpec)
	case "pingpong":
		rows = append(rows, pingSpec, floorSpec, floorShardedSpec)
	case "readheavy":
		return rwContenders
	case "semaphore":
		return semContenders
	case "holds":
		return []contenderSpec{{ID: "holds-1000", Name: "rlock Mutex, 1,000 holds"},
			{ID: "holds-100000", Name: "rlock Mutex, 100,000 holds"}}
	case "goroutines":
		for _, c := range contenders {
			if slices.Contains(scaleContenders, c.ID) {
				rows = append(rows, c)
			}
		}
		return rows
	}
	for _, c := range contenders {
		known := slices.ContainsFunc(rows, func(r contenderSpec) bool { return r.ID == c.ID })
		if !known && (len(c.Only) == 0 || slices.Contains(c.Only, scenario)) {
			rows = append(rows, c)
		}
	}
	return rows
}

// chartResults returns results with a figure for every panel from every contender of its
// scenario, under its real name (the longest names included).
func chartResults(t *testing.T) *Results {
	t.Helper()
	res := &Results{}
	for _, pn := range chartPanels {
		id, keys := "goroutines", []string{}
		switch pn := pn.(type) {
		case panel:
			id, keys = pn.scenario, []string{pn.key}
		case goroutinesPanel:
			for _, n := range scaleGoroutines {
				keys = append(keys, opsKey(n))
			}
		default:
			t.Fatalf("a panel of type %T", pn)
		}
		s := res.scenario(id)
		if s == nil {
			s = &ScenarioResult{ID: id}
			for _, c := range chartContenders(id) {
				s.Rows = append(s.Rows, &Row{Contender: c.ID, Name: c.Name, Values: map[string]num{}})
			}
			res.Scenarios = append(res.Scenarios, s)
		}
		for i, r := range s.Rows {
			for _, k := range keys {
				r.Values[k] = num(100 + 900*float64(i))
			}
		}
	}
	return res
}

// TestWriteChart draws every panel, in both formats, and checks what can be read of each at
// the chart's own size: numbered 1, 2, ... in order; its title (which says which way is
// better, on its axis) and its axis label within its tile; every contender in one colour,
// distinct from the others' in its panel.
func TestWriteChart(t *testing.T) {
	res := chartResults(t)
	dir := t.TempDir()
	for _, name := range []string{"chart.svg", "chart.png"} {
		if err := writeChart(filepath.Join(dir, name), res); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "chart.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("@font-face")) || bytes.Contains(b, []byte("font-family:Liberation Serif;")) {
		t.Errorf("the SVG does not embed its font, or names it without fallbacks")
	}

	rows := (len(chartPanels) + chartCols - 1) / chartCols
	plots, canvases, err := drawChart(vgimg.New(chartWidth, vg.Length(rows)*chartRowHeight+chartHeader), res)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range plots {
		title := p.Title.Text
		if want := fmt.Sprintf("%d. ", i+1); !strings.HasPrefix(title, want) {
			t.Errorf("panel %d is titled %q", i+1, title)
		}
		if strings.Contains(title, "not measured") {
			t.Errorf("%q: not measured", title)
		}
		axis := p.X.Label.Text + p.Y.Label.Text
		if !strings.Contains(axis, "lower is better") && !strings.Contains(axis, "higher is better") {
			t.Errorf("%q does not say which way is better", title)
		}
		// Room for a viewer that draws the chart in a font wider than its own (DejaVu Serif is
		// about a quarter wider than Liberation Serif).
		const wider = 1.3
		c := canvases[i]
		for _, line := range strings.Split(title, "\n") {
			if w, room := p.Title.TextStyle.Width(line), c.Max.X-c.Min.X; w*wider > room {
				t.Errorf("%q is %.0fpt wide, its panel %.0fpt", line, w, room)
			}
		}
		// An axis label is centred on the plot: it may reach under the names left of it, and
		// into the padding right of it.
		data := p.DataCanvas(c)
		if w, room := p.X.Label.TextStyle.Width(p.X.Label.Text), data.Max.X-data.Min.X+vg.Inch/2; w*wider > room {
			t.Errorf("%q: its axis label %q is %.0fpt wide, the plot %.0fpt", title, p.X.Label.Text, w, room)
		}
		if w, room := p.Y.Label.TextStyle.Width(p.Y.Label.Text), data.Max.Y-data.Min.Y; w*wider > room {
			t.Errorf("%q: its axis label %q is %.0fpt long, the plot %.0fpt", title, p.Y.Label.Text, w, room)
		}
	}
	for _, s := range res.Scenarios {
		seen := map[color.RGBA]string{}
		for _, r := range s.Rows {
			if strings.HasPrefix(r.Contender, "holds-") { // rows of one contender, rlock Mutex
				continue
			}
			c := contenderColor(r.Contender)
			if other, ok := seen[c]; ok {
				t.Errorf("scenario %s: %s and %s have one colour", s.ID, other, r.Contender)
			}
			seen[c] = r.Contender
		}
	}
}
