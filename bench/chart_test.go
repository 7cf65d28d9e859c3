package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
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

// TestWriteChart draws every panel, in both formats, and checks that each
// panel says which way is better.
func TestWriteChart(t *testing.T) {
	res := &Results{}
	for _, pn := range panels {
		if !strings.Contains(pn.axis, "lower is better") && !strings.Contains(pn.axis, "higher is better") {
			t.Errorf("panel %q does not say which way is better", pn.title)
		}
		res.Scenarios = append(res.Scenarios, &ScenarioResult{ID: pn.scenario, Rows: []*Row{
			{Contender: "a", Name: "a", Values: map[string]num{pn.key: 100}},
			{Contender: "b", Name: "b", Values: map[string]num{pn.key: 2500}},
		}})
	}
	dir := t.TempDir()
	for _, name := range []string{"chart.svg", "chart.png"} {
		if err := writeChart(filepath.Join(dir, name), res); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}
