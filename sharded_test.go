package rlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/stretchr/testify/require"
)

// TestSharded_wakeUpsOnEveryKind runs waits of every kind on clients that use sharded pub/sub
// (SSUBSCRIBE/SPUBLISH), as they do on a cluster: the waiter subscribes to a shard channel,
// never a classic one, is woken by the release long before any lease or poll bound, and leaves
// no subscription behind (the env's final check covers shard channels).
func TestSharded_wakeUpsOnEveryKind(t *testing.T) {
	e := newEnv(t)
	// Lease and poll bounds far above the wait allowed below: only a message can wake in time.
	opts := rlock.Options{KeyPrefix: e.Prefix, WatchdogTimeout: 30 * time.Second, FairWaitTimeout: 30 * time.Second}
	newClient := func() *rlock.Client {
		c, err := rlock.NewSharded(e.Rueidis(), opts)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, c.Close()) })
		return c
	}
	a, b := newClient(), newClient()
	ctx := context.Background()
	type kind struct {
		name    string
		acquire func(c *rlock.Client) (context.Context, error)
		release func(c *rlock.Client, held context.Context) error
	}
	kinds := []kind{
		{"mutex", func(c *rlock.Client) (context.Context, error) { return c.NewMutex("m").Lock(ctx) },
			func(c *rlock.Client, h context.Context) error { return c.NewMutex("m").Unlock(h) }},
		{"fair mutex", func(c *rlock.Client) (context.Context, error) { return c.NewFairMutex("f").Lock(ctx) },
			func(c *rlock.Client, h context.Context) error { return c.NewFairMutex("f").Unlock(h) }},
		{"rw write", func(c *rlock.Client) (context.Context, error) { return c.NewRWMutex("rw").Lock(ctx) },
			func(c *rlock.Client, h context.Context) error { return c.NewRWMutex("rw").Unlock(h) }},
		{"rw read", func(c *rlock.Client) (context.Context, error) { return c.NewRWMutex("rr").RLock(ctx) },
			func(c *rlock.Client, h context.Context) error { return c.NewRWMutex("rr").RUnlock(h) }},
		{"fair rw write", func(c *rlock.Client) (context.Context, error) { return c.NewFairRWMutex("fw").Lock(ctx) },
			func(c *rlock.Client, h context.Context) error { return c.NewFairRWMutex("fw").Unlock(h) }},
		{"semaphore", func(c *rlock.Client) (context.Context, error) { return c.NewSemaphore("s", 1).Acquire(ctx, 1) },
			func(c *rlock.Client, h context.Context) error { return c.NewSemaphore("s", 1).Release(h) }},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			blocker := a
			if k.name == "rw read" {
				// A reader waits for a writer.
				h, err := a.NewRWMutex("rr").Lock(ctx)
				require.NoError(t, err)
				got := make(chan error, 1)
				go func() {
					held, err := k.acquire(b)
					if err == nil {
						err = k.release(b, held)
					}
					got <- err
				}()
				waitForShardChannel(t, e)
				require.NoError(t, a.NewRWMutex("rr").Unlock(h))
				select {
				case err := <-got:
					require.NoError(t, err)
				case <-time.After(3 * time.Second):
					t.Fatal("the reader was not woken")
				}
				return
			}
			h, err := k.acquire(blocker)
			require.NoError(t, err)
			got := make(chan error, 1)
			go func() {
				held, err := k.acquire(b)
				if err == nil {
					err = k.release(b, held)
				}
				got <- err
			}()
			waitForShardChannel(t, e)
			require.NoError(t, k.release(blocker, h))
			select {
			case err := <-got:
				require.NoError(t, err)
			case <-time.After(3 * time.Second):
				t.Fatal("the waiter was not woken")
			}
		})
	}
}

// waitForShardChannel waits until a waiter of e has subscribed to a shard channel, and checks
// that no classic channel is subscribed.
func waitForShardChannel(t *testing.T, e *env) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, sharded := e.ChannelsByKind()
		return len(sharded) > 0
	}, 3*time.Second, time.Millisecond, "no shard channel subscribed")
	classic, _ := e.ChannelsByKind()
	require.Empty(t, classic, "a sharded client subscribed to a classic channel")
}
