package main

import (
	"context"
	"fmt"
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
		c, err := newRueidis(cfg.Addr, nil)
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
	e    *env
	c    Contender
	m    Mutex
	lats []time.Duration
	span time.Duration
}

func (u *uncontended) slice(ctx context.Context, d time.Duration) error {
	start := time.Now()
	for time.Since(start) < d && ctx.Err() == nil {
		t := time.Now()
		if err := lockUnlock(ctx, u.m); err != nil {
			return err
		}
		u.lats = append(u.lats, time.Since(t))
	}
	u.span += time.Since(start)
	return ctx.Err()
}

func (u *uncontended) finish(ctx context.Context, row *Row) error {
	setLatencies(row, u.lats, u.span)
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

func runUncontended(ctx context.Context, e *env) *ScenarioResult {
	d := e.pick(3*time.Second, 500*time.Millisecond)
	rounds := e.pickN(10, 5)
	s := &ScenarioResult{
		ID: "uncontended",
		Setup: fmt.Sprintf("One goroutine per contender takes and releases one key: 100 warm-up rounds, then %v in all, "+
			"in %d slices interleaved with the other contenders. "+
			"Latency runs from the Lock call to the return of the release. "+
			"The PING row sends one PING per round on a rueidis client: the round trip every lock pays at least. "+
			"Commands per op are counted in a separate pass of %d rounds (MONITOR slows Redis down).", d, rounds, countRounds),
		Columns: []Column{
			{"p50_us", "lock+unlock p50", unitMicros},
			{"p99_us", "p99", unitMicros},
			{"ops_per_s", "ops/s", unitRate},
			{"client_cmds_per_op", "client cmds/op", unitNum},
			{"scripts_per_op", "scripts/op", unitNum},
		},
	}
	specs := append([]contenderSpec{pingSpec}, e.contenders...)
	e.interleave(ctx, s, specs, nil, rounds, d, func(ctx context.Context, spec contenderSpec) (sliceRunner, error) {
		c, err := spec.New(contenderConfig{Addr: e.redis.Addr, KeyPrefix: e.keyPrefix("uncontended", spec.ID)})
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
		return u, nil
	}, func(r *Row) string {
		return "p50 " + formatValue(r.value("p50_us"), unitMicros) + ", " + formatValue(r.value("ops_per_s"), unitRate) + " ops/s"
	})
	return s
}

// countRounds is the number of lock+unlock rounds whose commands are counted.
const countRounds = 200

// measurePing fills row with the PING round trip on a fresh rueidis client.
func measurePing(ctx context.Context, e *env, d time.Duration, row *Row) error {
	c, err := newRueidis(e.redis.Addr, nil)
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
	c        Contender
	ms       []Mutex // one per goroutine, each on its own key
	lats     []time.Duration
	span     time.Duration
	errs     int64
	firstErr error
}

func (p *parallel) slice(ctx context.Context, d time.Duration) error {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		errCount atomic.Int64
	)
	start := time.Now()
	end := start.Add(d)
	for _, m := range p.ms {
		wg.Go(func() {
			lats := make([]time.Duration, 0, 1024)
			for time.Now().Before(end) && ctx.Err() == nil {
				t := time.Now()
				if err := lockUnlock(ctx, m); err != nil {
					mu.Lock()
					p.firstErr = cmpOr(p.firstErr, err)
					mu.Unlock()
					if errCount.Add(1) > 100 {
						break // a failing library: stop hammering it
					}
					continue
				}
				lats = append(lats, time.Since(t))
			}
			mu.Lock()
			p.lats = append(p.lats, lats...)
			mu.Unlock()
		})
	}
	wg.Wait()
	p.span += time.Since(start)
	p.errs += errCount.Load()
	return ctx.Err()
}

func (p *parallel) finish(_ context.Context, row *Row) error {
	if len(p.lats) == 0 {
		return fmt.Errorf("no lock+unlock succeeded: %v", p.firstErr)
	}
	setLatencies(row, p.lats, p.span)
	row.set("errors", float64(p.errs))
	if p.firstErr != nil {
		row.Note = "first error: " + p.firstErr.Error()
	}
	return nil
}

func (p *parallel) close() { p.c.Close() }

func runParallel(ctx context.Context, e *env) *ScenarioResult {
	const goroutines = 64
	d := e.pick(3*time.Second, 500*time.Millisecond)
	rounds := e.pickN(6, 2)
	s := &ScenarioResult{
		ID: "parallel",
		Setup: fmt.Sprintf("%d goroutines share one client of the contender; each takes and releases its own key "+
			"in a loop, %v in all, in %d slices interleaved with the other contenders (one warm-up round each first). "+
			"ops/s counts lock+unlock pairs of all goroutines.", goroutines, d, rounds),
		Columns: []Column{
			{"ops_per_s", "lock+unlock ops/s", unitRate},
			{"p50_us", "p50", unitMicros},
			{"p99_us", "p99", unitMicros},
			{"errors", "errors", unitCount},
		},
	}
	e.interleave(ctx, s, e.contenders, nil, rounds, d, func(ctx context.Context, spec contenderSpec) (sliceRunner, error) {
		c, err := spec.New(contenderConfig{Addr: e.redis.Addr, KeyPrefix: e.keyPrefix("parallel", spec.ID)})
		if err != nil {
			return nil, err
		}
		p := &parallel{c: c, ms: make([]Mutex, goroutines)}
		for i := range p.ms {
			p.ms[i] = c.Mutex(fmt.Sprintf("p%d", i))
			if err := lockUnlock(ctx, p.ms[i]); err != nil {
				c.Close()
				return nil, fmt.Errorf("warm-up: %w", err)
			}
		}
		return p, nil
	}, func(r *Row) string { return formatValue(r.value("ops_per_s"), unitRate) + " ops/s" })
	return s
}
