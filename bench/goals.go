package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
)

// The goals: issue 28's (the protocol's floor for every kind, contended and ping-pong; the
// uncontended path near the pair; nothing else worse), and issue 17's parallel ones. Each is
// a ratio or a count within one run, so that neither the machine's noise nor its core count
// moves it.

// goalKind is a lock kind with its row id in a scenario.
type goalKind struct{ id, name string }

var (
	goalMutex = goalKind{"rlock-pubsub", "rlock Mutex (PubSub)"}
	goalFair  = goalKind{"rlock-fair", "rlock fair Mutex"}
	// goalLeasedKinds are the kinds with per-hold leases, whose uncontended target is 1.35x.
	goalLeasedKinds = []goalKind{
		{"rlock-rw-write", "rlock RWMutex (write)"},
		{"rlock-rw-read", "rlock RWMutex (read)"},
		{"rlock-rw-fair-write", "rlock fair RWMutex (write)"},
		{"rlock-rw-fair-read", "rlock fair RWMutex (read)"},
		{"rlock-sem-1", "rlock Semaphore (1 permit)"},
	}
	// goalExclusiveKinds are the kinds of the contended and ping-pong scenarios.
	goalExclusiveKinds = []goalKind{
		goalMutex, goalFair,
		{"rlock-rw-write", "rlock RWMutex (write)"},
		{"rlock-rw-fair-write", "rlock fair RWMutex (write)"},
		{"rlock-sem-1", "rlock Semaphore (1 permit)"},
	}
)

// computeGoals compares the figures of a run with the goals. A goal whose figure was not
// measured (scenario or contender not run) is "n/a".
func computeGoals(res *Results) []Ratio {
	v := res.value
	var gs []Ratio

	// Uncontended: Redis CPU per lock+unlock over the pair's, median of interleaved rounds.
	for _, k := range []goalKind{goalMutex, goalFair} {
		gs = append(gs, newRatio("Uncontended: Redis CPU per lock+unlock at most 1.2x the pair's",
			k.name+" Redis CPU/op / pair's, median of rounds", v("uncontended", k.id, "redis_cpu_vs_pair"), "<=", 1.2))
	}
	for _, k := range goalLeasedKinds {
		gs = append(gs, newRatio("Uncontended: Redis CPU per lock+unlock at most 1.35x the pair's",
			k.name+" Redis CPU/op / pair's, median of rounds", v("uncontended", k.id, "redis_cpu_vs_pair"), "<=", 1.35))
	}

	// Contended and ping-pong, against the floor of the pub/sub kind rlock uses here.
	floorName := "publish"
	floorKey := "handoff_vs_floor"
	if res.Meta.Topology == topoCluster {
		floorName, floorKey = "spublish", "handoff_vs_sfloor"
	}
	for _, sc := range []struct{ id, name string }{{"contended", "Contended"}, {"pingpong", "Ping-pong"}} {
		for _, k := range goalExclusiveKinds {
			gs = append(gs,
				newRatio(sc.name+": server calls per acquisition at most 2x the floor's",
					k.name+" server calls/acq / "+floorName+" floor's", v(sc.id, k.id, "server_calls_vs_floor"), "<=", 2),
				newRatio(sc.name+": Redis CPU per acquisition at most 1.3x the floor's",
					k.name+" Redis CPU/acq / "+floorName+" floor's", v(sc.id, k.id, "redis_cpu_vs_floor"), "<=", 1.3),
			)
		}
	}
	gs = append(gs, newRatio("Ping-pong: fair handoff p50 at most the floor's",
		goalFair.name+" handoff p50 / "+floorName+" floor's", v("pingpong", goalFair.id, floorKey), "<=", 1))

	// Nothing else worse: arrival order, safety, heap.
	gs = append(gs, newRatio("FIFO: the fair Mutex serves in arrival order",
		"rlock fair inversions (all rounds)", v("fifo", goalFair.id, "inversions"), "<=", 0))
	for _, sc := range []struct{ id, name string }{{"contended", "Contended"}, {"pingpong", "Ping-pong"}} {
		gs = append(gs, newRatio(sc.name+": no two holders at once",
			"overlaps, every rlock kind", sumOf(res, sc.id, goalExclusiveKinds, "overlaps"), "<=", 0))
	}
	gs = append(gs,
		newRatio("Read-heavy: no write hold beside another hold",
			"conflicts, rlock RWMutex and fair RWMutex",
			sumOf(res, "readheavy", []goalKind{{"rlock-rw", ""}, {"rlock-rw-fair", ""}}, "conflicts"), "<=", 0),
		newRatio("Semaphore: never more holds than permits",
			"over permits, rlock Semaphore", v("semaphore", "rlock-sem", "over_permits"), "<=", 0),
	)
	// Scale: client heap per hold without the Mutex values the benchmark keeps, at the most holds
	// that ran (100,000 in a full run).
	r, n := largestHolds(res.scenario("holds"))
	size := "100,000"
	if r != nil {
		size = withThousands(n)
	}
	gs = append(gs, newRatio("Holds: rlock's own client heap per hold (the Mutex values left out) at most 1 KiB",
		"client heap bytes / hold without the Mutex, "+size+" holds", r.value("heap_per_hold_excl_mutex"), "<=", 1024))

	// Issue 17's parallel goals: 64 goroutines, one client, own key each.
	for _, k := range []goalKind{goalMutex, goalFair} {
		gs = append(gs,
			newRatio("Parallel (issue 17): Redis CPU per op at most 1.25x the pair's",
				k.name+" Redis CPU/op / pair's, median of rounds", v("parallel", k.id, "redis_cpu_vs_pair"), "<=", 1.25),
			newRatio("Parallel (issue 17): client CPU per op at most 1.2x the pair's",
				k.name+" client CPU/op / pair's, median of rounds", v("parallel", k.id, "cpu_vs_pair"), "<=", 1.2),
			newRatio("Parallel (issue 17): time blocked on the client's own locks at most 2% of the op's p50",
				k.name+" mutex-profile wait in rlock per op / p50, in %", v("parallel", k.id, "blocked_pct_of_p50"), "<=", 2),
		)
	}
	return gs
}

// sumOf adds figure key over the rows of kinds in scenario; NaN when none of them has it.
func sumOf(res *Results, scenario string, kinds []goalKind, key string) float64 {
	sum := math.NaN()
	for _, k := range kinds {
		if x := res.value(scenario, k.id, key); !math.IsNaN(x) {
			if math.IsNaN(sum) {
				sum = 0
			}
			sum += x
		}
	}
	return sum
}

// writeGoals prints the goals as a table; figures of a -quick run are marked rough.
func writeGoals(w io.Writer, gs []Ratio, quick bool) {
	fmt.Fprintf(w, "\n### Goals of issues 28 and 17 (ratios and counts within this run)\n\n")
	if quick {
		fmt.Fprintf(w, "A -quick run: short slices and few rounds, so these figures are rough; judge the goals on a full run.\n\n")
	}
	fmt.Fprintf(w, "| goal | figure | value | goal | status |\n|---|---|---:|---:|---|\n")
	for _, g := range gs {
		status := g.Status
		if quick && status != "n/a" {
			status += " (rough)"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s %s | %s |\n", g.Target, g.Figure,
			formatValue(float64(g.Value), unitNum), g.Cmp, strconv.FormatFloat(g.Limit, 'g', -1, 64), status)
	}
}
