package rlock_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
)

// Calls on a name never wait for the state of names in other shards (issue 17): with the
// mutex of another name's shard held throughout, a hold is taken, contended (the waiter waits
// by pub/sub or spin, and gets the lock when the holder gives it back) and given back, for
// every kind. Under one client-wide mutex the first call would block for good.
func TestShards_namesInOtherShardsDoNotWait(t *testing.T) {
	each(t, perKind, func(t *testing.T, k lockKind) {
		eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
			e := newEnv(t)
			c := e.client(rlock.Options{Wait: wait})
			name := "busy" + k.name
			ops := k.on(c, name)
			unlock := rlock.LockOtherShard(c, name)
			defer unlock()

			done := make(chan error, 1)
			go func() {
				done <- func() error {
					h, err := ops.lock(bg)
					if err != nil {
						return err
					}
					got := make(chan error, 1)
					go func() {
						h2, err := ops.lock(bg) // another owner: waits for h
						if err == nil {
							err = ops.release(h2)
						}
						got <- err
					}()
					time.Sleep(20 * time.Millisecond) // (the waiter's first attempt, usually)
					if err := ops.release(h); err != nil {
						return err
					}
					return <-got
				}()
			}()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(30 * time.Second):
				t.Fatal("calls on a name waited for another shard's mutex")
			}
		})
	})
}

// hookOrder is an Observer that checks, per hold record (lock and owner), that its start is
// reported once and before its end, which is reported once.
type hookOrder struct {
	mu      sync.Mutex
	started map[string]int
	ended   map[string]int
	bad     []string
}

func (o *hookOrder) Start(ctx context.Context, _ rlock.Op, _ rlock.LockInfo) context.Context {
	return ctx
}

func (o *hookOrder) End(context.Context, rlock.Op, rlock.LockInfo, rlock.Outcome, time.Duration, error) {
}

func (o *hookOrder) Event(ev rlock.Event) {
	k := ev.Lock.Name + "\x00" + ev.Owner
	o.mu.Lock()
	defer o.mu.Unlock()
	switch ev.Type {
	case rlock.EventHoldStarted:
		if o.started[k]++; o.started[k] > 1 || o.ended[k] > 0 {
			o.bad = append(o.bad, "started again or after its end: "+ev.Lock.Name)
		}
	case rlock.EventHoldEnded:
		if o.ended[k]++; o.ended[k] > 1 || o.started[k] != 1 {
			o.bad = append(o.bad, "ended twice or before its start: "+ev.Lock.Name)
		}
	}
}

// Many goroutines of one client lock names of their own and names they share, of every kind,
// at once (run it with -race): no two hold a name at the same time, every hold record's start
// is reported before its end, and nothing of the client's per-name state is left behind.
func TestShards_concurrentNames(t *testing.T) {
	e := newEnv(t)
	obs := &hookOrder{started: map[string]int{}, ended: map[string]int{}}
	c := e.client(rlock.Options{Observer: obs})
	var rows []lockKind
	for _, k := range kinds {
		if perKind(k) {
			rows = append(rows, k)
		}
	}
	const goroutines, rounds, shared = 24, 40, 3
	type guarded struct {
		lockOps
		in atomic.Int32
	}
	var locks []*guarded
	for i := range shared * len(rows) {
		locks = append(locks, &guarded{lockOps: rows[i%len(rows)].on(c, "shared"+strconv.Itoa(i))})
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		own := &guarded{lockOps: rows[g%len(rows)].on(c, "own"+strconv.Itoa(g))}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				for _, l := range []*guarded{own, locks[(g+r)%len(locks)]} {
					h, err := l.lock(bg)
					if !assert.NoError(t, err) {
						return
					}
					if n := l.in.Add(1); n != 1 {
						assert.Fail(t, "two holders at once", "%d", n)
					}
					l.in.Add(-1)
					if !assert.NoError(t, l.release(h)) {
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	obs.mu.Lock()
	assert.Empty(t, obs.bad)
	assert.Equal(t, len(obs.started), len(obs.ended), "every hold started was ended")
	obs.mu.Unlock()
	records, _ := rlock.PerNameState(c)
	assert.Zero(t, records)
	require.Eventually(t, func() bool {
		_, left := rlock.PerNameState(c)
		return left == 0
	}, 10*time.Second, 10*time.Millisecond, "per-name state left behind")
}
