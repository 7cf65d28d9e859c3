package main

import (
	"math"
	"testing"
	"time"
)

// TestFloorSubQueue: each message wakes the waiter of the process that has waited longest,
// once; a waiter queued twice is queued once; one that leaves is not woken.
func TestFloorSubQueue(t *testing.T) {
	s := &floorSub{}
	a, b, c := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1)
	s.enqueue(a)
	s.enqueue(b)
	s.enqueue(a)
	s.enqueue(c)
	s.leave(b)
	woken := func(ch chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	s.wakeOne()
	if !woken(a) || woken(b) || woken(c) {
		t.Fatal("the first message did not wake exactly the longest waiter")
	}
	s.wakeOne()
	if woken(b) || !woken(c) {
		t.Fatal("the second message did not wake the next waiter still queued")
	}
	s.wakeOne() // nobody queued: dropped
	if woken(a) || woken(b) || woken(c) {
		t.Fatal("a message with nobody queued woke someone")
	}
}

// TestFloorCourtesy: a release that reached another process opens a window of twice its
// round trip, 1ms to 10ms; one that reached only this process's own subscription does not.
func TestFloorCourtesy(t *testing.T) {
	f := &floor{subs: map[string]*floorSub{"ch": {}}, yielding: map[string]time.Time{}, countsAll: true}
	f.courtesy("ch", "k", 1, time.Millisecond) // only our own subscription heard it
	if d := f.courtesyLeft("k"); d != 0 {
		t.Errorf("window %v after a release nobody else heard", d)
	}
	f.courtesy("ch", "k", 2, 3*time.Millisecond)
	if d := f.courtesyLeft("k"); d <= 5*time.Millisecond || d > 6*time.Millisecond {
		t.Errorf("window %v, want about 6ms (2 round trips)", d)
	}
	f.courtesy("other", "k2", 1, 100*time.Microsecond) // not subscribed here: 1 is another process
	if d := f.courtesyLeft("k2"); d <= 0 || d > time.Millisecond {
		t.Errorf("window %v, want 1ms (the least)", d)
	}
	f.courtesy("other", "k3", 1, time.Second)
	if d := f.courtesyLeft("k3"); d <= 9*time.Millisecond || d > 10*time.Millisecond {
		t.Errorf("window %v, want 10ms (the most)", d)
	}
	// Classic pub/sub on a cluster: PUBLISH counts only its own node's subscribers, so the window
	// opens after every release, also one that seemed to reach nobody.
	g := &floor{subs: map[string]*floorSub{"ch": {}}, yielding: map[string]time.Time{}, countsAll: false}
	g.courtesy("ch", "k", 0, time.Millisecond)
	if d := g.courtesyLeft("k"); d <= time.Millisecond || d > 2*time.Millisecond {
		t.Errorf("window %v after a release on a cluster, want 2ms", d)
	}
	f.yielding["old"] = time.Now().Add(-time.Millisecond)
	if d := f.courtesyLeft("old"); d > 0 {
		t.Errorf("a past window has %v left", d)
	}
	if _, ok := f.yielding["old"]; ok {
		t.Error("a past window was kept")
	}
	if f.queued("ch") || f.queued("none") {
		t.Error("queued with nobody waiting")
	}
	f.subs["ch"].enqueue(make(chan struct{}, 1))
	if !f.queued("ch") {
		t.Error("not queued with a waiter queued")
	}
}

// TestVsFloor: every row with a handoff p50 gets its ratio to each floor row's (publish and
// spublish); without a floor row the ratio is NaN.
func TestVsFloor(t *testing.T) {
	s := &ScenarioResult{Rows: []*Row{
		{Contender: "ping", Values: map[string]num{"handoff_p50_us": 50}},
		{Contender: "floor", Values: map[string]num{"handoff_p50_us": 200}},
		{Contender: "floor-spublish", Values: map[string]num{"handoff_p50_us": 100}},
		{Contender: "rlock-fair", Values: map[string]num{"handoff_p50_us": 150}},
		{Contender: "rlock-spin", Values: map[string]num{"acq_per_s": 3}},
		{Contender: "broken", Error: "x"},
	}}
	vsFloor(s, false)
	for id, want := range map[string]float64{"ping": 0.25, "floor": 1, "floor-spublish": 0.5, "rlock-fair": 0.75} {
		if got := s.row(id).value("handoff_vs_floor"); got != want {
			t.Errorf("%s vs floor = %v, want %v", id, got, want)
		}
	}
	for id, want := range map[string]float64{"ping": 0.5, "floor": 2, "floor-spublish": 1, "rlock-fair": 1.5} {
		if got := s.row(id).value("handoff_vs_sfloor"); got != want {
			t.Errorf("%s vs spublish floor = %v, want %v", id, got, want)
		}
	}
	if _, ok := s.row("rlock-spin").Values["handoff_vs_floor"]; ok {
		t.Error("a row without a handoff got a ratio")
	}
	s = &ScenarioResult{Rows: []*Row{{Contender: "rlock-fair", Values: map[string]num{"handoff_p50_us": 150}}}}
	vsFloor(s, false)
	if got := s.row("rlock-fair").value("handoff_vs_floor"); !math.IsNaN(got) {
		t.Errorf("vs floor without a floor row = %v, want NaN", got)
	}
	if got := s.row("rlock-fair").value("handoff_vs_sfloor"); !math.IsNaN(got) {
		t.Errorf("vs spublish floor without its row = %v, want NaN", got)
	}
}

// TestCostVsFloor: server calls and Redis CPU per acquisition are divided by the publish
// floor's on one server and by the spublish floor's on a cluster; rows without the figure get
// no ratio.
func TestCostVsFloor(t *testing.T) {
	rows := func() *ScenarioResult {
		return &ScenarioResult{Rows: []*Row{
			{Contender: "floor", Values: map[string]num{"server_calls_per_acq": 7, "redis_cpu_us_per_acq": 20}},
			{Contender: "floor-spublish", Values: map[string]num{"server_calls_per_acq": 3.5, "redis_cpu_us_per_acq": 40}},
			{Contender: "rlock-fair", Values: map[string]num{"server_calls_per_acq": 14, "redis_cpu_us_per_acq": 30}},
			{Contender: "ping", Values: map[string]num{"handoff_p50_us": 50}},
		}}
	}
	s := rows()
	costVsFloor(s, false)
	if got := s.row("rlock-fair").value("server_calls_vs_floor"); got != 2 {
		t.Errorf("standalone server calls vs floor = %v, want 2", got)
	}
	if got := s.row("rlock-fair").value("redis_cpu_vs_floor"); got != 1.5 {
		t.Errorf("standalone Redis CPU vs floor = %v, want 1.5", got)
	}
	if _, ok := s.row("ping").Values["server_calls_vs_floor"]; ok {
		t.Error("a row without server calls got a ratio")
	}
	s = rows()
	costVsFloor(s, true)
	if got := s.row("rlock-fair").value("server_calls_vs_floor"); got != 4 {
		t.Errorf("cluster server calls vs spublish floor = %v, want 4", got)
	}
	if got := s.row("rlock-fair").value("redis_cpu_vs_floor"); got != 0.75 {
		t.Errorf("cluster Redis CPU vs spublish floor = %v, want 0.75", got)
	}
}

// TestSkipOldRedis: the sharded floor needs Redis 7 (SPUBLISH); its row says so on older ones.
func TestSkipOldRedis(t *testing.T) {
	old := &env{redis: &redisServer{Version: "6.2.14"}}
	if why := old.skip(floorShardedSpec, waitersOnly); why != "n/a: needs Redis 7 or later" {
		t.Errorf("on 6.2: %q", why)
	}
	if why := old.skip(floorSpec, waitersOnly); why != "" {
		t.Errorf("classic floor on 6.2: %q", why)
	}
	cur := &env{redis: &redisServer{Version: "7.0.15"}}
	if why := cur.skip(floorShardedSpec, waitersOnly); why != "" {
		t.Errorf("on 7.0: %q", why)
	}
	if why := cur.skip(contenderSpec{ID: "baseline"}, waitersOnly); why == "" {
		t.Error("the filter was not applied")
	}
}

// TestFloorOnly: the floors run in the contended and ping-pong scenarios only.
func TestFloorOnly(t *testing.T) {
	e := &env{contenders: []contenderSpec{{ID: "baseline"}, floorSpec, floorShardedSpec, {ID: "rlock-pubsub", Waits: true}}}
	for scenario, want := range map[string]int{"contended": 4, "pingpong": 4, "uncontended": 2, "fifo": 2, "renewal": 2} {
		if got := len(e.contendersFor(scenario)); got != want {
			t.Errorf("%s: %d contenders, want %d", scenario, got, want)
		}
	}
}
