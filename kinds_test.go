package rlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKinds_mixedKindsOnOneName: locks of different kinds on one name fail with ErrInvalid
// and change nothing, instead of excluding nobody (a release of one kind deleting another's
// hold, a semaphore writing into a read-write lock's hash).
func TestKinds_mixedKindsOnOneName(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{WatchdogTimeout: 3 * time.Second})
	ctx := context.Background()
	type kind struct {
		name    string
		acquire func(name string) (context.Context, error)
		release func(name string, held context.Context) error
	}
	kinds := []kind{
		{"mutex", func(n string) (context.Context, error) { return c.NewMutex(n).TryLock(ctx, 0) },
			func(n string, h context.Context) error { return c.NewMutex(n).Unlock(h) }},
		{"fair mutex", func(n string) (context.Context, error) { return c.NewFairMutex(n).TryLock(ctx, 0) },
			func(n string, h context.Context) error { return c.NewFairMutex(n).Unlock(h) }},
		{"rw read", func(n string) (context.Context, error) { return c.NewRWMutex(n).TryRLock(ctx, 0) },
			func(n string, h context.Context) error { return c.NewRWMutex(n).RUnlock(h) }},
		{"rw write", func(n string) (context.Context, error) { return c.NewFairRWMutex(n).TryLock(ctx, 0) },
			func(n string, h context.Context) error { return c.NewFairRWMutex(n).Unlock(h) }},
		{"semaphore", func(n string) (context.Context, error) { return c.NewSemaphore(n, 2).TryAcquire(ctx, 1, 0) },
			func(n string, h context.Context) error { return c.NewSemaphore(n, 2).Release(h) }},
	}
	family := map[string]string{"mutex": "m", "fair mutex": "m", "rw read": "rw", "rw write": "rw", "semaphore": "s"}
	for _, held := range kinds {
		for _, other := range kinds {
			if family[held.name] == family[other.name] {
				continue
			}
			t.Run(held.name+" then "+other.name, func(t *testing.T) {
				name := "mix-" + family[held.name] + "-" + family[other.name]
				h, err := held.acquire(name)
				require.NoError(t, err)
				before := e.do("HGETALL", e.prefix+":{"+name+"}")
				_, err = other.acquire(name)
				require.ErrorIs(t, err, rlock.ErrInvalid)
				require.ErrorContains(t, err, "another kind")
				// A release of another kind fails too: ErrInvalid from Redis, or ErrNotHeld before
				// Redis when the hold context names no owner for it (a semaphore's).
				if err := other.release(name, h); !errors.Is(err, rlock.ErrNotHeld) {
					require.ErrorIs(t, err, rlock.ErrInvalid)
				}
				after := e.do("HGETALL", e.prefix+":{"+name+"}")
				bm, _ := before.AsStrMap()
				am, _ := after.AsStrMap()
				require.Equal(t, bm, am, "the other kind changed nothing")
				require.NoError(t, h.Err(), "the hold lives on")
				require.NoError(t, held.release(name, h))
			})
		}
	}
}

// TestSemaphore_ForceRelease: ForceRelease deletes every hold, wakes the first waiter (which
// keeps its place and gets its permits at once), and holders learn of the loss at their next
// renewal; a semaphore nobody holds reports false and changes nothing.
func TestSemaphore_ForceRelease(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		holder := e.client(rlock.Options{WatchdogTimeout: 300 * time.Millisecond, Wait: wait})
		other := e.client(rlock.Options{WatchdogTimeout: 300 * time.Millisecond, Wait: wait,
			FairWaitTimeout: 30 * time.Second})
		ctx := context.Background()
		h, err := holder.NewSemaphore("s", 2).Acquire(ctx, 2)
		require.NoError(t, err)
		got := make(chan context.Context, 1)
		go func() {
			w, err := other.NewSemaphore("s", 2).Acquire(ctx, 1)
			assert.NoError(t, err)
			got <- w
		}()
		require.Eventually(t, func() bool {
			n, err := e.do("LLEN", e.prefix+":{s}:queue").AsInt64()
			return err == nil && n == 1
		}, 3*time.Second, time.Millisecond, "the waiter queued")
		start := time.Now()
		ok, err := other.NewSemaphore("s", 2).ForceRelease(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		var w context.Context
		select {
		case w = <-got:
		case <-time.After(5 * time.Second):
			t.Fatal("the waiter did not get its permit after ForceRelease")
		}
		t.Logf("waiter got its permit %v after ForceRelease", time.Since(start))
		require.Eventually(t, func() bool { return rlock.Lost(h) }, 2*time.Second, time.Millisecond,
			"the holder learns of the loss at its next renewal")
		require.ErrorIs(t, holder.NewSemaphore("s", 2).Release(h), rlock.ErrLockLost)
		n, err := other.NewSemaphore("s", 2).Available(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		require.NoError(t, other.NewSemaphore("s", 2).Release(w))
		ok, err = other.NewSemaphore("s", 2).ForceRelease(ctx)
		require.NoError(t, err)
		require.False(t, ok)
		_, err = other.NewMutex("s").ForceUnlock(ctx)
		require.NoError(t, err, "nothing left to be of another kind")
	})
}
