package rlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
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
