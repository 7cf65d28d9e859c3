package main

import (
	"fmt"
	"io"
	"strconv"
)

// Issue 17's goals: Redis CPU and calls per operation, client CPU and the client's own lock
// waits, each a ratio within one run, so that neither the machine's noise nor its core count
// moves them.

// goalKind is a lock kind with its row id in a scenario.
type goalKind struct{ id, name string }

var (
	goalMutex = goalKind{"rlock-pubsub", "rlock Mutex (PubSub)"}
	goalFair  = goalKind{"rlock-fair", "rlock fair Mutex"}
	// goalOtherKinds are the kinds whose uncontended target is 1.3x.
	goalOtherKinds = []goalKind{
		goalFair,
		{"rlock-rw-write", "rlock RWMutex (write)"},
		{"rlock-rw-read", "rlock RWMutex (read)"},
		{"rlock-rw-fair-write", "rlock fair RWMutex (write)"},
		{"rlock-rw-fair-read", "rlock fair RWMutex (read)"},
		{"rlock-sem-1", "rlock Semaphore (1 permit)"},
	}
	// goalExclusiveKinds are the kinds of the contended scenario.
	goalExclusiveKinds = []goalKind{
		goalMutex, goalFair,
		{"rlock-rw-write", "rlock RWMutex (write)"},
		{"rlock-rw-fair-write", "rlock fair RWMutex (write)"},
		{"rlock-sem-1", "rlock Semaphore (1 permit)"},
	}
)

// computeGoals compares the figures of a run with issue 17's goals. A goal whose figure was
// not measured (scenario or contender not run) is "n/a".
func computeGoals(res *Results) []Ratio {
	v := res.value
	var gs []Ratio

	// Uncontended: Redis CPU per lock+unlock over the pair's, median of interleaved rounds.
	gs = append(gs, newRatio("Uncontended: Redis CPU per lock+unlock at most 1.15x the pair's",
		goalMutex.name+" Redis CPU/op / pair's, median of rounds", v("uncontended", goalMutex.id, "redis_cpu_vs_pair"), "<=", 1.15))
	for _, k := range goalOtherKinds {
		gs = append(gs, newRatio("Uncontended: Redis CPU per lock+unlock at most 1.3x the pair's",
			k.name+" Redis CPU/op / pair's, median of rounds", v("uncontended", k.id, "redis_cpu_vs_pair"), "<=", 1.3))
	}

	// Parallel: 64 goroutines, one client, own key each.
	for _, k := range []goalKind{goalMutex, goalFair} {
		gs = append(gs,
			newRatio("Parallel: Redis CPU per op at most 1.25x the pair's",
				k.name+" Redis CPU/op / pair's, median of rounds", v("parallel", k.id, "redis_cpu_vs_pair"), "<=", 1.25),
			newRatio("Parallel: client CPU per op at most 1.2x the pair's",
				k.name+" client CPU/op / pair's, median of rounds", v("parallel", k.id, "cpu_vs_pair"), "<=", 1.2),
			newRatio("Parallel: time blocked on the client's own locks at most 2% of the op's p50",
				k.name+" mutex-profile wait in rlock per op / p50, in %", v("parallel", k.id, "blocked_pct_of_p50"), "<=", 2),
		)
	}

	// Contended and ping-pong, against the floor of the pub/sub kind rlock uses here.
	floorName := "publish"
	floorKey := "handoff_vs_floor"
	if res.Meta.Topology == topoCluster {
		floorName, floorKey = "spublish", "handoff_vs_sfloor"
	}
	for _, k := range goalExclusiveKinds {
		gs = append(gs,
			newRatio("Contended: server calls per acquisition at most 1.5x the floor's",
				k.name+" server calls/acq / "+floorName+" floor's", v("contended", k.id, "server_calls_vs_floor"), "<=", 1.5),
			newRatio("Contended: Redis CPU per acquisition at most 1.3x the floor's",
				k.name+" Redis CPU/acq / "+floorName+" floor's", v("contended", k.id, "redis_cpu_vs_floor"), "<=", 1.3),
		)
	}
	for _, k := range []goalKind{goalMutex, goalFair} {
		gs = append(gs,
			newRatio("Ping-pong: server calls per acquisition at most 1.5x the floor's",
				k.name+" server calls/acq / "+floorName+" floor's", v("pingpong", k.id, "server_calls_vs_floor"), "<=", 1.5),
			newRatio("Ping-pong: Redis CPU per acquisition at most 1.3x the floor's",
				k.name+" Redis CPU/acq / "+floorName+" floor's", v("pingpong", k.id, "redis_cpu_vs_floor"), "<=", 1.3),
		)
	}
	gs = append(gs, newRatio("Ping-pong: fair handoff p50 at most the floor's",
		goalFair.name+" handoff p50 / "+floorName+" floor's", v("pingpong", goalFair.id, floorKey), "<=", 1))

	// Scale: client heap per hold without the Mutex values the benchmark keeps, at the most holds
	// that ran (100,000 in a full run).
	r, n := largestHolds(res.scenario("holds"))
	size := "100,000"
	if r != nil {
		size = withThousands(n)
	}
	gs = append(gs, newRatio("Holds: at most 1 KiB of client heap per hold, not counting the Mutex",
		"client heap bytes / hold without the Mutex, "+size+" holds", r.value("heap_per_hold_excl_mutex"), "<=", 1024))
	return gs
}

// writeGoals prints issue 17's goals as a table; figures of a -quick run are marked rough.
func writeGoals(w io.Writer, gs []Ratio, quick bool) {
	fmt.Fprintf(w, "\n### Goals of issue 17 (ratios within this run)\n\n")
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
