package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestComputeGoals: each goal reads its figure from its scenario and row, compares it with its
// limit, and is n/a when the figure is missing; a quick run's statuses are marked rough.
func TestComputeGoals(t *testing.T) {
	res := &Results{Meta: Meta{Topology: topoStandalone}, Scenarios: []*ScenarioResult{
		{ID: "uncontended", Rows: []*Row{
			{Contender: "rlock-pubsub", Values: map[string]num{"redis_cpu_vs_pair": 1.2}},
			{Contender: "rlock-fair", Values: map[string]num{"redis_cpu_vs_pair": 1.25}},
		}},
		{ID: "parallel", Rows: []*Row{
			{Contender: "rlock-pubsub", Values: map[string]num{"redis_cpu_vs_pair": 1.1, "cpu_vs_pair": 1.5, "blocked_pct_of_p50": 0.5}},
		}},
		{ID: "contended", Rows: []*Row{
			{Contender: "rlock-sem-1", Values: map[string]num{"server_calls_vs_floor": 7, "redis_cpu_vs_floor": 1.3, "overlaps": 0}},
		}},
		{ID: "pingpong", Rows: []*Row{
			{Contender: "rlock-fair", Values: map[string]num{"handoff_vs_floor": 0.9, "handoff_vs_sfloor": 2, "overlaps": 0}},
			{Contender: "rlock-rw-write", Values: map[string]num{"server_calls_vs_floor": 1.9, "overlaps": 1}},
		}},
		{ID: "holds", Rows: []*Row{
			{Contender: "holds-1000", Values: map[string]num{"heap_per_hold_excl_mutex": 100}},
			{Contender: "holds-100000", Values: map[string]num{"heap_per_hold_excl_mutex": 2000}},
		}},
	}}
	status := map[string]string{}
	for _, g := range computeGoals(res) {
		status[g.Target+" / "+g.Figure] = g.Status
	}
	want := map[string]string{
		"Uncontended: Redis CPU per lock+unlock at most 1.2x the pair's / rlock Mutex (PubSub) Redis CPU/op / pair's, median of rounds":                                "met",
		"Uncontended: Redis CPU per lock+unlock at most 1.2x the pair's / rlock fair Mutex Redis CPU/op / pair's, median of rounds":                                    "missed",
		"Uncontended: Redis CPU per lock+unlock at most 1.35x the pair's / rlock RWMutex (read) Redis CPU/op / pair's, median of rounds":                               "n/a",
		"Parallel (issue 17): Redis CPU per op at most 1.25x the pair's / rlock Mutex (PubSub) Redis CPU/op / pair's, median of rounds":                                "met",
		"Parallel (issue 17): client CPU per op at most 1.2x the pair's / rlock Mutex (PubSub) client CPU/op / pair's, median of rounds":                               "missed",
		"Parallel (issue 17): time blocked on the client's own locks at most 2% of the op's p50 / rlock Mutex (PubSub) mutex-profile wait in rlock per op / p50, in %": "met",
		"Contended: server calls per acquisition at most 2x the floor's / rlock Semaphore (1 permit) server calls/acq / publish floor's":                               "missed",
		"Contended: Redis CPU per acquisition at most 1.3x the floor's / rlock Semaphore (1 permit) Redis CPU/acq / publish floor's":                                   "met",
		"Ping-pong: server calls per acquisition at most 2x the floor's / rlock RWMutex (write) server calls/acq / publish floor's":                                    "met",
		"Ping-pong: fair handoff p50 at most the floor's / rlock fair Mutex handoff p50 / publish floor's":                                                             "met",
		"Ping-pong: no two holders at once / overlaps, every rlock kind":                                                                                               "missed",
		"Contended: no two holders at once / overlaps, every rlock kind":                                                                                               "met",
		"FIFO: the fair Mutex serves in arrival order / rlock fair inversions (all rounds)":                                                                            "n/a",
		"Holds: rlock's own client heap per hold (the Mutex values left out) at most 1 KiB / client heap bytes / hold without the Mutex, 100,000 holds":                "missed",
	}
	for k, w := range want {
		if got, ok := status[k]; !ok || got != w {
			t.Errorf("%s: %q (present %v), want %q", k, got, ok, w)
		}
	}

	// On a cluster the fair handoff is compared with the spublish floor.
	res.Meta.Topology = topoCluster
	for _, g := range computeGoals(res) {
		if strings.HasPrefix(g.Target, "Ping-pong: fair handoff") && (g.Status != "missed" || float64(g.Value) != 2) {
			t.Errorf("cluster fair handoff goal: %v %s, want 2 missed", g.Value, g.Status)
		}
	}

	var b bytes.Buffer
	writeGoals(&b, computeGoals(res), true)
	if !strings.Contains(b.String(), "| met (rough) |") || !strings.Contains(b.String(), "| n/a |") {
		t.Errorf("quick goals table without rough marks or n/a:\n%s", b.String())
	}
}
