package main

import (
	"math"
	"testing"
	"time"
)

func TestMedianRatio(t *testing.T) {
	for _, c := range []struct {
		a, b []float64
		want float64
	}{
		{[]float64{2, 3, 100}, []float64{1, 1, 1}, 3},              // an outlier round does not move it
		{[]float64{2, 4}, []float64{1, 1}, 3},                      // even count: the mean of the middle two
		{[]float64{2, 3, 4}, []float64{1, 1}, 2.5},                 // only the rounds both have
		{[]float64{2, math.NaN(), 6}, []float64{1, 1, 0}, 2},       // NaN and zero rounds are skipped
		{[]float64{1, 2}, []float64{2, math.NaN()}, 0.5},           //
		{nil, []float64{1}, math.NaN()},                            //
		{[]float64{math.NaN()}, []float64{math.NaN()}, math.NaN()}, //
	} {
		got := medianRatio(c.a, c.b)
		if got != c.want && !(math.IsNaN(got) && math.IsNaN(c.want)) {
			t.Errorf("medianRatio(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// TestVsPair checks that each vs-pair column is the median of per-round ratios, so that a
// round in which the pair was slow does not move it.
func TestVsPair(t *testing.T) {
	cost := func(p50 float64, cpuPerOp time.Duration) sliceCost {
		return sliceCost{ops: 100, p50: p50, cpu: 100 * cpuPerOp, cpuOK: true, redisCPU: 50 * cpuPerOp}
	}
	base := &uncontended{slices: []sliceCost{cost(100, 40), cost(100, 40), cost(300, 120)}}
	lock := &uncontended{slices: []sliceCost{cost(110, 48), cost(120, 44), cost(110, 48)}}
	s := &ScenarioResult{Rows: []*Row{
		{Contender: "baseline", Values: map[string]num{"p50_us": 0.1}},
		{Contender: "rlock", Values: map[string]num{"p50_us": 0.11}},
		{Contender: "failed", Error: "boom"},
	}}
	vsPair(s, map[string]*uncontended{"baseline": base, "rlock": lock, "failed": lock})
	r := s.row("rlock")
	if got := r.value("p50_vs_pair"); math.Abs(got-1.1) > 1e-9 {
		t.Errorf("p50 vs pair = %v, want 1.1 (rounds 1.1, 1.2, 0.37)", got)
	}
	if got := r.value("cpu_vs_pair"); math.Abs(got-1.1) > 1e-9 {
		t.Errorf("CPU vs pair = %v, want 1.1 (rounds 1.2, 1.1, 0.4)", got)
	}
	if got := r.value("redis_cpu_vs_pair"); math.Abs(got-1.1) > 1e-9 {
		t.Errorf("Redis CPU vs pair = %v, want 1.1", got)
	}
	if got := s.row("baseline").value("cpu_vs_pair"); got != 1 {
		t.Errorf("the pair against itself = %v, want 1", got)
	}
	if _, ok := s.row("failed").Values["cpu_vs_pair"]; ok {
		t.Error("a failed row got a ratio")
	}
	// Without the pair there are no ratios.
	s2 := &ScenarioResult{Rows: []*Row{{Contender: "rlock", Values: map[string]num{"p50_us": 1}}}}
	vsPair(s2, map[string]*uncontended{"rlock": lock})
	if _, ok := s2.row("rlock").Values["p50_vs_pair"]; ok {
		t.Error("a ratio without the pair")
	}
}

func TestSetCosts(t *testing.T) {
	row := &Row{}
	setCosts(row, []sliceCost{
		{ops: 100, cpu: 5 * time.Millisecond, cpuOK: true, redisCPU: 2 * time.Millisecond, scriptUsec: 300},
		{ops: 300, cpu: 15 * time.Millisecond, cpuOK: true, redisCPU: 6 * time.Millisecond, scriptUsec: 900},
	})
	for key, want := range map[string]float64{"cpu_us_per_op": 50, "redis_cpu_us_per_op": 20, "script_us_per_op": 3} {
		if got := row.value(key); math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", key, got, want)
		}
	}
	row = &Row{}
	setCosts(row, []sliceCost{{ops: 10, cpu: time.Millisecond}})
	if got := row.value("cpu_us_per_op"); !math.IsNaN(got) {
		t.Errorf("CPU per op without rusage = %v, want NaN", got)
	}
}

// TestParallelVsPair: throughput, client CPU and Redis CPU are medians of per-round ratios to
// the pair's slice, and the ceiling ratio is the inverse of the Redis CPU ratio.
func TestParallelVsPair(t *testing.T) {
	cost := func(ops int, cpuPerOp, redisPerOp time.Duration) sliceCost {
		return sliceCost{ops: ops, cpu: time.Duration(ops) * cpuPerOp, cpuOK: true, redisCPU: time.Duration(ops) * redisPerOp}
	}
	base := &parallel{slices: []sliceCost{cost(1000, 20, 10), cost(500, 40, 20), cost(1000, 20, 10)}}
	lock := &parallel{slices: []sliceCost{cost(500, 30, 20), cost(250, 60, 40), cost(100, 30, 25)}}
	s := &ScenarioResult{Rows: []*Row{
		{Contender: "baseline", Values: map[string]num{"ops_per_s": 1}},
		{Contender: "rlock", Values: map[string]num{"ops_per_s": 1}},
	}}
	parallelVsPair(s, map[string]*parallel{"baseline": base, "rlock": lock})
	r := s.row("rlock")
	for key, want := range map[string]float64{"ops_vs_pair": 0.5, "cpu_vs_pair": 1.5, "redis_cpu_vs_pair": 2, "ceiling_vs_pair": 0.5} {
		if got := r.value(key); got != want {
			t.Errorf("%s = %v, want %v", key, got, want)
		}
	}
	if got := s.row("baseline").value("redis_cpu_vs_pair"); got != 1 {
		t.Errorf("pair vs itself = %v", got)
	}
	// Without the pair's row nothing is set.
	s = &ScenarioResult{Rows: []*Row{{Contender: "rlock", Values: map[string]num{"ops_per_s": 1}}}}
	parallelVsPair(s, map[string]*parallel{"rlock": lock})
	if _, ok := s.row("rlock").Values["ops_vs_pair"]; ok {
		t.Error("a ratio without the pair")
	}
}
