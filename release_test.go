package rlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
)

// TestRelease_lostWhileWaitingForLane: a release given a hold context whose loss this process
// saw does not touch Redis (the owner may hold the lock anew), also when the loss comes while
// the release waits for the owner's lane. An owner holds with a fixed 200ms lease (h1); another
// call of the same owner re-enters, its request held back by the proxy, so it keeps the owner's
// lane; the release of h1 waits for that lane while the lease runs out and the reaper ends the
// record; then the held request runs, finds nothing (the lease lapsed) and takes a new hold
// (h2, with a 5s lease). The release of h1 must report ErrLockLost and leave h2 alone. (Before
// the fix it
// released h2's hold in Redis and returned nil, ending h2's context as released; with no new
// hold, it returned ErrNotHeld: seen in TestRWModes_stressNoOverlap.)
func TestRelease_lostWhileWaitingForLane(t *testing.T) {
	type target struct {
		name, script string
		lock         func(c *rlock.Client, ctx context.Context, lease time.Duration) (context.Context, error)
		release      func(c *rlock.Client, ctx context.Context) error
		count        func(c *rlock.Client, ctx context.Context) (int, error)
	}
	targets := []target{
		{"mutex", "acquire.lua",
			func(c *rlock.Client, ctx context.Context, lease time.Duration) (context.Context, error) {
				return c.NewMutex("m", rlock.WithLease(lease)).Lock(ctx)
			},
			func(c *rlock.Client, ctx context.Context) error { return c.NewMutex("m").Unlock(ctx) },
			func(c *rlock.Client, ctx context.Context) (int, error) { return c.NewMutex("m").HoldCount(ctx) }},
		{"write", "rw_acquire.lua",
			func(c *rlock.Client, ctx context.Context, lease time.Duration) (context.Context, error) {
				return c.NewRWMutex("m", rlock.WithLease(lease)).Lock(ctx)
			},
			func(c *rlock.Client, ctx context.Context) error { return c.NewRWMutex("m").Unlock(ctx) },
			func(c *rlock.Client, ctx context.Context) (int, error) {
				_, w, err := c.NewRWMutex("m").HoldCount(ctx)
				return w, err
			}},
		{"read", "rw_acquire.lua",
			func(c *rlock.Client, ctx context.Context, lease time.Duration) (context.Context, error) {
				return c.NewRWMutex("m", rlock.WithLease(lease)).RLock(ctx)
			},
			func(c *rlock.Client, ctx context.Context) error { return c.NewRWMutex("m").RUnlock(ctx) },
			func(c *rlock.Client, ctx context.Context) (int, error) {
				r, _, err := c.NewRWMutex("m").HoldCount(ctx)
				return r, err
			}},
	}
	for _, k := range targets {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			p := e.newProxy()
			c := e.through(p).client(rlock.Options{})
			owner := rlock.WithOwner(bg, rlock.NewOwnerID())
			h1, err := k.lock(c, owner, 200*time.Millisecond)
			require.NoError(t, err)

			flow := p.HoldRequest(matchScript(k.script, e.LockKey("m")))
			defer flow()
			second := goAcquire(func() (context.Context, error) { return k.lock(c, owner, 5*time.Second) })
			for end := time.Now().Add(2 * time.Second); p.Armed() && time.Now().Before(end); {
				time.Sleep(time.Millisecond) // until the re-entry's request is held
			}
			require.False(t, p.Armed(), "the re-entry's request reached the proxy")
			released := make(chan error, 1)
			go func() { released <- k.release(c, h1) }()
			time.Sleep(300 * time.Millisecond) // h1's lease runs out while its release waits
			require.Error(t, h1.Err(), "h1's lease ran out")
			flow()

			got := awaitResult(t, second, 3*time.Second, "the re-entry")
			require.NoError(t, got.err)
			var rerr error
			select {
			case rerr = <-released:
			case <-time.After(3 * time.Second):
				t.Fatal("the release of h1 did not return")
			}
			n, err := k.count(c, owner)
			require.NoError(t, err)
			t.Logf("release of the lost h1: %v; the new hold's context: %v; holds of the owner in Redis: %d",
				rerr, got.h.Err(), n)
			assert.ErrorIs(t, rerr, rlock.ErrLockLost, "h1 was lost")
			assert.NoError(t, got.h.Err(), "the new hold lives on")
			assert.Equal(t, 1, n, "the new hold is still held in Redis")
			if got.h.Err() == nil {
				require.NoError(t, k.release(c, got.h))
			}
			requireNothingHeld(t, e, "the new hold released")
		})
	}
}
