package main

import (
	"math"
	"strconv"
	"strings"
)

// computeRatios turns the benchmark's targets into figures from the
// tables. A target whose figures were not measured is "n/a".
func computeRatios(res *Results) []Ratio {
	v := res.value
	var rs []Ratio

	// Uncontended: wall-clock as the median of per-round ratios; CPU, which waiting on a busy
	// machine does not stretch, per lock+unlock.
	for _, c := range []struct{ id, name string }{{"rlock-pubsub", "rlock PubSub"}, {"rlock-fair", "rlock fair"}} {
		rs = append(rs,
			newRatio("Uncontended lock+unlock within 1.15x of the baseline pair (wall clock)",
				c.name+" p50 / baseline p50, median of interleaved rounds", v("uncontended", c.id, "p50_vs_pair"), "<=", 1.15),
			newRatio("Uncontended client CPU per lock+unlock within 1.2x of the baseline pair's",
				c.name+" client CPU/op / baseline client CPU/op, median of rounds", v("uncontended", c.id, "cpu_vs_pair"), "<=", 1.2))
	}

	par := v("parallel", "rlock-pubsub", "ops_per_s")
	rs = append(rs,
		newRatio("Parallel throughput at least rueidislock's",
			"rlock PubSub ops/s / rueidislock ops/s", ratioOf(par, v("parallel", "rueidislock", "ops_per_s")), ">=", 1),
		newRatio("Parallel throughput at least 2x bsm/redislock's",
			"rlock PubSub ops/s / bsm/redislock ops/s", ratioOf(par, v("parallel", "redislock", "ops_per_s")), ">=", 2),
	)

	// rlock waits with classic pub/sub on one server and with sharded pub/sub on a cluster: its
	// floor is the one of the same kind.
	cluster := res.Meta.Topology == topoCluster
	floorKey, floorName := "handoff_vs_floor", "publish"
	if cluster {
		floorKey, floorName = "handoff_vs_sfloor", "spublish"
	}
	pp := v("pingpong", "rlock-pubsub", "handoff_p50_us")
	rs = append(rs,
		newRatio("Ping-pong fair handoff p50 at most 0.8x the floor ("+floorName+" + SET NX) row's",
			"rlock fair handoff p50 / "+floorName+" floor handoff p50", v("pingpong", "rlock-fair", floorKey), "<=", 0.8),
		newRatio("Ping-pong PubSub handoff p50 at least 20x better than Spin(100ms)",
			"Spin(100ms) handoff p50 / PubSub handoff p50", ratioOf(v("pingpong", "rlock-spin100ms", "handoff_p50_us"), pp), ">=", 20),
	)

	// Contended throughput: the fair mutex against the best of the peers that let the releaser
	// barge, keeping its order; the PubSub mutex against rueidislock.
	barging := maxOf(v("contended", "redsync", "acq_per_s"), v("contended", "redislock", "acq_per_s"))
	rs = append(rs,
		newRatio("Contended fair throughput at least the best barging peer's",
			"rlock fair acq/s / max(redsync, bsm/redislock) acq/s", ratioOf(v("contended", "rlock-fair", "acq_per_s"), barging), ">=", 1),
		newRatio("Contended fair share max/min at most 1.1",
			"rlock fair share max/min", v("contended", "rlock-fair", "share_max_min"), "<=", 1.1),
		newRatio("FIFO: the fair mutex serves in arrival order",
			"rlock fair inversions (all rounds)", v("fifo", "rlock-fair", "inversions"), "<=", 0),
		newRatio("Contended PubSub throughput at least rueidislock's",
			"rlock PubSub acq/s / rueidislock acq/s",
			ratioOf(v("contended", "rlock-pubsub", "acq_per_s"), v("contended", "rueidislock", "acq_per_s")), ">=", 1),
	)

	rs = append(rs,
		newRatio("Contended PubSub wait p99 no worse than bsm/redislock's",
			"rlock PubSub wait p99 / bsm/redislock wait p99",
			ratioOf(v("contended", "rlock-pubsub", "wait_p99_us"), v("contended", "redislock", "wait_p99_us")), "<=", 1),
		newRatio("Contended: no goroutine gets more than 2x the acquisitions of another",
			"rlock PubSub share max/min", v("contended", "rlock-pubsub", "share_max_min"), "<=", 2),
		newRatio("Commands per acquisition, PubSub, 3 processes",
			"rlock PubSub client commands / acquisition", v("contended", "rlock-pubsub", "client_cmds_per_acq"), "<=", 5),
		newRatio("Commands per acquisition, fair mutex, 3 processes",
			"rlock fair client commands / acquisition", v("contended", "rlock-fair", "client_cmds_per_acq"), "<=", 3.5),
	)

	// On a cluster a script's keys must share a slot, so holds of many names take a script per
	// slot; what is kept low there is round trips (the holds scenario's target below).
	if !cluster {
		for _, c := range []struct{ id, name string }{{"rlock-pubsub", "rlock mutex"}, {"rlock-fair", "rlock fair"}} {
			rs = append(rs, newRatio("10,000 watchdog holds renewed with at most 100 scripts per period",
				c.name+" scripts / renewal period", v("renewal", c.id, "scripts_per_period"), "<=", 100))
		}
	}

	// Holds at scale: the targets are about the largest size that ran (100,000; 1,000 in -quick).
	if r, n := largestHolds(res.scenario("holds")); r != nil {
		size := withThousands(n)
		rs = append(rs,
			newRatio("Watchdog holds: client heap per hold with the caller's Mutex value counted in, at most 1 KiB",
				"client heap bytes / hold, the Mutex included, "+size+" holds", r.value("heap_per_hold"), "<=", 1024),
			newRatio("Watchdog holds: renewal round trips per period at most holds/100 + 1",
				"renewal round trips / period, "+size+" holds", r.value("round_trips_per_period"), "<=", float64(n/100+1)),
			newRatio("Watchdog holds: one renewal round trip per node per period",
				"renewal round trips / period / master, "+size+" holds", r.value("round_trips_per_node_period"), "<=", 1),
		)
	}

	// Read-heavy: readers that share must show in throughput; writer preference must keep a
	// writer's wait no worse than behind a Mutex's queue of everybody.
	for _, c := range []struct{ id, name string }{{"rlock-rw", "rlock RWMutex"}, {"rlock-rw-fair", "rlock fair RWMutex"}} {
		rs = append(rs, newRatio("Read-heavy (90% reads): RWMutex throughput at least 2x the Mutex's",
			c.name+" ops/s / Mutex ops/s", v("readheavy", c.id, "ops_vs_mutex"), ">=", 2))
	}
	rs = append(rs,
		newRatio("Read-heavy: RWMutex writer wait p99 no worse than the Mutex's",
			"rlock RWMutex writer wait p99 / Mutex writer wait p99", v("readheavy", "rlock-rw", "write_wait_vs_mutex"), "<=", 1),
		newRatio("Semaphore (4 permits, 48 contenders): no goroutine gets more than 2x the acquisitions of another",
			"rlock Semaphore share max/min", v("semaphore", "rlock-sem", "share_max_min"), "<=", 2),
		newRatio("Commands per acquisition, semaphore, 3 processes (as the fair mutex)",
			"rlock Semaphore client commands / acquisition", v("semaphore", "rlock-sem", "client_cmds_per_acq"), "<=", 3.5),
	)
	return rs
}

// maxOf returns the largest of vs that is a number; NaN when none is.
func maxOf(vs ...float64) float64 {
	m := math.NaN()
	for _, v := range vs {
		if !math.IsNaN(v) && (math.IsNaN(m) || v > m) {
			m = v
		}
	}
	return m
}

// largestHolds returns the row of the holds scenario with the most holds that has figures, and
// its number of holds; nil when there is none.
func largestHolds(s *ScenarioResult) (*Row, int) {
	var best *Row
	most := 0
	if s == nil {
		return nil, 0
	}
	for _, r := range s.Rows {
		n, err := strconv.Atoi(strings.TrimPrefix(r.Contender, "holds-"))
		if err != nil || r.Error != "" || r.Values == nil || n <= most {
			continue
		}
		best, most = r, n
	}
	return best, most
}
