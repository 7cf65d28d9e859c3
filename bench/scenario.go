package main

import (
	"context"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"strings"
	"time"
)

// env is what every scenario runs with.
type env struct {
	redis              *redisServer
	nodes              []node          // the benchmark's own connection to each measured node: INFO, ECHO markers
	replicas           []node          // and to each replica of a cluster (leak checks)
	contenders         []contenderSpec // of the mutex scenarios (1-6)
	rwContenders       []contenderSpec // of the read-heavy scenario (7)
	semContenders      []contenderSpec // of the semaphore scenario (8)
	transferContenders []contenderSpec // of the transfer scenario (12)
	progress           *progress
	runID              string // makes every key of this run unique
	quick              bool
	monitor            bool   // count client-sent commands with MONITOR
	rawDir             string // if set, raw acquisitions are written there
	workerProfDir      string // if set, the contended scenario's workers write Go profiles there
	holdSizes          []int  // -holds: hold counts of the holds scenario (nil: the default)
}

// contenderConfig is the configuration of a contender of this run with keys under prefix.
func (e *env) contenderConfig(prefix string) contenderConfig {
	return contenderConfig{Addrs: e.redis.Addrs, Cluster: e.redis.Cluster(), KeyPrefix: prefix}
}

// overMasters says, in a scenario's setup text, that a server figure is a sum over the masters
// (empty on a standalone server).
func (e *env) overMasters() string {
	if !e.redis.Cluster() {
		return ""
	}
	return fmt.Sprintf(" (summed over the %d masters)", len(e.nodes))
}

// masters names the measured nodes in a setup text: "the 3 masters", or "1 (one server)".
func (e *env) masters() string {
	if !e.redis.Cluster() {
		return "1 (one server)"
	}
	return fmt.Sprintf("the %d masters", len(e.nodes))
}

// keyPrefix is the key namespace of one scenario and contender.
func (e *env) keyPrefix(scenario, contender string) string {
	return fmt.Sprintf("rlock-bench:%s:%s:%s", e.runID, scenario, contender)
}

// pick returns d, or q in -quick runs.
func (e *env) pick(d, q time.Duration) time.Duration {
	if e.quick {
		return q
	}
	return d
}

// pickN returns n, or q in -quick runs.
func (e *env) pickN(n, q int) int {
	if e.quick {
		return q
	}
	return n
}

// scenario is one of the measurements.
type scenario struct {
	ID    string
	Num   int
	Title string
	Run   func(ctx context.Context, e *env) *ScenarioResult
}

var scenarios = []scenario{
	{"uncontended", 1, "1. Uncontended lock+unlock", runUncontended},
	{"parallel", 2, "2. Parallel: 64 goroutines, one key each", runParallel},
	{"contended", 3, "3. Contended: one key, 3 processes x 16 goroutines", runContended},
	{"pingpong", 4, "4. Ping-pong: two processes alternate on one key", runPingPong},
	{"fifo", 5, "5. FIFO: 20 waiters arriving 20ms apart", runFIFO},
	{"renewal", 6, "6. Renewal: 10,000 held locks under automatic renewal", runRenewal},
	{"readheavy", 7, "7. Read-heavy: 90% reads, 3 processes x 16 goroutines, RWMutex vs Mutex", runReadHeavy},
	{"semaphore", 8, "8. Semaphore: 4 permits, 3 processes x 16 goroutines", runSemaphore},
	{"holds", 9, "9. Holds at scale: watchdog holds on one client", runHolds},
	{"waiters", 10, "10. Waiters at scale: 10 waiters per held name on one client", runWaiters},
	{"goroutines", 11, "11. Scale: throughput against goroutines on one client, one key each", runGoroutines},
	{"transfers", 12, "12. Transfers: random pairs of 100 accounts, 3 processes x 16 goroutines", runTransfers},
	{"election", 13, "13. Leader election: handoff, a killed leader, 100 observers", runElection},
}

// contendersFor returns the selected contenders that run in scenario (see contenderSpec.Only).
func (e *env) contendersFor(scenario string) []contenderSpec {
	var sel []contenderSpec
	for _, c := range e.contenders {
		if len(c.Only) == 0 || slices.Contains(c.Only, scenario) {
			sel = append(sel, c)
		}
	}
	return sel
}

// eachContender runs one scenario (s.ID) for every selected contender that
// passes filter, one row each. A failing or panicking contender gets its
// error in its row; the run goes on.
func (e *env) eachContender(ctx context.Context, s *ScenarioResult, filter func(contenderSpec) string,
	run func(ctx context.Context, spec contenderSpec, row *Row) error) {
	for _, spec := range e.contendersFor(s.ID) {
		if ctx.Err() != nil {
			return
		}
		row := &Row{Contender: spec.ID, Name: spec.Name}
		s.Rows = append(s.Rows, row)
		if why := e.skip(spec, filter); why != "" {
			row.Note = why
			continue
		}
		e.progress.Linef("  %-22s running", spec.Name)
		start := time.Now()
		err := safeRun(func() error { return run(ctx, spec, row) })
		if err != nil {
			row.Error, _, _ = strings.Cut(err.Error(), "\n")
			e.progress.Linef("  %-22s failed after %.1fs: %v", spec.Name, time.Since(start).Seconds(), err)
			continue
		}
		e.progress.Linef("  %-22s done in %.1fs", spec.Name, time.Since(start).Seconds())
	}
}

// skip says why spec does not run here (its Redis version, or filter), or "" when it runs.
func (e *env) skip(spec contenderSpec, filter func(contenderSpec) string) string {
	if spec.MinRedis > 0 && !versionAtLeast(e.redis.Version, spec.MinRedis) {
		return fmt.Sprintf("n/a: needs Redis %d or later", spec.MinRedis)
	}
	if filter != nil {
		return filter(spec)
	}
	return ""
}

// safeRun turns a panic into an error.
func safeRun(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return f()
}

// waitersOnly skips contenders that cannot wait for a held lock.
func waitersOnly(spec contenderSpec) string {
	if !spec.Waits {
		return "n/a: cannot wait for a held lock"
	}
	return ""
}

// micros converts nanoseconds (as percentile returns them) to microseconds.
func micros(ns float64) float64 { return ns / 1e3 }

// opTimeout bounds every single lock operation of the in-process
// scenarios, so a stuck library fails its row instead of hanging the run.
const opTimeout = 10 * time.Second

// lockUnlock takes and releases m once.
func lockUnlock(ctx context.Context, m Mutex) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	h, err := m.Lock(ctx)
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	if err := h.Release(ctx); err != nil {
		return fmt.Errorf("unlock: %w", err)
	}
	return nil
}

// timeLoop runs op warmup times, then for d, and returns the latency of
// each timed run and the timed span.
func timeLoop(ctx context.Context, e *env, label string, d time.Duration, warmup int, op func() error) ([]time.Duration, time.Duration, error) {
	for range warmup {
		if err := op(); err != nil {
			return nil, 0, err
		}
	}
	stop := e.progress.TrackTime(label, d)
	defer stop()
	lats := make([]time.Duration, 0, 1<<14)
	start := time.Now()
	for time.Since(start) < d && ctx.Err() == nil {
		t := time.Now()
		if err := op(); err != nil {
			return nil, 0, err
		}
		lats = append(lats, time.Since(t))
	}
	return lats, time.Since(start), ctx.Err()
}

// A sliceRunner is one contender's measurement, run a slice at a time by
// interleave.
type sliceRunner interface {
	// slice measures for d more.
	slice(ctx context.Context, d time.Duration) error
	// finish fills the row from all slices.
	finish(ctx context.Context, row *Row) error
	close()
}

// interleave measures the contenders in rounds: each round gives every
// contender a slice of d/rounds in turn, so that slow drifts of a shared
// machine (other load, CPU clocks) hit every contender alike instead of
// whichever ran at a bad moment. Failed contenders drop out.
func (e *env) interleave(ctx context.Context, s *ScenarioResult, specs []contenderSpec, filter func(contenderSpec) string,
	rounds int, d time.Duration, open func(ctx context.Context, spec contenderSpec) (sliceRunner, error), summary func(*Row) string) {
	type entry struct {
		row *Row
		r   sliceRunner
	}
	var live []*entry
	fail := func(en *entry, err error) {
		en.row.Error, _, _ = strings.Cut(err.Error(), "\n")
		e.progress.Linef("  %-22s failed: %v", en.row.Name, err)
	}
	for _, spec := range specs {
		en := &entry{row: &Row{Contender: spec.ID, Name: spec.Name}}
		s.Rows = append(s.Rows, en.row)
		if why := e.skip(spec, filter); why != "" {
			en.row.Note = why
			continue
		}
		err := safeRun(func() (err error) { en.r, err = open(ctx, spec); return err })
		if err != nil {
			fail(en, err)
			continue
		}
		live = append(live, en)
	}
	defer func() {
		for _, en := range live {
			en.r.close()
		}
	}()
	sliceD := d / time.Duration(rounds)
	stop := e.progress.TrackTime(fmt.Sprintf("%d contenders, %d rounds", len(live), rounds),
		time.Duration(len(live))*d)
	for r := range rounds {
		// Each round starts one contender later, so that none always runs
		// right after the same neighbour.
		for i := range live {
			en := live[(i+r)%len(live)]
			if en.row.Error != "" || ctx.Err() != nil {
				continue
			}
			if err := safeRun(func() error { return en.r.slice(ctx, sliceD) }); err != nil {
				fail(en, err)
			} else if sliceD >= time.Second {
				e.progress.Linef("  %-22s run %d/%d done", en.row.Name, r+1, rounds)
			}
		}
		// Short slices: a line per round, or per tenth of them when there are many.
		if sliceD < time.Second && (rounds <= 10 || (r+1)%(rounds/10) == 0 || r+1 == rounds) {
			e.progress.Linef("  round %d/%d done", r+1, rounds)
		}
	}
	stop()
	for _, en := range live {
		if en.row.Error != "" || ctx.Err() != nil {
			continue
		}
		if err := safeRun(func() error { return en.r.finish(ctx, en.row) }); err != nil {
			fail(en, err)
			continue
		}
		e.progress.Linef("  %-22s %s", en.row.Name, summary(en.row))
	}
}

// cmpOr returns a if it is not nil, else b.
func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// sleepCtx sleeps for d unless ctx ends first; it reports whether it slept.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// setCommandFigures stores the command counts divided by per.
func setCommandFigures(row *Row, c commandCounts, per float64, suffix string) {
	div := func(n int64) float64 {
		if per <= 0 {
			return math.NaN()
		}
		return float64(n) / per
	}
	row.set("scripts"+suffix, div(c.Stats.scripts()))
	row.set("server_calls"+suffix, div(c.Stats.total()))
	row.ServerCalls = c.Stats
	setClientFigure(row, c, per, suffix)
}

// setClientFigure stores the client-sent commands (from MONITOR) divided by per.
func setClientFigure(row *Row, c commandCounts, per float64, suffix string) {
	if c.MonitorErr != nil || per <= 0 {
		row.set("client_cmds"+suffix, math.NaN())
		if c.MonitorErr != nil {
			row.Note = joinNotes(row.Note, "client commands not counted: "+c.MonitorErr.Error())
		}
		return
	}
	row.set("client_cmds"+suffix, float64(c.Monitor.clientTotal())/per)
	row.ClientCommands = c.Monitor.Client
}
