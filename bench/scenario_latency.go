package main

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// pingContender is the floor of scenario 1: "Lock" is one PING and
// "Release" does nothing.
type pingContender struct{ c rueidis.Client }

var pingSpec = contenderSpec{ID: "ping", Name: "PING round trip", Settings: "one PING per round on a rueidis client (defaults)",
	New: func(cfg contenderConfig) (Contender, error) {
		c, err := newRueidis(cfg.Addrs, nil)
		if err != nil {
			return nil, err
		}
		return pingContender{c}, nil
	}}

func (p pingContender) Close()                 { p.c.Close() }
func (p pingContender) Mutex(key string) Mutex { return p }
func (p pingContender) Lock(ctx context.Context) (Hold, error) {
	return Hold{Release: func(context.Context) error { return nil }}, pingOnce(ctx, p.c)
}

// uncontended is one contender's run of scenario 1.
type uncontended struct {
	e      *env
	c      Contender
	m      Mutex
	lats   []time.Duration
	span   time.Duration
	slices []sliceCost // one per slice, in round order
}

// sliceCost is what one slice of scenario 1 cost: its ops, their latency p50, the CPU time
// this process used over the slice (every thread: the contender's own goroutines, GC, and the
// idle clients of the other contenders, which send nothing but an occasional PING), Redis'
// CPU time (used_cpu_user + used_cpu_sys, the whole server) and the time Redis spent in
// scripts (commandstats usec of EVAL/EVALSHA, their calls included).
type sliceCost struct {
	ops        int
	p50        float64 // ns
	cpu        time.Duration
	cpuOK      bool
	redisCPU   time.Duration
	scriptUsec int64
}

func (u *uncontended) slice(ctx context.Context, d time.Duration) error {
	before, err := u.e.serverCPU(ctx)
	if err != nil {
		return fmt.Errorf("INFO cpu: %w", err)
	}
	n0 := len(u.lats)
	// A lock+unlock still running 1s after the slice's end is cut: a stalled library fails its
	// row after a second rather than after opTimeout.
	sctx, cancel := context.WithTimeout(ctx, d+sliceGrace)
	defer cancel()
	cpu0, ok0 := processCPU()
	start := time.Now()
	for time.Since(start) < d && ctx.Err() == nil {
		t := time.Now()
		if err := lockUnlock(sctx, u.m); err != nil {
			return err
		}
		u.lats = append(u.lats, time.Since(t))
	}
	u.span += time.Since(start)
	cpu1, ok1 := processCPU()
	after, err := u.e.serverCPU(ctx)
	if err != nil {
		return fmt.Errorf("INFO cpu: %w", err)
	}
	lats := u.lats[n0:]
	u.slices = append(u.slices, sliceCost{
		ops: len(lats), p50: percentile(slices.Clone(lats), 50),
		cpu: cpu1 - cpu0, cpuOK: ok0 && ok1,
		redisCPU:   after.CPU - before.CPU,
		scriptUsec: after.Usec.delta(before.Usec).scripts(),
	})
	return ctx.Err()
}

func (u *uncontended) finish(ctx context.Context, row *Row) error {
	setLatencies(row, u.lats, u.span)
	setCosts(row, u.slices)
	counts, err := countCommands(ctx, u.e, true, func() error {
		for range countRounds {
			if err := lockUnlock(ctx, u.m); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	setCommandFigures(row, counts, countRounds, "_per_op")
	return nil
}

func (u *uncontended) close() { u.c.Close() }

// setCosts stores the CPU figures of all slices, per op.
func setCosts(row *Row, cs []sliceCost) {
	var ops int
	var cpu, redisCPU time.Duration
	var usec int64
	cpuOK := len(cs) > 0
	for _, c := range cs {
		ops += c.ops
		cpu += c.cpu
		cpuOK = cpuOK && c.cpuOK
		redisCPU += c.redisCPU
		usec += c.scriptUsec
	}
	if ops == 0 {
		return
	}
	n := float64(ops)
	row.set("cpu_us_per_op", math.NaN())
	if cpuOK {
		row.set("cpu_us_per_op", micros(float64(cpu))/n)
	}
	row.set("redis_cpu_us_per_op", micros(float64(redisCPU))/n)
	row.set("script_us_per_op", float64(usec)/n)
}

// medianRatio returns the median over rounds of a[r]/b[r] (slices of the same round), over
// the rounds both have; NaN when there are none.
func medianRatio(a, b []float64) float64 {
	var rs []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 && !math.IsNaN(a[i]) {
			rs = append(rs, a[i]/b[i])
		}
	}
	if len(rs) == 0 {
		return math.NaN()
	}
	slices.Sort(rs)
	if len(rs)%2 == 1 {
		return rs[len(rs)/2]
	}
	return (rs[len(rs)/2-1] + rs[len(rs)/2]) / 2
}

// vsPair sets, on every row of scenario 1, its figures relative to the baseline pair's, each
// the median over the rounds of the ratio of its slice to the pair's slice of the same round
// (so that a slow phase of the machine, which hits both, cancels out): latency p50, client CPU
// per op and Redis CPU per op.
func vsPair(s *ScenarioResult, runs map[string]*uncontended) {
	base := runs["baseline"]
	if base == nil || math.IsNaN(s.row("baseline").value("p50_us")) {
		return // the pair did not run, or failed
	}
	series := func(u *uncontended, f func(c sliceCost) float64) []float64 {
		var vs []float64
		for _, c := range u.slices {
			v := math.NaN()
			if c.ops > 0 {
				v = f(c)
			}
			vs = append(vs, v)
		}
		return vs
	}
	p50 := func(c sliceCost) float64 { return c.p50 }
	cpu := func(c sliceCost) float64 {
		if !c.cpuOK {
			return math.NaN()
		}
		return float64(c.cpu) / float64(c.ops)
	}
	redisCPU := func(c sliceCost) float64 { return float64(c.redisCPU) / float64(c.ops) }
	for _, r := range s.Rows {
		u := runs[r.Contender]
		if u == nil || r.Error != "" || r.Values == nil {
			continue
		}
		r.set("p50_vs_pair", medianRatio(series(u, p50), series(base, p50)))
		r.set("cpu_vs_pair", medianRatio(series(u, cpu), series(base, cpu)))
		r.set("redis_cpu_vs_pair", medianRatio(series(u, redisCPU), series(base, redisCPU)))
	}
}

func runUncontended(ctx context.Context, e *env) *ScenarioResult {
	d := e.pick(3*time.Second, 700*time.Millisecond)
	rounds := e.pickN(100, 35)
	s := &ScenarioResult{
		ID: "uncontended",
		Setup: fmt.Sprintf("One goroutine per contender takes and releases one key: 100 warm-up rounds, then %v in all, "+
			"in %d slices interleaved with the other contenders (each round gives every contender one slice, in turn). "+
			"Latency runs from the Lock call to the return of the release; p50 vs pair is the median over the rounds of "+
			"the contender's slice p50 over the baseline pair's slice p50 of the same round. "+
			"Client CPU/op is this process's CPU time (getrusage: user + system, every thread) over the contender's slices, "+
			"per lock+unlock; Redis CPU/op is the server's used_cpu_user + used_cpu_sys over the same slices; "+
			"script µs/op is the time Redis spent in EVAL/EVALSHA (INFO commandstats usec, the script's calls included). "+
			"The vs pair columns are medians over the rounds of the ratio to the pair's slice of the same round. "+
			"CPU time is not stretched by waiting on a busy machine as wall-clock time is. "+
			"The PING row sends one PING per round on a rueidis client: the round trip every lock pays at least. "+
			"Commands per op are counted in a separate pass of %d rounds (MONITOR slows Redis down). "+
			"A lock+unlock still running %v after its slice ended is cut, which fails the row.", d, rounds, countRounds, sliceGrace),
		Columns: []Column{
			{"p50_us", "lock+unlock p50", unitMicros},
			{"p99_us", "p99", unitMicros},
			{"ops_per_s", "ops/s", unitRate},
			{"p50_vs_pair", "p50 vs pair (median of rounds)", unitRatio},
			{"cpu_us_per_op", "client CPU/op (µs)", unitNum1},
			{"cpu_vs_pair", "client CPU vs pair", unitRatio},
			{"redis_cpu_us_per_op", "Redis CPU/op (µs)", unitNum1},
			{"redis_cpu_vs_pair", "Redis CPU vs pair", unitRatio},
			{"script_us_per_op", "script µs/op", unitNum1},
			{"client_cmds_per_op", "client cmds/op", unitNum},
			{"scripts_per_op", "scripts/op", unitNum},
		},
	}
	specs := append([]contenderSpec{pingSpec}, e.contendersFor("uncontended")...)
	runs := map[string]*uncontended{}
	e.interleave(ctx, s, specs, nil, rounds, d, func(ctx context.Context, spec contenderSpec) (sliceRunner, error) {
		c, err := spec.New(e.contenderConfig(e.keyPrefix("uncontended", spec.ID)))
		if err != nil {
			return nil, err
		}
		u := &uncontended{e: e, c: c, m: c.Mutex("u")}
		for range 100 {
			if err := lockUnlock(ctx, u.m); err != nil {
				c.Close()
				return nil, fmt.Errorf("warm-up: %w", err)
			}
		}
		runs[spec.ID] = u
		return u, nil
	}, func(r *Row) string {
		return "p50 " + formatValue(r.value("p50_us"), unitMicros) + ", " + formatValue(r.value("ops_per_s"), unitRate) +
			" ops/s, client CPU/op " + formatValue(r.value("cpu_us_per_op"), unitNum1) + "µs"
	})
	vsPair(s, runs)
	return s
}

// countRounds is the number of lock+unlock rounds whose commands are counted.
const countRounds = 200

// measurePing fills row with the PING round trip on a fresh rueidis client.
func measurePing(ctx context.Context, e *env, d time.Duration, row *Row) error {
	c, err := newRueidis(e.redis.Addrs, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	lats, span, err := timeLoop(ctx, e, "PING", d, 100, func() error {
		ctx, cancel := context.WithTimeout(ctx, opTimeout)
		defer cancel()
		return pingOnce(ctx, c)
	})
	if err != nil {
		return err
	}
	setLatencies(row, lats, span)
	return nil
}

func setLatencies(row *Row, lats []time.Duration, span time.Duration) {
	row.set("ops_per_s", float64(len(lats))/span.Seconds())
	row.set("p50_us", micros(percentile(lats, 50)))
	row.set("p99_us", micros(percentile(lats, 99)))
}

// parallel is one contender's run of scenario 2.
type parallel struct {
	e        *env
	c        Contender
	ms       []Mutex // one per goroutine, each on its own key
	lats     []time.Duration
	span     time.Duration
	errs     int64
	firstErr error
	slices   []sliceCost    // one per slice, in round order
	prof     *mutexProfiler // nil: the mutex profile is not read
	blocked  mutexDelay     // contention recorded over this contender's slices
}

func (p *parallel) slice(ctx context.Context, d time.Duration) error {
	before, err := p.e.serverCPU(ctx)
	if err != nil {
		return fmt.Errorf("INFO cpu: %w", err)
	}
	var delay0 mutexDelay
	if p.prof != nil {
		delay0 = p.prof.read()
	}
	// A lock+unlock still running 1s after the slice's end is cut and counted as an error.
	sctx, cancel := context.WithTimeout(ctx, d+sliceGrace)
	defer cancel()
	cpu0, ok0 := processCPU()
	start := time.Now()
	lats, errs, firstErr := hammer(sctx, p.ms, d)
	p.lats = append(p.lats, lats...)
	p.firstErr = cmpOr(p.firstErr, firstErr)
	p.span += time.Since(start)
	cpu1, ok1 := processCPU()
	if p.prof != nil {
		p.blocked = p.blocked.plus(p.prof.read().sub(delay0))
	}
	after, err := p.e.serverCPU(ctx)
	if err != nil {
		return fmt.Errorf("INFO cpu: %w", err)
	}
	p.errs += errs
	p.slices = append(p.slices, sliceCost{
		ops: len(lats), p50: percentile(slices.Clone(lats), 50),
		cpu: cpu1 - cpu0, cpuOK: ok0 && ok1,
		redisCPU:   after.CPU - before.CPU,
		scriptUsec: after.Usec.delta(before.Usec).scripts(),
	})
	return ctx.Err()
}

// sliceGrace is how long a lock+unlock of scenarios 1, 2 and 11 may run past its slice's end
// before it is cut (an error): a library that stalls costs the run a second, not opTimeout.
const sliceGrace = time.Second

// hammer runs one goroutine per handle, each taking and releasing its lock in a loop for d,
// and returns the latencies of all goroutines, the number of failed lock+unlocks and the first
// error. A goroutine stops early after 100 errors in all (a failing library).
func hammer(ctx context.Context, ms []Mutex, d time.Duration) ([]time.Duration, int64, error) {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		all      []time.Duration
		firstErr error
		errCount atomic.Int64
	)
	end := time.Now().Add(d)
	for _, m := range ms {
		wg.Go(func() {
			lats := make([]time.Duration, 0, 1024)
			for time.Now().Before(end) && ctx.Err() == nil {
				t := time.Now()
				if err := lockUnlock(ctx, m); err != nil {
					mu.Lock()
					firstErr = cmpOr(firstErr, err)
					mu.Unlock()
					if errCount.Add(1) > 100 {
						break // a failing library: stop hammering it
					}
					continue
				}
				lats = append(lats, time.Since(t))
			}
			mu.Lock()
			all = append(all, lats...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return all, errCount.Load(), firstErr
}

func (p *parallel) finish(_ context.Context, row *Row) error {
	if len(p.lats) == 0 {
		return fmt.Errorf("no lock+unlock succeeded: %v", p.firstErr)
	}
	setLatencies(row, p.lats, p.span)
	setCosts(row, p.slices)
	// The Redis-bound ceiling: on a server with a core of its own, Redis runs out of CPU first.
	row.set("ceiling_ops_per_s", ratioOf(1e6, row.value("redis_cpu_us_per_op")))
	if p.prof != nil {
		ops := float64(len(p.lats))
		row.set("blocked_us_per_op", micros(p.blocked.Pkg)/ops)
		row.set("blocked_all_us_per_op", micros(p.blocked.All)/ops)
		row.set("blocked_pct_of_p50", 100*ratioOf(micros(p.blocked.Pkg)/ops, row.value("p50_us")))
	}
	row.set("errors", float64(p.errs))
	if p.firstErr != nil {
		row.Note = "first error: " + p.firstErr.Error()
	}
	return nil
}

func (p *parallel) close() { p.c.Close() }

// plus adds two contention figures.
func (d mutexDelay) plus(o mutexDelay) mutexDelay {
	return mutexDelay{All: d.All + o.All, Pkg: d.Pkg + o.Pkg}
}

// parallelVsPair sets, on every row of scenario 2, its throughput, client CPU per op, Redis
// CPU per op and Redis-bound ceiling relative to the baseline pair's: throughput and CPU as the
// median over the rounds of the ratio to the pair's slice of the same round, the ceiling as
// the inverse of the Redis CPU ratio.
func parallelVsPair(s *ScenarioResult, runs map[string]*parallel) {
	base := runs["baseline"]
	if base == nil || math.IsNaN(s.row("baseline").value("ops_per_s")) {
		return
	}
	series := func(p *parallel, f func(c sliceCost) float64) []float64 {
		var vs []float64
		for _, c := range p.slices {
			v := math.NaN()
			if c.ops > 0 {
				v = f(c)
			}
			vs = append(vs, v)
		}
		return vs
	}
	ops := func(c sliceCost) float64 { return float64(c.ops) }
	cpu := func(c sliceCost) float64 {
		if !c.cpuOK {
			return math.NaN()
		}
		return float64(c.cpu) / float64(c.ops)
	}
	redisCPU := func(c sliceCost) float64 { return float64(c.redisCPU) / float64(c.ops) }
	for _, r := range s.Rows {
		p := runs[r.Contender]
		if p == nil || r.Error != "" || r.Values == nil {
			continue
		}
		// Every slice of a round lasts the same, so ops per slice stand for ops/s.
		r.set("ops_vs_pair", medianRatio(series(p, ops), series(base, ops)))
		r.set("cpu_vs_pair", medianRatio(series(p, cpu), series(base, cpu)))
		rc := medianRatio(series(p, redisCPU), series(base, redisCPU))
		r.set("redis_cpu_vs_pair", rc)
		r.set("ceiling_vs_pair", ratioOf(1, rc))
	}
}

// parallelGoroutines is the number of goroutines of scenario 2.
const parallelGoroutines = 64

func runParallel(ctx context.Context, e *env) *ScenarioResult {
	const goroutines = parallelGoroutines
	d := e.pick(3*time.Second, 500*time.Millisecond)
	rounds := e.pickN(6, 2)
	// Every contention on a sync.Mutex or RWMutex of this process is recorded while the
	// scenario runs (the cost: a stack walk per contended Unlock).
	prevFraction := runtime.SetMutexProfileFraction(1)
	defer runtime.SetMutexProfileFraction(prevFraction)
	prof := newMutexProfiler(rlockPackage)
	s := &ScenarioResult{
		ID: "parallel",
		Setup: fmt.Sprintf("%d goroutines share one client of the contender; each takes and releases its own key "+
			"in a loop, %v in all, in %d slices interleaved with the other contenders (one warm-up round each first). "+
			"ops/s counts lock+unlock pairs of all goroutines; a lock+unlock still running %v after its slice ended is cut "+
			"and counted in errors. Client CPU/op is this process's CPU time (getrusage) over "+
			"the contender's slices per lock+unlock, Redis CPU/op the server's used_cpu_user + used_cpu_sys%s, script µs/op "+
			"the EVAL/EVALSHA/FCALL usec of INFO commandstats; the vs pair columns are medians over the rounds of the "+
			"ratio to the baseline pair's slice of the same round. Redis-bound ceiling is 1s / Redis CPU per op: the "+
			"throughput when Redis, single-threaded, is the bottleneck, as on a server where it has a core of its own "+
			"and the clients run elsewhere (here Redis shares the cores with the client, so the measured ops/s are lower). "+
			"Blocked/op is the time goroutines spent waiting on sync mutexes released by the rlock package itself "+
			"(the client's own locks), from the Go mutex profile (fraction 1 during this scenario) over the contender's "+
			"slices, per lock+unlock; blocked %% of p50 is it over the op's p50, in percent; all mutexes counts every mutex of "+
			"the process (rueidis' included).", goroutines, d, rounds, sliceGrace, e.overMasters()),
		Columns: []Column{
			{"ops_per_s", "lock+unlock ops/s", unitRate},
			{"ops_vs_pair", "ops/s vs pair", unitRatio},
			{"p50_us", "p50", unitMicros},
			{"p99_us", "p99", unitMicros},
			{"cpu_us_per_op", "client CPU/op (µs)", unitNum1},
			{"cpu_vs_pair", "client CPU vs pair", unitRatio},
			{"redis_cpu_us_per_op", "Redis CPU/op (µs)", unitNum1},
			{"redis_cpu_vs_pair", "Redis CPU vs pair", unitRatio},
			{"script_us_per_op", "script µs/op", unitNum1},
			{"ceiling_ops_per_s", "Redis-bound ceiling ops/s", unitRate},
			{"ceiling_vs_pair", "ceiling vs pair", unitRatio},
			{"blocked_us_per_op", "blocked on rlock mutexes/op (µs)", unitNum},
			{"blocked_pct_of_p50", "blocked, % of p50", unitNum},
			{"blocked_all_us_per_op", "blocked, all mutexes/op (µs)", unitNum},
			{"errors", "errors", unitCount},
		},
	}
	runs := map[string]*parallel{}
	e.interleave(ctx, s, e.contendersFor("parallel"), nil, rounds, d, func(ctx context.Context, spec contenderSpec) (sliceRunner, error) {
		c, err := spec.New(e.contenderConfig(e.keyPrefix("parallel", spec.ID)))
		if err != nil {
			return nil, err
		}
		p := &parallel{e: e, c: c, ms: make([]Mutex, goroutines), prof: prof}
		for i := range p.ms {
			p.ms[i] = c.Mutex(fmt.Sprintf("p%d", i))
			if err := lockUnlock(ctx, p.ms[i]); err != nil {
				c.Close()
				return nil, fmt.Errorf("warm-up: %w", err)
			}
		}
		runs[spec.ID] = p
		return p, nil
	}, func(r *Row) string {
		return formatValue(r.value("ops_per_s"), unitRate) + " ops/s, Redis CPU/op " +
			formatValue(r.value("redis_cpu_us_per_op"), unitNum1) + "µs, blocked/op " +
			formatValue(r.value("blocked_us_per_op"), unitNum) + "µs"
	})
	parallelVsPair(s, runs)
	return s
}
