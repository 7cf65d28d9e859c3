package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Scenario 11: throughput against the number of goroutines on one client, each on its own
// key, for the pair, rlock PubSub, rlock fair and rueidislock (issue 17's "Scale" goal).

// scaleGoroutines are the goroutine counts of scenario 11.
var scaleGoroutines = []int{1, 4, 16, 64, 256}

// scaleContenders are the contenders of scenario 11, when selected.
var scaleContenders = []string{"baseline", "rlock-pubsub", "rlock-fair", "rueidislock"}

// opsKey is the column of the ops/s at n goroutines; vsPairKey that of its ratio to the pair's.
func opsKey(n int) string    { return "ops_per_s_g" + strconv.Itoa(n) }
func vsPairKey(n int) string { return "ops_vs_pair_g" + strconv.Itoa(n) }

// scaleRun is one contender of scenario 11: one client with a handle per goroutine of the
// largest count, each on its own key.
type scaleRun struct {
	c   Contender
	ms  []Mutex
	ops map[int][]float64 // goroutines -> ops/s of each round
	err error

	errs     int64 // failed lock+unlocks, those cut at a slice's end included
	firstErr string
}

func runGoroutines(ctx context.Context, e *env) *ScenarioResult {
	d := e.pick(600*time.Millisecond, 200*time.Millisecond) // per slice
	rounds := e.pickN(3, 1)
	most := slices.Max(scaleGoroutines)
	s := &ScenarioResult{
		ID: "goroutines",
		Setup: fmt.Sprintf("One client per contender; n goroutines (n = %s) each take and release their own key in a loop. "+
			"Each round runs every count for every contender, %v each, interleaved (a round gives every contender a "+
			"slice at each count in turn); %d round(s). ops/s counts lock+unlock pairs of all goroutines; vs pair "+
			"divides by the baseline pair's at the same count, the median over the rounds of the ratio of slices of "+
			"the same round. A lock+unlock still running 1s after its slice ended is cut and counted in errors.",
			listInts(scaleGoroutines), d, rounds),
	}
	for _, n := range scaleGoroutines {
		s.Columns = append(s.Columns, Column{opsKey(n), fmt.Sprintf("ops/s, %d", n), unitRate})
	}
	for _, n := range scaleGoroutines {
		s.Columns = append(s.Columns, Column{vsPairKey(n), fmt.Sprintf("vs pair, %d", n), unitRatio})
	}
	s.Columns = append(s.Columns, Column{"errors", "errors", unitCount})
	var specs []contenderSpec
	for _, c := range e.contendersFor("parallel") {
		if slices.Contains(scaleContenders, c.ID) {
			specs = append(specs, c)
		}
	}
	runs := map[string]*scaleRun{}
	var live []*scaleRun
	var rows []*Row
	defer func() {
		for _, r := range live {
			r.c.Close()
		}
	}()
	for _, spec := range specs {
		row := &Row{Contender: spec.ID, Name: spec.Name}
		s.Rows = append(s.Rows, row)
		err := safeRun(func() error {
			c, err := spec.New(e.contenderConfig(e.keyPrefix("goroutines", spec.ID)))
			if err != nil {
				return err
			}
			r := &scaleRun{c: c, ops: map[int][]float64{}}
			live = append(live, r)
			for i := range most {
				m := c.Mutex("g" + strconv.Itoa(i))
				if err := lockUnlock(ctx, m); err != nil {
					return fmt.Errorf("warm-up: %w", err)
				}
				r.ms = append(r.ms, m)
			}
			runs[spec.ID] = r
			return nil
		})
		if err != nil {
			row.Error, _, _ = strings.Cut(err.Error(), "\n")
			e.progress.Linef("  %-22s failed: %v", spec.Name, err)
			continue
		}
		rows = append(rows, row)
	}
	stop := e.progress.TrackTime(fmt.Sprintf("%d contenders x %d counts, %d round(s)", len(rows), len(scaleGoroutines), rounds),
		time.Duration(len(rows)*len(scaleGoroutines)*rounds)*d)
	for round := range rounds {
		for _, n := range scaleGoroutines {
			for i := range rows {
				row := rows[(i+round)%len(rows)]
				r := runs[row.Contender]
				if r.err != nil || ctx.Err() != nil {
					continue
				}
				start := time.Now()
				var lats []time.Duration
				var firstErr error
				var errs int64
				r.err = safeRun(func() error {
					// A lock+unlock still running 1s after the slice's end is cut (and counted as an
					// error), so that a stalled library costs the run a second, not opTimeout.
					sctx, cancel := context.WithTimeout(ctx, d+sliceGrace)
					defer cancel()
					lats, errs, firstErr = hammer(sctx, r.ms[:n], d)
					if len(lats) == 0 {
						return fmt.Errorf("no lock+unlock succeeded at %d goroutines: %v", n, firstErr)
					}
					return nil
				})
				r.ops[n] = append(r.ops[n], float64(len(lats))/time.Since(start).Seconds())
				r.errs += errs
				if firstErr != nil && r.firstErr == "" {
					r.firstErr = fmt.Sprintf("at %d goroutines: %v", n, firstErr)
				}
			}
		}
	}
	stop()
	for _, row := range rows {
		r := runs[row.Contender]
		if r.err != nil {
			row.Error, _, _ = strings.Cut(r.err.Error(), "\n")
			continue
		}
		for _, n := range scaleGoroutines {
			row.set(opsKey(n), mean(r.ops[n]))
		}
		row.set("errors", float64(r.errs))
		row.Note = notef(r.errs > 0, "%d errors, first %s", r.errs, r.firstErr)
		e.progress.Linef("  %-22s %s ops/s at %s goroutines", row.Name, joinRates(row), listInts(scaleGoroutines))
	}
	if base := runs["baseline"]; base != nil && base.err == nil {
		for _, row := range rows {
			r := runs[row.Contender]
			if r.err != nil {
				continue
			}
			for _, n := range scaleGoroutines {
				row.set(vsPairKey(n), medianRatio(r.ops[n], base.ops[n]))
			}
		}
	}
	return s
}

// mean returns the mean of vs; NaN for none.
func mean(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	var sum float64
	for _, v := range vs {
		sum += v
	}
	return sum / float64(len(vs))
}

// listInts writes ns as "1, 4, 16".
func listInts(ns []int) string {
	var ss []string
	for _, n := range ns {
		ss = append(ss, strconv.Itoa(n))
	}
	return strings.Join(ss, ", ")
}

// joinRates writes a row's ops/s at each count as "1200/4500/…".
func joinRates(r *Row) string {
	var ss []string
	for _, n := range scaleGoroutines {
		ss = append(ss, formatValue(r.value(opsKey(n)), unitRate))
	}
	return strings.Join(ss, "/")
}
