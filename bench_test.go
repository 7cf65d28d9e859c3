package rlock_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock"
)

// The physical limit of a lock+unlock: two EVALSHA round trips of the smallest scripts that
// take and give back a lock.
var (
	bareAcquire = rueidis.NewLuaScript(`return redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])`)
	bareRelease = rueidis.NewLuaScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`)
)

// BenchmarkLockUnlock measures an uncontended lock+unlock next to the bare EVALSHA pair.
// "parallel" runs one key per goroutine with b.RunParallel, which keeps the rueidis client in
// its pipelined steady state, as a service runs it; "serial" is one goroutine alone.
func BenchmarkLockUnlock(b *testing.B) {
	e := newEnv(b)
	rc := e.Rueidis()
	c, err := rlock.New(rc, rlock.Options{KeyPrefix: e.Prefix})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	var seq atomic.Int64
	key := func() string { return strconv.FormatInt(seq.Add(1), 10) }

	rlockLoop := func(m *rlock.Mutex, next func() bool) {
		for next() {
			h, err := m.Lock(bg)
			if err != nil {
				b.Error(err)
				return
			}
			if err := m.Unlock(h); err != nil {
				b.Error(err)
				return
			}
		}
	}
	bareLoop := func(k string, next func() bool) {
		owner := rlock.NewOwnerID()
		for next() {
			if err := bareAcquire.Exec(bg, rc, []string{k}, []string{owner, "30000"}).Error(); err != nil {
				b.Error(err)
				return
			}
			if err := bareRelease.Exec(bg, rc, []string{k}, []string{owner}).Error(); err != nil {
				b.Error(err)
				return
			}
		}
	}
	b.Run("parallel/rlock", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) { rlockLoop(c.NewMutex(key()), pb.Next) })
	})
	b.Run("parallel/bare-evalsha-pair", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) { bareLoop(e.Prefix+":bare"+key(), pb.Next) })
	})
	b.Run("serial/rlock", func(b *testing.B) { rlockLoop(c.NewMutex(key()), b.Loop) })
	b.Run("serial/rlock-fair", func(b *testing.B) { rlockLoop(c.NewFairMutex(key()), b.Loop) })
	b.Run("serial/bare-evalsha-pair", func(b *testing.B) { bareLoop(e.Prefix+":bare"+key(), b.Loop) })
}

// BenchmarkHandoff measures a contended handoff: 4 clients take turns on one lock, and a
// client that released asks again only once another has acquired, so three always wait. The
// handoff is the time from a holder deciding to release to the next holder's Lock returning.
func BenchmarkHandoff(b *testing.B) {
	for _, s := range []struct {
		name string
		wait rlock.WaitStrategy
	}{
		{"pubsub", rlock.PubSub()},
		{"spin100ms", rlock.Spin(100 * time.Millisecond)},
	} {
		b.Run(s.name, func(b *testing.B) {
			e := newEnv(b)
			const clients = 4
			var (
				left     atomic.Int64 // acquisitions still to make
				turn     atomic.Int64 // acquisitions made
				released atomic.Int64 // when the last holder started to release (ns since start)
				mu       sync.Mutex
				handoffs []time.Duration
				wg       sync.WaitGroup
			)
			left.Store(int64(b.N))
			start := time.Now()
			for range clients {
				m := e.client(rlock.Options{Wait: s.wait}).NewMutex("handoff")
				wg.Add(1)
				go func() {
					defer wg.Done()
					for left.Add(-1) >= 0 {
						h, err := m.Lock(context.Background())
						if err != nil {
							b.Error(err)
							return
						}
						mine := turn.Add(1)
						if r := released.Load(); r != 0 {
							d := time.Since(start) - time.Duration(r)
							mu.Lock()
							handoffs = append(handoffs, d)
							mu.Unlock()
						}
						time.Sleep(100 * time.Microsecond) // the critical section
						released.Store(int64(time.Since(start)))
						if err := m.Unlock(h); err != nil {
							b.Error(err)
							return
						}
						for turn.Load() == mine && left.Load() > 0 {
							time.Sleep(20 * time.Microsecond) // let a waiter take it first
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			if len(handoffs) > 0 {
				slices.Sort(handoffs)
				q := func(p float64) float64 { return float64(handoffs[int(p*float64(len(handoffs)-1))].Nanoseconds()) }
				b.ReportMetric(q(0.50), "p50-ns/handoff")
				b.ReportMetric(q(0.99), "p99-ns/handoff")
			}
		})
	}
}
