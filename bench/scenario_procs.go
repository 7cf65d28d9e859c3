package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// procRun is what a multi-process run gathered.
type procRun struct {
	Acqs     []acquisition
	Pending  []acquisition // Locks still waiting when the run ended
	End      int64         // when the run ended, Unix ns
	Span     time.Duration
	Errors   int
	FirstErr string
	Counts   commandCounts
	// RedisCPU is the server's CPU time (used_cpu_user + used_cpu_sys, summed over the
	// masters) from the start message to the last worker's report.
	RedisCPU time.Duration
}

// runProcs runs job (its contender, goroutines, hold and mode) in procs
// worker processes, all on one key, for d, and counts Redis commands over
// the run (with MONITOR when monitor is set). label, if not empty, gets a
// progress bar.
func runProcs(ctx context.Context, e *env, job workerJob, scenario string, procs int,
	d time.Duration, monitor bool, label string) (procRun, error) {
	var pr procRun
	ws := make([]*workerProc, 0, procs)
	defer func() {
		for _, w := range ws {
			w.stop(10 * time.Second)
		}
	}()
	for p := range procs {
		job.Addrs, job.Cluster = e.redis.Addrs, e.redis.Cluster()
		job.KeyPrefix, job.Key, job.Proc = e.keyPrefix(scenario, job.Contender), "k", p
		if e.workerProfDir != "" && !monitor && job.Mode == modeMutex && strings.HasPrefix(scenario, "contended-") {
			job.Profile = filepath.Join(e.workerProfDir, fmt.Sprintf("%s-%s-proc%d", scenario, job.Contender, p))
		}
		w, err := startWorker(ctx, job)
		if err != nil {
			return pr, err
		}
		ws = append(ws, w)
	}
	for _, w := range ws {
		if _, err := w.next(ctx, 30*time.Second); err != nil {
			return pr, fmt.Errorf("worker start: %w", err)
		}
	}
	var err error
	pr.Counts, err = countCommands(ctx, e, monitor, func() error {
		cpu0, err := e.serverCPU(ctx)
		if err != nil {
			return fmt.Errorf("INFO cpu: %w", err)
		}
		// Start a little ahead so every worker is sleeping until the same instant.
		start := time.Now().Add(100 * time.Millisecond)
		end := start.Add(d)
		b, _ := json.Marshal(startMsg{Start: start.UnixNano(), End: end.UnixNano()})
		for _, w := range ws {
			if _, err := w.stdin.Write(append(b, '\n')); err != nil {
				return fmt.Errorf("worker start message: %w", err)
			}
		}
		if label != "" {
			stop := e.progress.TrackTime(label, d+100*time.Millisecond)
			defer stop()
		}
		for _, w := range ws {
			m, err := w.next(ctx, d+time.Minute)
			if err != nil {
				return err
			}
			pr.Acqs = append(pr.Acqs, m.Acqs...)
			pr.Pending = append(pr.Pending, m.Pending...)
			pr.Errors += m.Errors
			if pr.FirstErr == "" {
				pr.FirstErr = m.FirstErr
			}
		}
		pr.Span, pr.End = d, end.UnixNano()
		cpu1, err := e.serverCPU(ctx)
		if err != nil {
			return fmt.Errorf("INFO cpu: %w", err)
		}
		pr.RedisCPU = cpu1.CPU - cpu0.CPU
		return nil
	})
	if err == nil && e.rawDir != "" {
		err = writeRaw(filepath.Join(e.rawDir, scenario+"-"+job.Contender+".json"), pr.Acqs)
	}
	return pr, err
}

// writeRaw writes acquisitions as JSON, one per line.
func writeRaw(path string, acqs []acquisition) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, a := range acqs {
		if err := enc.Encode(a); err != nil {
			return err
		}
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// procRuns is one contender's runs of a multi-process scenario, one per
// round of interleave. Each run is analysed on its own (a handoff across
// two runs means nothing) and the samples are pooled.
type procRuns struct {
	e                 *env
	spec              contenderSpec
	scenario          string
	procs, goroutines int
	hold              time.Duration

	runs      int
	h         holdAnalysis
	span      time.Duration
	stats     commandStats
	redisCPU  time.Duration // over the timed runs
	perWorker map[[2]int]int
	errors    int
	firstErr  string
}

// job is the worker job of one process of a run.
func (p *procRuns) job() workerJob {
	return workerJob{Contender: p.spec.ID, Goroutines: p.goroutines, Hold: p.hold}
}

func (p *procRuns) slice(ctx context.Context, d time.Duration) error {
	p.runs++
	run := fmt.Sprintf("%s-%d", p.scenario, p.runs) // fresh keys for every run
	pr, err := runProcs(ctx, p.e, p.job(), run, p.procs, d, false, "")
	if err != nil {
		return err
	}
	h := analyzeHolds(pr.Acqs, pr.Pending, pr.End)
	p.h.Count += h.Count
	p.h.Overlaps += h.Overlaps
	p.h.FreeAcquires += h.FreeAcquires
	p.h.PendingCross += h.PendingCross
	p.h.Handoffs = append(p.h.Handoffs, h.Handoffs...)
	p.h.Waits = append(p.h.Waits, h.Waits...)
	p.h.CrossWaits = append(p.h.CrossWaits, h.CrossWaits...)
	p.h.Switches = append(p.h.Switches, h.Switches...)
	p.span += pr.Span
	p.redisCPU += pr.RedisCPU
	if p.stats == nil {
		p.stats, p.perWorker = commandStats{}, map[[2]int]int{}
	}
	for k, v := range pr.Counts.Stats {
		p.stats[k] += v
	}
	for _, a := range pr.Acqs {
		p.perWorker[[2]int{a.Proc, a.Worker}]++
	}
	p.errors += pr.Errors
	if p.firstErr == "" {
		p.firstErr = pr.FirstErr
	}
	return nil
}

func (p *procRuns) close() {}

// common fills the figures both scenarios share and returns an error when
// nothing was acquired.
func (p *procRuns) common(row *Row) error {
	if p.h.Count == 0 {
		return fmt.Errorf("no acquisitions (%d errors, first: %s)", p.errors, p.firstErr)
	}
	row.set("acq_per_s", float64(p.h.Count)/p.span.Seconds())
	row.set("overlaps", float64(p.h.Overlaps))
	row.set("errors", float64(p.errors))
	row.set("server_calls_per_acq", float64(p.stats.total())/float64(p.h.Count))
	row.set("redis_cpu_us_per_acq", micros(float64(p.redisCPU))/float64(p.h.Count))
	row.ServerCalls = p.stats
	row.Note = joinNotes(row.Note,
		notef(p.h.Overlaps > 0, "MUTUAL EXCLUSION VIOLATED %d times", p.h.Overlaps),
		notef(p.errors > 0, "%d errors, first: %s", p.errors, p.firstErr))
	return nil
}

// contended is scenario 3 for one contender.
type contended struct {
	procRuns
	dCount time.Duration
}

func (c *contended) finish(ctx context.Context, row *Row) error {
	if err := c.common(row); err != nil {
		return err
	}
	h := c.h
	row.set("handoff_p50_us", micros(percentile(h.Handoffs, 50)))
	row.set("handoff_p99_us", micros(percentile(h.Handoffs, 99)))
	row.set("wait_p50_us", micros(percentile(h.Waits, 50)))
	row.set("wait_p99_us", micros(percentile(h.Waits, 99)))
	row.set("scripts_per_acq", float64(c.stats.scripts())/float64(h.Count))

	var workers [][2]int
	for p := range c.procs {
		for g := range c.goroutines {
			workers = append(workers, [2]int{p, g})
		}
	}
	ratio, starved := shareRatio(c.perWorker, workers)
	row.set("share_max_min", ratio)
	row.set("starved", float64(starved))
	row.Note = joinNotes(row.Note, notef(starved > 0, "%d of %d goroutines never got the lock", starved, len(workers)))

	if !c.e.monitor {
		row.Note = joinNotes(row.Note, "client commands not counted (-monitor=false)")
		return nil
	}
	if c.e.quick && isKindRow(c.spec.ID) {
		// Keeps -quick short; the goals of these rows are server calls and Redis CPU.
		row.Note = joinNotes(row.Note, "client commands not counted in -quick runs")
		return nil
	}
	cr, err := runProcs(ctx, c.e, c.job(), "contended-count", c.procs, c.dCount, true,
		c.spec.Name+" counting commands")
	if err != nil {
		return fmt.Errorf("counting run: %w", err)
	}
	setClientFigure(row, cr.Counts, float64(len(cr.Acqs)), "_per_acq")
	return nil
}

func runContended(ctx context.Context, e *env) *ScenarioResult {
	const (
		procs      = 3
		goroutines = 16
		hold       = time.Millisecond
	)
	d := e.pick(10*time.Second, 1500*time.Millisecond)
	rounds := e.pickN(2, 1)
	dCount := e.pick(3*time.Second, time.Second)
	s := &ScenarioResult{
		ID: "contended",
		Setup: fmt.Sprintf("%d worker processes x %d goroutines loop on one key: Lock, hold %v, release, "+
			"Lock again at once; %v per contender, in %d run(s) interleaved with the other contenders. "+
			"Handoff is a release to the next hold (any process); wait is Lock call to return "+
			"(a Lock still waiting at the end counts with its wait so far, so starved goroutines stay in the percentiles). "+
			"Commands per acquisition: client is what clients sent, counted with MONITOR (which tells script-internal calls apart) "+
			"in a separate run of %v, since MONITOR slows Redis; scripts is EVAL/EVALSHA and server is every call including "+
			"those run inside scripts, both from INFO commandstats over the timed runs%s. "+
			"Share is the most acquisitions one goroutine got over the fewest (∞: some goroutine got none). "+
			"Overlaps counts holds that began before the previous one ended: it must be 0. "+
			"The floor rows are the least a wake-then-acquire handoff can do (release = DEL + PUBLISH, or SPUBLISH for "+
			"sharded pub/sub, in one script; a woken waiter runs SET NX); the vs floor columns divide each handoff p50 "+
			"by each floor's. Redis CPU/acq is the server's used_cpu_user + used_cpu_sys over the timed runs%s per "+
			"acquisition; the vs floor columns of server calls and Redis CPU divide by the floor of the pub/sub kind "+
			"rlock waits with here (publish on one server, spublish on a cluster). The RWMutex rows take write holds "+
			"and the Semaphore row has 1 permit, so every row excludes like a mutex.",
			procs, goroutines, hold, d, rounds, dCount, e.overMasters(), e.overMasters()),
		Columns: []Column{
			{"acq_per_s", "acquisitions/s", unitRate},
			{"handoff_p50_us", "handoff p50", unitMicros},
			{"handoff_vs_floor", "p50 vs publish floor", unitRatio},
			{"handoff_vs_sfloor", "vs spublish floor", unitRatio},
			{"handoff_p99_us", "handoff p99", unitMicros},
			{"wait_p50_us", "wait p50", unitMicros},
			{"wait_p99_us", "wait p99", unitMicros},
			{"client_cmds_per_acq", "client cmds/acq", unitNum},
			{"scripts_per_acq", "scripts/acq", unitNum},
			{"server_calls_per_acq", "server calls/acq", unitNum},
			{"server_calls_vs_floor", "server calls vs floor", unitRatio},
			{"redis_cpu_us_per_acq", "Redis CPU/acq (µs)", unitNum1},
			{"redis_cpu_vs_floor", "Redis CPU vs floor", unitRatio},
			{"share_max_min", "share max/min", unitRatio},
			{"overlaps", "overlaps", unitCount},
		},
	}
	e.interleave(ctx, s, e.contendersFor("contended"), waitersOnly, rounds, d, func(_ context.Context, spec contenderSpec) (sliceRunner, error) {
		return &contended{procRuns: procRuns{e: e, spec: spec, scenario: "contended", procs: procs, goroutines: goroutines, hold: hold},
			dCount: dCount}, nil
	}, func(r *Row) string {
		return fmt.Sprintf("%s acq/s, wait p99 %s, share %s", formatValue(r.value("acq_per_s"), unitRate),
			formatValue(r.value("wait_p99_us"), unitMicros), formatValue(r.value("share_max_min"), unitRatio))
	})
	vsFloor(s, e.redis.Cluster())
	return s
}

// pingPong is scenario 4 for one contender.
type pingPong struct{ procRuns }

func (p *pingPong) finish(_ context.Context, row *Row) error {
	if err := p.common(row); err != nil {
		return err
	}
	h := p.h
	row.set("handoff_p50_us", micros(percentile(h.CrossWaits, 50)))
	row.set("handoff_p99_us", micros(percentile(h.CrossWaits, 99)))
	done := len(h.CrossWaits) - h.PendingCross
	row.set("handoffs", float64(done))
	row.set("alternation", float64(done)/float64(h.Count))
	row.set("switch_p50_us", micros(percentile(h.Switches, 50)))
	row.Note = joinNotes(row.Note, notef(done < 20, "only %d handoffs in %v: percentiles are rough", done, p.span))
	return nil
}

func runPingPong(ctx context.Context, e *env) *ScenarioResult {
	const hold = time.Millisecond
	d := e.pick(10*time.Second, 3*time.Second)
	rounds := e.pickN(2, 1)
	s := &ScenarioResult{
		ID: "pingpong",
		Setup: fmt.Sprintf("Two worker processes, one goroutine each, loop on one key: Lock, hold %v, release, "+
			"Lock again at once, so the other process is always waiting; %v per contender in %d run(s) interleaved "+
			"with the other contenders. Handoff is measured for every hold that "+
			"had to wait for the other process: from the first release by the other process after Lock was called, "+
			"to Lock's return (a waiter that misses a release keeps counting; one still waiting at the end counts "+
			"with its time so far). Alternation is the share of holds that "+
			"went to the other process (100%%: strict turns; low: the releasing process took the lock back first). "+
			"Switch is the release to the other process's acquisition only where it took the very next hold: "+
			"the wake-up path itself, without the races the waiter lost. "+
			"The PING row is the PING round trip for scale; the floor rows are the least a wake-then-acquire handoff "+
			"can do (release = DEL + PUBLISH, or SPUBLISH for sharded pub/sub, in one script; the woken waiter runs "+
			"SET NX), and the vs floor columns divide each handoff p50 by each floor's. "+
			"Server calls/acq is every call of INFO commandstats (those inside scripts included) over the timed runs, "+
			"Redis CPU/acq the server's used_cpu_user + used_cpu_sys%s, per acquisition; their vs floor columns divide "+
			"by the floor of the pub/sub kind rlock waits with here (publish on one server, spublish on a cluster).",
			hold, d, rounds, e.overMasters()),
		Columns: []Column{
			{"handoff_p50_us", "cross-process handoff p50", unitMicros},
			{"handoff_vs_floor", "p50 vs publish floor", unitRatio},
			{"handoff_vs_sfloor", "vs spublish floor", unitRatio},
			{"handoff_p99_us", "p99", unitMicros},
			{"handoffs", "handoffs", unitCount},
			{"alternation", "alternation", unitPercent},
			{"switch_p50_us", "switch p50", unitMicros},
			{"acq_per_s", "acquisitions/s", unitRate},
			{"server_calls_per_acq", "server calls/acq", unitNum},
			{"server_calls_vs_floor", "server calls vs floor", unitRatio},
			{"redis_cpu_us_per_acq", "Redis CPU/acq (µs)", unitNum1},
			{"redis_cpu_vs_floor", "Redis CPU vs floor", unitRatio},
			{"overlaps", "overlaps", unitCount},
		},
	}
	ping := &Row{Contender: "ping", Name: "PING round trip"}
	s.Rows = append(s.Rows, ping)
	if err := measurePing(ctx, e, e.pick(time.Second, 300*time.Millisecond), ping); err != nil {
		ping.Error = err.Error()
	} else {
		ping.Values["handoff_p50_us"] = ping.Values["p50_us"]
		ping.Values["handoff_p99_us"] = ping.Values["p99_us"]
		delete(ping.Values, "ops_per_s")
	}
	e.interleave(ctx, s, e.contendersFor("pingpong"), waitersOnly, rounds, d, func(_ context.Context, spec contenderSpec) (sliceRunner, error) {
		return &pingPong{procRuns{e: e, spec: spec, scenario: "pingpong", procs: 2, goroutines: 1, hold: hold}}, nil
	}, func(r *Row) string {
		return fmt.Sprintf("handoff p50 %s, alternation %s", formatValue(r.value("handoff_p50_us"), unitMicros),
			formatValue(r.value("alternation"), unitPercent))
	})
	vsFloor(s, e.redis.Cluster())
	return s
}

// vsFloor sets, on every row of a contended or ping-pong table, its handoff p50 divided by each
// floor row's of the same run: "floor: publish + SET NX" (handoff_vs_floor) and "floor:
// spublish + SET NX" (handoff_vs_sfloor); NaN when that floor did not run. It also divides
// server calls and Redis CPU per acquisition by those of the floor of the kind rlock uses on
// this topology (see costVsFloor).
func vsFloor(s *ScenarioResult, cluster bool) {
	costVsFloor(s, cluster)
	for _, f := range []struct{ id, key string }{{floorSpec.ID, "handoff_vs_floor"}, {floorShardedSpec.ID, "handoff_vs_sfloor"}} {
		floor := s.row(f.id).value("handoff_p50_us")
		for _, r := range s.Rows {
			if r.Error != "" || r.Values == nil {
				continue
			}
			if _, ok := r.Values["handoff_p50_us"]; ok {
				r.set(f.key, ratioOf(r.value("handoff_p50_us"), floor))
			}
		}
	}
}

// costVsFloor sets, on every row of a contended or ping-pong table, its server calls per
// acquisition (server_calls_vs_floor) and Redis CPU per acquisition (redis_cpu_vs_floor)
// divided by the floor's of the same run: the publish floor on one server, the spublish floor
// on a cluster, the kind of pub/sub rlock waits with there.
func costVsFloor(s *ScenarioResult, cluster bool) {
	id := floorSpec.ID
	if cluster {
		id = floorShardedSpec.ID
	}
	floor := s.row(id)
	for _, r := range s.Rows {
		if r.Error != "" || r.Values == nil {
			continue
		}
		for _, k := range []struct{ key, vs string }{
			{"server_calls_per_acq", "server_calls_vs_floor"}, {"redis_cpu_us_per_acq", "redis_cpu_vs_floor"},
		} {
			if _, ok := r.Values[k.key]; ok {
				r.set(k.vs, ratioOf(r.value(k.key), floor.value(k.key)))
			}
		}
	}
}
