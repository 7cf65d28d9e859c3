package main

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	for _, c := range []struct {
		p    float64
		want float64
	}{{50, 3}, {99, 5}, {0, 1}, {20, 1}, {21, 2}} {
		if got := percentile(ds, c.p); got != c.want {
			t.Errorf("percentile(%v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := percentile(nil, 50); !math.IsNaN(got) {
		t.Errorf("percentile(nil) = %v, want NaN", got)
	}
}

func TestInversions(t *testing.T) {
	for _, c := range []struct {
		order []int
		want  int
	}{{[]int{0, 1, 2, 3}, 0}, {[]int{3, 2, 1, 0}, 6}, {[]int{1, 0, 2, 3}, 1}, {nil, 0}} {
		if got := inversions(c.order); got != c.want {
			t.Errorf("inversions(%v) = %d, want %d", c.order, got, c.want)
		}
	}
}

func TestAnalyzeHolds(t *testing.T) {
	// Process 0 holds twice (taking the lock straight back once) while
	// process 1 waits from t=5; process 1 gets it at 40, after the release
	// at 30. Its cross-process wait counts from the first release after it
	// asked (10), its switch from the last one (30).
	acqs := []acquisition{
		{Proc: 1, Asked: 5, Got: 40, Freed: 50},
		{Proc: 0, Asked: 0, Got: 1, Freed: 10},
		{Proc: 0, Asked: 10, Got: 12, Freed: 30},
	}
	h := analyzeHolds(acqs, nil, 0)
	if h.Count != 3 || h.Overlaps != 0 {
		t.Fatalf("count %d overlaps %d, want 3 and 0", h.Count, h.Overlaps)
	}
	if want := []time.Duration{2, 10}; !equal(h.Handoffs, want) {
		t.Errorf("handoffs %v, want %v", h.Handoffs, want)
	}
	if want := []time.Duration{30}; !equal(h.CrossWaits, want) {
		t.Errorf("cross waits %v, want %v", h.CrossWaits, want)
	}
	if want := []time.Duration{10}; !equal(h.Switches, want) {
		t.Errorf("switches %v, want %v", h.Switches, want)
	}
	if h.FreeAcquires != 2 {
		t.Errorf("free acquires %d, want 2", h.FreeAcquires)
	}

	// Process 1 asked again at 55 and was still waiting at the end (100):
	// its wait so far counts, and its cross-process wait would start at a
	// release by process 0 after 55, of which there is none.
	pend := analyzeHolds(acqs, []acquisition{{Proc: 1, Asked: 55}, {Proc: 0, Asked: 31}}, 100)
	if want := []time.Duration{1, 2, 35, 45, 69}; !equal(sorted(pend.Waits), want) {
		t.Errorf("waits with pending %v, want %v", sorted(pend.Waits), want)
	}
	if want := []time.Duration{30, 50}; !equal(sorted(pend.CrossWaits), want) {
		t.Errorf("cross waits with pending %v, want %v", sorted(pend.CrossWaits), want)
	}

	overlap := analyzeHolds([]acquisition{{Proc: 0, Got: 0, Freed: 10}, {Proc: 1, Got: 5, Freed: 20}}, nil, 0)
	if overlap.Overlaps != 1 {
		t.Errorf("overlaps %d, want 1", overlap.Overlaps)
	}
}

func sorted(ds []time.Duration) []time.Duration {
	out := slices.Clone(ds)
	slices.Sort(out)
	return out
}

func equal(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestShareRatio(t *testing.T) {
	workers := [][2]int{{0, 0}, {0, 1}, {1, 0}}
	if r, s := shareRatio(map[[2]int]int{{0, 0}: 4, {0, 1}: 2, {1, 0}: 8}, workers); r != 4 || s != 0 {
		t.Errorf("got %v, %d; want 4, 0", r, s)
	}
	if r, s := shareRatio(map[[2]int]int{{0, 0}: 4}, workers); !math.IsInf(r, 1) || s != 2 {
		t.Errorf("got %v, %d; want +Inf, 2", r, s)
	}
}

func TestParseMonitorLine(t *testing.T) {
	for _, c := range []struct {
		line   string
		name   string
		script bool
		ok     bool
	}{
		{`+1700000000.123456 [0 127.0.0.1:50000] "EVALSHA" "ab12" "1" "k"` + "\r\n", "evalsha", false, true},
		{`+1700000000.123500 [0 lua] "hset" "k" "f" "1"` + "\r\n", "hset", true, true},
		{`+1700000000.123500 [0 unix:/tmp/r.sock] "ping"` + "\r\n", "ping", false, true},
		{"+OK\r\n", "", false, false},
	} {
		name, script, ok := parseMonitorLine([]byte(c.line))
		if name != c.name || script != c.script || ok != c.ok {
			t.Errorf("parseMonitorLine(%q) = %q, %v, %v; want %q, %v, %v", c.line, name, script, ok, c.name, c.script, c.ok)
		}
	}
}

func TestCommandStats(t *testing.T) {
	before := parseCommandStats("# Commandstats\r\ncmdstat_evalsha:calls=10,usec=5\r\ncmdstat_info:calls=3,usec=1\r\n")
	after := parseCommandStats("# Commandstats\r\ncmdstat_evalsha:calls=15,usec=9\r\ncmdstat_hset:calls=7,usec=1\r\n" +
		"cmdstat_info:calls=5,usec=1\r\ncmdstat_echo:calls=2,usec=1\r\ncmdstat_eval:calls=1,usec=1\r\n")
	d := after.delta(before)
	if d.scripts() != 6 || d.total() != 13 {
		t.Errorf("delta %v: scripts %d total %d, want 6 and 13", d, d.scripts(), d.total())
	}
}
