package main

// computeRatios turns the benchmark's targets into figures from the
// tables. A target whose figures were not measured is "n/a".
func computeRatios(res *Results) []Ratio {
	sc := func(id string) *ScenarioResult {
		for _, s := range res.Scenarios {
			if s.ID == id {
				return s
			}
		}
		return nil
	}
	v := func(scenario, contender, key string) float64 {
		return sc(scenario).row(contender).value(key)
	}
	var rs []Ratio

	base := v("uncontended", "baseline", "p50_us")
	for _, c := range []struct{ id, name string }{{"rlock-pubsub", "rlock PubSub"}, {"rlock-fair", "rlock fair"}} {
		rs = append(rs, newRatio("Uncontended lock+unlock within 1.15x of the baseline pair",
			c.name+" p50 / baseline p50", ratioOf(v("uncontended", c.id, "p50_us"), base), "<=", 1.15))
	}

	par := v("parallel", "rlock-pubsub", "ops_per_s")
	rs = append(rs,
		newRatio("Parallel throughput at least rueidislock's",
			"rlock PubSub ops/s / rueidislock ops/s", ratioOf(par, v("parallel", "rueidislock", "ops_per_s")), ">=", 1),
		newRatio("Parallel throughput at least 2x bsm/redislock's",
			"rlock PubSub ops/s / bsm/redislock ops/s", ratioOf(par, v("parallel", "redislock", "ops_per_s")), ">=", 2),
	)

	pp := v("pingpong", "rlock-pubsub", "handoff_p50_us")
	rs = append(rs,
		newRatio("Ping-pong PubSub handoff p50 within 4x the PING round trip",
			"rlock PubSub handoff p50 / PING p50", ratioOf(pp, v("pingpong", "ping", "handoff_p50_us")), "<=", 4),
		newRatio("Ping-pong PubSub handoff p50 at least 20x better than Spin(100ms)",
			"Spin(100ms) handoff p50 / PubSub handoff p50", ratioOf(v("pingpong", "rlock-spin100ms", "handoff_p50_us"), pp), ">=", 20),
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

	for _, c := range []struct{ id, name string }{{"rlock-pubsub", "rlock mutex"}, {"rlock-fair", "rlock fair"}} {
		rs = append(rs, newRatio("10,000 watchdog holds renewed with at most 100 scripts per period",
			c.name+" scripts / renewal period", v("renewal", c.id, "scripts_per_period"), "<=", 100))
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
