package rlock

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlock-go/rlock/internal/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shardKind makes one kind of lock for the shard tests: its lock, and how to take and give
// back one hold of it (exclusive, so that contenders wait).
type shardKind struct {
	name string
	make func(c *Client, name string, wait WaitStrategy) (h *locker, take func(context.Context) (context.Context, error), give func(context.Context) error)
}

var shardKinds = []shardKind{
	{"mutex", func(c *Client, name string, w WaitStrategy) (*locker, func(context.Context) (context.Context, error), func(context.Context) error) {
		m := c.NewMutex(name, WithWait(w))
		return &m.locker, m.Lock, m.Unlock
	}},
	{"fair mutex", func(c *Client, name string, w WaitStrategy) (*locker, func(context.Context) (context.Context, error), func(context.Context) error) {
		m := c.NewFairMutex(name, WithWait(w))
		return &m.locker, m.Lock, m.Unlock
	}},
	{"rwmutex", func(c *Client, name string, w WaitStrategy) (*locker, func(context.Context) (context.Context, error), func(context.Context) error) {
		m := c.NewRWMutex(name, WithWait(w))
		return &m.locker, m.Lock, m.Unlock
	}},
	{"fair rwmutex", func(c *Client, name string, w WaitStrategy) (*locker, func(context.Context) (context.Context, error), func(context.Context) error) {
		m := c.NewFairRWMutex(name, WithWait(w))
		return &m.locker, m.Lock, m.Unlock
	}},
	{"semaphore", func(c *Client, name string, w WaitStrategy) (*locker, func(context.Context) (context.Context, error), func(context.Context) error) {
		s := c.NewSemaphore(name, 1, WithWait(w))
		return &s.locker, func(ctx context.Context) (context.Context, error) { return s.Acquire(ctx, 1) }, s.Release
	}},
}

// Calls on a name never wait for the state of names in other shards (issue 17): with the
// mutex of another name's shard held throughout, a hold is taken, contended (the waiter waits
// by pub/sub or spin, and gets the lock when the holder gives it back) and given back, for
// every kind. Under one client-wide mutex the first call would block for good.
func TestShards_namesInOtherShardsDoNotWait(t *testing.T) {
	c := internalClient(t, "rlshards"+NewOwnerID()[:8])
	for _, k := range shardKinds {
		for _, w := range []WaitStrategy{PubSub(), Spin(5 * time.Millisecond)} {
			t.Run(fmt.Sprintf("%s/%T", k.name, w), func(t *testing.T) {
				h, take, give := k.make(c, "busy"+k.name, w)
				var other *shard
				for i := 0; other == nil || other == h.sh; i++ {
					other = c.shards.of(wire.NewKeys(c.opts.KeyPrefix, "other"+strconv.Itoa(i)).Lock)
				}
				other.mu.Lock()
				defer other.mu.Unlock()

				done := make(chan error, 1)
				go func() {
					done <- func() error {
						bg := context.Background()
						h, err := take(bg)
						if err != nil {
							return err
						}
						got := make(chan error, 1)
						go func() {
							h2, err := take(bg) // another owner: waits for h
							if err == nil {
								err = give(h2)
							}
							got <- err
						}()
						time.Sleep(20 * time.Millisecond) // (the waiter's first attempt, usually)
						if err := give(h); err != nil {
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
		}
	}
}

// hookOrder is an Observer that checks, per hold record (lock and owner), that its start is
// reported once and before its end, which is reported once.
type hookOrder struct {
	mu      sync.Mutex
	started map[string]int
	ended   map[string]int
	bad     []string
}

func (o *hookOrder) Start(ctx context.Context, _ Op, _ LockInfo) context.Context { return ctx }
func (o *hookOrder) End(context.Context, Op, LockInfo, Outcome, time.Duration, error) {
}

func (o *hookOrder) Event(ev Event) {
	k := ev.Lock.Name + "\x00" + ev.Owner
	o.mu.Lock()
	defer o.mu.Unlock()
	switch ev.Type {
	case EventHoldStarted:
		if o.started[k]++; o.started[k] > 1 || o.ended[k] > 0 {
			o.bad = append(o.bad, "started again or after its end: "+ev.Lock.Name)
		}
	case EventHoldEnded:
		if o.ended[k]++; o.ended[k] > 1 || o.started[k] != 1 {
			o.bad = append(o.bad, "ended twice or before its start: "+ev.Lock.Name)
		}
	}
}

// Many goroutines of one client lock names of their own and names they share, of every kind,
// at once (run it with -race): no two hold a name at the same time, every hold record's start
// is reported before its end, and nothing of the client's per-name state is left behind.
func TestShards_concurrentNames(t *testing.T) {
	obs := &hookOrder{started: map[string]int{}, ended: map[string]int{}}
	c, err := New(testRueidis(t), Options{KeyPrefix: "rlshardsrace" + NewOwnerID()[:8], Observer: obs})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	const goroutines, rounds, shared = 24, 40, 3
	type guarded struct {
		take func(context.Context) (context.Context, error)
		give func(context.Context) error
		in   atomic.Int32
	}
	var locks []*guarded
	for i := range shared * len(shardKinds) {
		k := shardKinds[i%len(shardKinds)]
		_, take, give := k.make(c, "shared"+strconv.Itoa(i), PubSub())
		locks = append(locks, &guarded{take: take, give: give})
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		k := shardKinds[g%len(shardKinds)]
		_, take, give := k.make(c, "own"+strconv.Itoa(g), PubSub())
		own := &guarded{take: take, give: give}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				for _, l := range []*guarded{own, locks[(g+r)%len(locks)]} {
					h, err := l.take(context.Background())
					if !assert.NoError(t, err) {
						return
					}
					if n := l.in.Add(1); n != 1 {
						assert.Fail(t, "two holders at once", "%d", n)
					}
					l.in.Add(-1)
					if !assert.NoError(t, l.give(h)) {
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
	assert.Zero(t, c.shards.records.Load())
	require.Eventually(t, func() bool {
		left := 0
		c.shards.each(func(sh *shard) { left += len(sh.holds.m) + len(sh.lanes.m) + len(sh.subs.m) + len(sh.subs.arrivals.m) })
		return left == 0
	}, 10*time.Second, 10*time.Millisecond, "per-name state left behind")
}
