package main

import (
	"context"
	"fmt"
	"time"
)

// Scenarios 7 and 8 run like scenario 3 (worker processes, contenders interleaved), on the
// read-write mutex and the semaphore.

// kindRuns is what the runs of one contender of scenario 7 or 8 have in common.
type kindRuns struct {
	e         *env
	spec      contenderSpec
	scenario  string
	job       workerJob // Contender, Goroutines, Hold, Mode and its settings
	procs     int
	runs      int
	span      time.Duration
	stats     commandStats
	perWorker map[[2]int]int
	errors    int
	firstErr  string
	analyze   func(pr procRun) // pools the figures of one run
	acquired  int
}

// slice runs the workers for d on fresh keys and pools what they did.
func (k *kindRuns) slice(ctx context.Context, d time.Duration) error {
	k.runs++
	pr, err := runProcs(ctx, k.e, k.job, fmt.Sprintf("%s-%d", k.scenario, k.runs), k.procs, d, false, "")
	if err != nil {
		return err
	}
	k.analyze(pr)
	k.span += pr.Span
	k.acquired += len(pr.Acqs)
	if k.stats == nil {
		k.stats, k.perWorker = commandStats{}, map[[2]int]int{}
	}
	for name, n := range pr.Counts.Stats {
		k.stats[name] += n
	}
	for _, a := range pr.Acqs {
		k.perWorker[[2]int{a.Proc, a.Worker}]++
	}
	k.errors += pr.Errors
	if k.firstErr == "" {
		k.firstErr = pr.FirstErr
	}
	return nil
}

func (k *kindRuns) close() {}

// common fills the figures both scenarios share, and returns an error when nothing was
// acquired.
func (k *kindRuns) common(row *Row, rate, perOp string) error {
	if k.acquired == 0 {
		return fmt.Errorf("no acquisitions (%d errors, first: %s)", k.errors, k.firstErr)
	}
	n := float64(k.acquired)
	row.set(rate, n/k.span.Seconds())
	row.set("scripts_"+perOp, float64(k.stats.scripts())/n)
	row.set("server_calls_"+perOp, float64(k.stats.total())/n)
	row.set("errors", float64(k.errors))
	row.ServerCalls = k.stats

	var workers [][2]int
	for p := range k.procs {
		for g := range k.job.Goroutines {
			workers = append(workers, [2]int{p, g})
		}
	}
	ratio, starved := shareRatio(k.perWorker, workers)
	row.set("share_max_min", ratio)
	row.set("starved", float64(starved))
	row.Note = joinNotes(row.Note,
		notef(starved > 0, "%d of %d goroutines never got a hold", starved, len(workers)),
		notef(k.errors > 0, "%d errors, first: %s", k.errors, k.firstErr))
	return nil
}

// readHeavy is scenario 7 for one contender.
type readHeavy struct {
	kindRuns
	h rwAnalysis // pooled over the runs
}

func newReadHeavy(e *env, spec contenderSpec, procs, goroutines, readPct int, hold time.Duration) *readHeavy {
	r := &readHeavy{kindRuns: kindRuns{e: e, spec: spec, scenario: "readheavy", procs: procs,
		job: workerJob{Contender: spec.ID, Goroutines: goroutines, Hold: hold, Mode: modeReadHeavy, ReadPct: readPct}}}
	r.analyze = func(pr procRun) {
		a := analyzeRW(pr.Acqs, pr.Pending, pr.End)
		r.h.Reads += a.Reads
		r.h.Writes += a.Writes
		r.h.Waits = append(r.h.Waits, a.Waits...)
		r.h.ReadWaits = append(r.h.ReadWaits, a.ReadWaits...)
		r.h.WriteWaits = append(r.h.WriteWaits, a.WriteWaits...)
		r.h.Conflicts += a.Conflicts
		r.h.MaxReaders = max(r.h.MaxReaders, a.MaxReaders)
	}
	return r
}

func (r *readHeavy) finish(_ context.Context, row *Row) error {
	if err := r.common(row, "ops_per_s", "per_op"); err != nil {
		return err
	}
	h := r.h
	row.set("write_share", float64(h.Writes)/float64(h.Reads+h.Writes))
	row.set("wait_p50_us", micros(percentile(h.Waits, 50)))
	row.set("wait_p99_us", micros(percentile(h.Waits, 99)))
	row.set("read_wait_p99_us", micros(percentile(h.ReadWaits, 99)))
	row.set("write_wait_p50_us", micros(percentile(h.WriteWaits, 50)))
	row.set("write_wait_p99_us", micros(percentile(h.WriteWaits, 99)))
	row.set("max_readers", float64(h.MaxReaders))
	row.set("conflicts", float64(h.Conflicts))
	row.Note = joinNotes(notef(h.Conflicts > 0, "READ-WRITE EXCLUSION VIOLATED %d times", h.Conflicts), row.Note)
	return nil
}

// readHeavyVsMutex sets, on every row of the read-heavy table, its throughput and writer
// wait p99 relative to the Mutex row's.
func readHeavyVsMutex(s *ScenarioResult) {
	base := s.row("rlock-pubsub")
	for _, r := range s.Rows {
		if r.Error != "" || r.Values == nil {
			continue
		}
		r.set("ops_vs_mutex", ratioOf(r.value("ops_per_s"), base.value("ops_per_s")))
		r.set("write_wait_vs_mutex", ratioOf(r.value("write_wait_p99_us"), base.value("write_wait_p99_us")))
	}
}

func runReadHeavy(ctx context.Context, e *env) *ScenarioResult {
	const (
		procs      = 3
		goroutines = 16
		readPct    = 90
		hold       = time.Millisecond
	)
	d := e.pick(10*time.Second, 2*time.Second)
	rounds := e.pickN(2, 1)
	s := &ScenarioResult{
		ID: "readheavy",
		Setup: fmt.Sprintf("%d worker processes x %d goroutines loop on one lock per contender: each time at random, "+
			"%d%% of the time a read (RLock, hold %v, RUnlock) and otherwise a write (Lock, hold %v, Unlock); "+
			"the Mutex row takes its Mutex for both. %v per contender, in %d run(s) interleaved with the other contenders. "+
			"ops/s counts the holds of all goroutines; wait is the Lock or RLock call to its return (a call still waiting "+
			"at the end counts with its wait so far), over all ops, reads and writes; vs Mutex divides by the Mutex row. "+
			"Writes is the share of holds that were writes (%d%% asked for: less means writers fell behind). "+
			"Readers at once is the most read holds in progress together. Scripts/op is EVAL/EVALSHA from INFO commandstats "+
			"over the timed runs. Conflicts counts holds that began while a hold they exclude was in progress: it must be 0.",
			procs, goroutines, readPct, hold, hold, d, rounds, 100-readPct),
		Columns: []Column{
			{"ops_per_s", "ops/s", unitRate},
			{"ops_vs_mutex", "ops/s vs Mutex", unitRatio},
			{"write_share", "writes", unitPercent},
			{"wait_p50_us", "wait p50", unitMicros},
			{"wait_p99_us", "wait p99", unitMicros},
			{"read_wait_p99_us", "read wait p99", unitMicros},
			{"write_wait_p99_us", "writer wait p99", unitMicros},
			{"write_wait_vs_mutex", "writer p99 vs Mutex", unitRatio},
			{"max_readers", "readers at once", unitCount},
			{"scripts_per_op", "scripts/op", unitNum},
			{"conflicts", "conflicts", unitCount},
		},
	}
	e.interleave(ctx, s, e.rwContenders, nil, rounds, d, func(_ context.Context, spec contenderSpec) (sliceRunner, error) {
		return newReadHeavy(e, spec, procs, goroutines, readPct, hold), nil
	}, func(r *Row) string {
		return fmt.Sprintf("%s ops/s, wait p99 %s, writer wait p99 %s", formatValue(r.value("ops_per_s"), unitRate),
			formatValue(r.value("wait_p99_us"), unitMicros), formatValue(r.value("write_wait_p99_us"), unitMicros))
	})
	readHeavyVsMutex(s)
	return s
}

// semaphoreRuns is scenario 8 for one contender.
type semaphoreRuns struct {
	kindRuns
	permits int
	dCount  time.Duration
	h       semAnalysis // pooled over the runs
}

func newSemaphoreRuns(e *env, spec contenderSpec, procs, goroutines, permits int, hold, dCount time.Duration) *semaphoreRuns {
	r := &semaphoreRuns{permits: permits, dCount: dCount, kindRuns: kindRuns{e: e, spec: spec, scenario: "semaphore", procs: procs,
		job: workerJob{Contender: spec.ID, Goroutines: goroutines, Hold: hold, Mode: modeSemaphore, Permits: int64(permits)}}}
	r.analyze = func(pr procRun) {
		a := analyzeSem(pr.Acqs, pr.Pending, pr.End, permits)
		r.h.Count += a.Count
		r.h.Waits = append(r.h.Waits, a.Waits...)
		r.h.MaxOut = max(r.h.MaxOut, a.MaxOut)
		r.h.OverPermits += a.OverPermits
	}
	return r
}

func (r *semaphoreRuns) finish(ctx context.Context, row *Row) error {
	if err := r.common(row, "acq_per_s", "per_acq"); err != nil {
		return err
	}
	h := r.h
	row.set("wait_p50_us", micros(percentile(h.Waits, 50)))
	row.set("wait_p99_us", micros(percentile(h.Waits, 99)))
	row.set("max_out", float64(h.MaxOut))
	row.set("over_permits", float64(h.OverPermits))
	row.Note = joinNotes(notef(h.OverPermits > 0, "MORE THAN %d PERMITS OUT %d times", r.permits, h.OverPermits), row.Note)
	if !r.e.monitor {
		row.Note = joinNotes(row.Note, "client commands not counted (-monitor=false)")
		return nil
	}
	cr, err := runProcs(ctx, r.e, r.job, "semaphore-count", r.procs, r.dCount, true, r.spec.Name+" counting commands")
	if err != nil {
		return fmt.Errorf("counting run: %w", err)
	}
	setClientFigure(row, cr.Counts, float64(len(cr.Acqs)), "_per_acq")
	return nil
}

func runSemaphore(ctx context.Context, e *env) *ScenarioResult {
	const (
		procs      = 3
		goroutines = 16
		permits    = 4
		hold       = time.Millisecond
	)
	d := e.pick(10*time.Second, 2*time.Second)
	rounds := e.pickN(2, 1)
	dCount := e.pick(3*time.Second, time.Second)
	s := &ScenarioResult{
		ID: "semaphore",
		Setup: fmt.Sprintf("%d worker processes x %d goroutines (%d contenders) loop on one semaphore of %d permits: "+
			"Acquire(ctx, 1), hold %v, Release, Acquire again at once; %v per contender, in %d run(s). "+
			"Wait is the Acquire call to its return (a call still waiting at the end counts with its wait so far). "+
			"Commands per acquisition as in scenario 3: client from MONITOR in a separate run of %v, scripts and server "+
			"from INFO commandstats over the timed runs. Share is the most acquisitions one goroutine got over the fewest "+
			"(∞: some goroutine got none). Permits out is the most holds in progress at once; over permits counts holds "+
			"that began while all %d were out: it must be 0.",
			procs, goroutines, procs*goroutines, permits, hold, d, rounds, dCount, permits),
		Columns: []Column{
			{"acq_per_s", "acquisitions/s", unitRate},
			{"wait_p50_us", "wait p50", unitMicros},
			{"wait_p99_us", "wait p99", unitMicros},
			{"client_cmds_per_acq", "client cmds/acq", unitNum},
			{"scripts_per_acq", "scripts/acq", unitNum},
			{"server_calls_per_acq", "server calls/acq", unitNum},
			{"share_max_min", "share max/min", unitRatio},
			{"max_out", "permits out (max)", unitCount},
			{"over_permits", "over permits", unitCount},
		},
	}
	e.interleave(ctx, s, e.semContenders, nil, rounds, d, func(_ context.Context, spec contenderSpec) (sliceRunner, error) {
		return newSemaphoreRuns(e, spec, procs, goroutines, permits, hold, dCount), nil
	}, func(r *Row) string {
		return fmt.Sprintf("%s acq/s, client cmds/acq %s, share %s", formatValue(r.value("acq_per_s"), unitRate),
			formatValue(r.value("client_cmds_per_acq"), unitNum), formatValue(r.value("share_max_min"), unitRatio))
	})
	return s
}
