package main

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestAnalyzeRW(t *testing.T) {
	// Two readers together (0-10, 2-12), a writer after them (15-20), a reader after it
	// (20-25: it began the instant the writer's release was stamped, which is no overlap),
	// and a write still waiting when the run ended at 100 (asked at 40).
	acqs := []acquisition{
		{Proc: 0, Worker: 1, Asked: 1, Got: 2, Freed: 12},
		{Proc: 0, Worker: 0, Asked: 0, Got: 0, Freed: 10},
		{Proc: 1, Worker: 0, Asked: 5, Got: 15, Freed: 20, Write: true},
		{Proc: 1, Worker: 1, Asked: 14, Got: 20, Freed: 25},
	}
	pending := []acquisition{{Proc: 0, Worker: 0, Asked: 40, Write: true}}
	h := analyzeRW(acqs, pending, 100)
	if h.Reads != 3 || h.Writes != 1 {
		t.Errorf("reads %d writes %d, want 3 and 1", h.Reads, h.Writes)
	}
	if h.Conflicts != 0 {
		t.Errorf("conflicts %d, want 0", h.Conflicts)
	}
	if h.MaxReaders != 2 {
		t.Errorf("max readers %d, want 2", h.MaxReaders)
	}
	slices.Sort(h.ReadWaits)
	if want := []time.Duration{0, 1, 6}; !slices.Equal(h.ReadWaits, want) {
		t.Errorf("read waits %v, want %v", h.ReadWaits, want)
	}
	if want := []time.Duration{10, 60}; !slices.Equal(h.WriteWaits, want) {
		t.Errorf("write waits %v, want %v (the pending one counts its wait so far)", h.WriteWaits, want)
	}
	if len(h.Waits) != 5 {
		t.Errorf("%d waits, want 5", len(h.Waits))
	}
	if acqs[0].Got != 2 {
		t.Error("analyzeRW reordered its argument")
	}
}

func TestAnalyzeRWConflicts(t *testing.T) {
	for _, c := range []struct {
		name string
		acqs []acquisition
		want int
	}{
		{"readers together", []acquisition{{Got: 0, Freed: 10}, {Got: 1, Freed: 5}, {Got: 4, Freed: 12}}, 0},
		{"reader inside a write", []acquisition{{Got: 0, Freed: 10, Write: true}, {Got: 5, Freed: 6}}, 1},
		{"writer inside a read", []acquisition{{Got: 0, Freed: 10}, {Got: 5, Freed: 6, Write: true}}, 1},
		{"two writers", []acquisition{{Got: 0, Freed: 10, Write: true}, {Got: 9, Freed: 11, Write: true}}, 1},
		// A long read began first: the writer conflicts with it, though a short read ended between.
		{"writer during a long read", []acquisition{{Got: 0, Freed: 100}, {Got: 1, Freed: 2}, {Got: 50, Freed: 60, Write: true}}, 1},
		// A read after a write that a later read outlived: no conflict.
		{"reads after a write", []acquisition{{Got: 0, Freed: 10, Write: true}, {Got: 11, Freed: 30}, {Got: 20, Freed: 25}}, 0},
		{"handoffs in a row", []acquisition{{Got: 0, Freed: 10, Write: true}, {Got: 10, Freed: 20, Write: true}, {Got: 20, Freed: 30}}, 0},
	} {
		if got := analyzeRW(c.acqs, nil, 0).Conflicts; got != c.want {
			t.Errorf("%s: %d conflicts, want %d", c.name, got, c.want)
		}
	}
}

func TestTogether(t *testing.T) {
	// Three holds at once at 5..6; a fourth begins as the first ends (10), no overlap.
	acqs := []acquisition{{Got: 0, Freed: 10}, {Got: 2, Freed: 8}, {Got: 5, Freed: 20}, {Got: 10, Freed: 12}}
	for _, c := range []struct{ limit, most, over int }{{0, 3, 0}, {2, 3, 1}, {3, 3, 0}, {1, 3, 3}} {
		most, over := together(acqs, c.limit)
		if most != c.most || over != c.over {
			t.Errorf("together(limit %d) = %d, %d; want %d, %d", c.limit, most, over, c.most, c.over)
		}
	}
	if most, over := together(nil, 4); most != 0 || over != 0 {
		t.Errorf("together(nil) = %d, %d", most, over)
	}
}

func TestAnalyzeSem(t *testing.T) {
	acqs := []acquisition{{Asked: 0, Got: 1, Freed: 5}, {Asked: 0, Got: 2, Freed: 6}, {Asked: 3, Got: 4, Freed: 9}}
	h := analyzeSem(acqs, []acquisition{{Asked: 7}}, 10, 2)
	if h.Count != 3 || h.MaxOut != 3 || h.OverPermits != 1 {
		t.Errorf("count %d max out %d over %d, want 3, 3, 1", h.Count, h.MaxOut, h.OverPermits)
	}
	if want := []time.Duration{1, 2, 1, 3}; !slices.Equal(h.Waits, want) {
		t.Errorf("waits %v, want %v", h.Waits, want)
	}
	if h := analyzeSem(acqs, nil, 10, 3); h.OverPermits != 0 {
		t.Errorf("3 permits: over %d, want 0", h.OverPermits)
	}
}

func TestReadHeavyVsMutex(t *testing.T) {
	s := &ScenarioResult{Rows: []*Row{
		{Contender: "rlock-pubsub", Values: map[string]num{"ops_per_s": 500, "write_wait_p99_us": 80000}},
		{Contender: "rlock-rw", Values: map[string]num{"ops_per_s": 2000, "write_wait_p99_us": 20000}},
		{Contender: "rlock-rw-fair", Error: "boom"},
	}}
	readHeavyVsMutex(s)
	if got := s.row("rlock-rw").value("ops_vs_mutex"); got != 4 {
		t.Errorf("ops vs mutex %v, want 4", got)
	}
	if got := s.row("rlock-rw").value("write_wait_vs_mutex"); got != 0.25 {
		t.Errorf("writer wait vs mutex %v, want 0.25", got)
	}
	if got := s.row("rlock-pubsub").value("ops_vs_mutex"); got != 1 {
		t.Errorf("mutex vs itself %v, want 1", got)
	}
	if s.row("rlock-rw-fair").Values != nil {
		t.Error("a failed row got figures")
	}

	// Without a Mutex row the ratios are n/a.
	s = &ScenarioResult{Rows: []*Row{{Contender: "rlock-rw", Values: map[string]num{"ops_per_s": 2000}}}}
	readHeavyVsMutex(s)
	if got := s.row("rlock-rw").value("ops_vs_mutex"); !math.IsNaN(got) {
		t.Errorf("no Mutex row: ops vs mutex %v, want NaN", got)
	}
}

func TestSelectContenders(t *testing.T) {
	ids := func(cs []contenderSpec) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	sel, err := selectContenders("rlock-rw,rlock-pubsub", rwContenders)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"rlock-pubsub", "rlock-rw"}; !slices.Equal(ids(sel), want) {
		t.Errorf("read-heavy selection %v, want %v (table order)", ids(sel), want)
	}
	sel, err = selectContenders("rlock-rw", contenders)
	if err != nil || len(sel) != 0 {
		t.Errorf("mutex selection of a read-write id: %v, %v; want none, no error", ids(sel), err)
	}
	if _, err := selectContenders("rlock-sem,nope", semContenders); err == nil {
		t.Error("an unknown id was accepted")
	}
	if sel, _ := selectContenders("all", semContenders); !slices.Equal(ids(sel), []string{"rlock-sem"}) {
		t.Errorf("all: %v", ids(sel))
	}
}

// TestKindSpecs: every contender of the read-heavy and semaphore scenarios can be built in
// a worker, and a worker finds it by its mode.
func TestKindSpecs(t *testing.T) {
	for _, c := range rwContenders {
		if c.NewRW == nil {
			t.Errorf("%s: no NewRW", c.ID)
		}
		if s, err := specByID(modeReadHeavy, c.ID); err != nil || s.Name != c.Name {
			t.Errorf("%s: specByID: %v", c.ID, err)
		}
	}
	for _, c := range semContenders {
		if c.NewSem == nil {
			t.Errorf("%s: no NewSem", c.ID)
		}
		if _, err := specByID(modeSemaphore, c.ID); err != nil {
			t.Errorf("%s: specByID: %v", c.ID, err)
		}
	}
	if _, err := specByID(modeSemaphore, "rlock-rw"); err == nil {
		t.Error("specByID found a read-write contender among the semaphores")
	}
	all := allContenders()
	for i, c := range all {
		if slices.ContainsFunc(all[i+1:], func(o contenderSpec) bool { return o.ID == c.ID }) {
			t.Errorf("%s listed twice", c.ID)
		}
	}
}
