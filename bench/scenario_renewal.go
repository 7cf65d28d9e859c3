package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

func runRenewal(ctx context.Context, e *env) *ScenarioResult {
	const (
		locks   = 10000
		period  = time.Second // renewal period: leases of 3 periods
		workers = 64
	)
	periods := 6
	if e.quick {
		periods = 3
	}
	s := &ScenarioResult{
		ID: "renewal",
		Setup: fmt.Sprintf("One client takes %d locks (one key each, %d goroutines) with automatic renewal set to "+
			"a %v period (rlock WatchdogTimeout %v; rueidislock KeyValidity %v, ExtendInterval %v), "+
			"waits one period (so the first renewal, which may load a script, is not counted), "+
			"then counts commands over %d periods and divides by %d; "+
			"lost counts holds whose library reported the lease gone.",
			locks, workers, period, 3*period, 3*period, period, periods, periods),
		Columns: []Column{
			{"scripts_per_period", "scripts / period", unitNum1},
			{"client_cmds_per_period", "client commands / period", unitNum1},
			{"server_calls_per_period", "server calls / period", unitNum1},
			{"acquire_us", "time to take all", unitMicros},
			{"lost", "lost", unitCount},
		},
	}
	filter := func(spec contenderSpec) string {
		if !spec.Renews {
			return "n/a: no automatic lease renewal"
		}
		return ""
	}
	e.eachContender(ctx, s, filter, func(ctx context.Context, spec contenderSpec, row *Row) error {
		cfg := e.contenderConfig(e.keyPrefix("renewal", spec.ID))
		cfg.Renewal = period
		c, err := spec.New(cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		// The holds live under holdCtx: cancelling it would end them
		// (rueidislock releases a lock when its parent context ends).
		holdCtx, cancelHolds := context.WithTimeout(ctx, 5*time.Minute)
		defer cancelHolds()
		holds := make([]Hold, locks)
		var next atomic.Int64
		start := time.Now()
		stop := e.progress.Track(spec.Name+" taking locks", func() float64 { return float64(next.Load()) / locks })
		err = parallelIndexes(workers, locks, &next, func(i int) error {
			h, err := c.Mutex(fmt.Sprintf("r%d", i)).Lock(holdCtx)
			holds[i] = h
			return err
		})
		stop()
		if err != nil {
			_, _ = releaseAll(holds)
			return err
		}
		row.set("acquire_us", micros(float64(time.Since(start))))
		// One renewal before counting: a library's first renewal may load
		// its script (EVALSHA refused with NOSCRIPT, then EVAL).
		warm := e.progress.TrackTime(spec.Name+" first renewal", period+100*time.Millisecond)
		sleepCtx(ctx, period+100*time.Millisecond)
		warm()

		counts, err := countCommands(ctx, e, true, func() error {
			stop := e.progress.TrackTime(spec.Name+" holding", time.Duration(periods)*period)
			defer stop()
			sleepCtx(ctx, time.Duration(periods)*period)
			return ctx.Err()
		})
		lost := 0
		for _, h := range holds {
			if h.Lost != nil && h.Lost() {
				lost++
			}
		}
		failed, firstErr := releaseAll(holds)
		if err != nil {
			return err
		}
		row.set("lost", float64(lost))
		row.Note = notef(failed > 0, "%d releases failed, first: %v", failed, firstErr)
		setCommandFigures(row, counts, float64(periods), "_per_period")
		return nil
	})
	return s
}

// parallelIndexes calls f(i) for i in [0, n) on workers goroutines, taking
// indexes from next. It stops at the first error and returns it.
func parallelIndexes(workers, n int, next *atomic.Int64, f func(i int) error) error {
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		stop  atomic.Bool
	)
	for range workers {
		wg.Go(func() {
			for !stop.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = fmt.Errorf("lock %d: %w", i, err) })
					stop.Store(true)
				}
			}
		})
	}
	wg.Wait()
	next.Store(int64(min(int(next.Load()), n)))
	return first
}

// releaseAll releases every hold taken (zero Holds are skipped), 64 at a
// time, and returns how many releases failed and the first error.
func releaseAll(holds []Hold) (failed int, first error) {
	var (
		next atomic.Int64
		mu   sync.Mutex
	)
	_ = parallelIndexes(64, len(holds), &next, func(i int) error {
		if holds[i].Release == nil {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := holds[i].Release(ctx); err != nil {
			mu.Lock()
			failed++
			first = cmpOr(first, err)
			mu.Unlock()
		}
		return nil
	})
	return failed, first
}
