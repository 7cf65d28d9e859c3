package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

func runFIFO(ctx context.Context, e *env) *ScenarioResult {
	const (
		waiters = 20
		gap     = 20 * time.Millisecond
		hold    = time.Millisecond
	)
	rounds := 5
	if e.quick {
		rounds = 1
	}
	maxInv := waiters * (waiters - 1) / 2
	s := &ScenarioResult{
		ID: "fifo",
		Setup: fmt.Sprintf("A holder takes the key; %d waiters call Lock %v apart, each on its own client "+
			"(as if each were its own process); %v after the last arrival the holder releases. "+
			"Each waiter holds %v once served. An inversion is a pair served in the opposite order of arrival "+
			"(0 is FIFO, %d is LIFO). %d round(s); drain is release to the last waiter served.",
			waiters, gap, gap, hold, maxInv, rounds),
		Columns: []Column{
			{"inversions", "inversions (all rounds)", unitCount},
			{"inversions_per_round", "per round", unitNum},
			{"fifo_rounds", "rounds in order", unitCount},
			{"drain_us", "drain (mean)", unitMicros},
		},
	}
	e.eachContender(ctx, s, waitersOnly, func(ctx context.Context, spec contenderSpec, row *Row) error {
		cfg := e.contenderConfig(e.keyPrefix("fifo", spec.ID))
		// One client for the holder and one per waiter.
		insts := make([]Contender, 0, waiters+1)
		defer func() {
			for _, c := range insts {
				c.Close()
			}
		}()
		for range waiters + 1 {
			c, err := spec.New(cfg)
			if err != nil {
				return err
			}
			insts = append(insts, c)
		}
		var inv, inOrder int
		var drain time.Duration
		var done atomic.Int32
		stop := e.progress.Track(spec.Name, func() float64 { return float64(done.Load()) / float64(rounds) })
		defer stop()
		for r := range rounds {
			order, d, err := fifoRound(ctx, insts, fmt.Sprintf("f%d", r), gap, hold)
			if err != nil {
				return fmt.Errorf("round %d: %w", r+1, err)
			}
			n := inversions(order)
			inv += n
			if n == 0 {
				inOrder++
			}
			drain += d
			done.Add(1)
		}
		row.set("inversions", float64(inv))
		row.set("inversions_per_round", float64(inv)/float64(rounds))
		row.set("fifo_rounds", float64(inOrder))
		row.set("drain_us", micros(float64(drain)/float64(rounds)))
		return nil
	})
	return s
}

// fifoRound runs one FIFO round on key: insts[0] holds, insts[1:] wait.
// It returns the arrival indexes in the order they were served and the
// time from the holder's release to the last acquisition.
func fifoRound(ctx context.Context, insts []Contender, key string, gap, hold time.Duration) ([]int, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	h, err := insts[0].Mutex(key).Lock(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("holder: %w", err)
	}
	waiters := len(insts) - 1
	var (
		wg     sync.WaitGroup
		served atomic.Int32
		order  = make([]int, waiters)
		last   atomic.Int64
		errs   = make([]error, waiters)
	)
	t0 := time.Now()
	for i := range waiters {
		wg.Go(func() {
			if !sleepCtx(ctx, time.Until(t0.Add(time.Duration(i)*gap))) {
				errs[i] = ctx.Err()
				return
			}
			wh, err := insts[i+1].Mutex(key).Lock(ctx)
			if err != nil {
				errs[i] = fmt.Errorf("waiter %d: %w", i, err)
				return
			}
			order[served.Add(1)-1] = i
			last.Store(time.Now().UnixNano())
			time.Sleep(hold)
			if err := wh.Release(context.WithoutCancel(ctx)); err != nil {
				errs[i] = fmt.Errorf("waiter %d release: %w", i, err)
			}
		})
	}
	sleepCtx(ctx, time.Until(t0.Add(time.Duration(waiters)*gap)))
	released := time.Now()
	herr := h.Release(context.WithoutCancel(ctx))
	wg.Wait()
	if err := errors.Join(append(errs, herr)...); err != nil {
		return nil, 0, err
	}
	return order, time.Duration(last.Load() - released.UnixNano()), nil
}
