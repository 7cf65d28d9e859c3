package rlock_test

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/wire"
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
				before := e.Do("HGETALL", e.Prefix+":{"+name+"}")
				_, err = other.acquire(name)
				require.ErrorIs(t, err, rlock.ErrInvalid)
				require.ErrorContains(t, err, "another kind")
				// A release of another kind fails too: ErrInvalid from Redis, or ErrNotHeld before
				// Redis when the hold context names no owner for it (a semaphore's).
				if err := other.release(name, h); !errors.Is(err, rlock.ErrNotHeld) {
					require.ErrorIs(t, err, rlock.ErrInvalid)
				}
				after := e.Do("HGETALL", e.Prefix+":{"+name+"}")
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
			n, err := e.Do("LLEN", e.Prefix+":{s}:queue").AsInt64()
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

// slowForce is a rueidis client on which every force-unlock script (ForceUnlock,
// ForceRelease) returns its reply 300ms late.
type slowForce struct {
	rueidis.Client
	shas map[string]bool // of both pub/sub variants of each force script
}

func newSlowForce(rc rueidis.Client) slowForce {
	s := slowForce{Client: rc, shas: map[string]bool{}}
	for _, f := range []string{"forceunlock.lua", "rw_forceunlock.lua", "sem_forcerelease.lua"} {
		for _, src := range []string{wire.Source(f), wire.ShardedSource(f)} {
			s.shas[fmt.Sprintf("%x", sha1.Sum([]byte(src)))] = true
		}
	}
	return s
}

func (s slowForce) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c := cmd.Commands() // read before Do, which may recycle cmd
	force := len(c) > 1 && ((c[0] == "EVALSHA" && s.shas[strings.ToLower(c[1])]) ||
		(c[0] == "EVAL" && s.shas[fmt.Sprintf("%x", sha1.Sum([]byte(c[1])))]))
	r := s.Client.Do(ctx, cmd)
	if force {
		time.Sleep(300 * time.Millisecond)
	}
	return r
}

// TestForceUnlock_ownWaiterKeepsItsNewHold: a force unlock wakes a waiter, which may be of the
// same client and take a new hold before the force unlock's reply arrives (here the reply is
// 300ms late). That hold is not one the force unlock ended: it lives on, and its release frees
// the lock at once (a hold wrongly marked lost is not released; it would stay in Redis for its
// lease, 30s).
func TestForceUnlock_ownWaiterKeepsItsNewHold(t *testing.T) {
	type kind struct {
		name  string
		hold  func(c *rlock.Client) (context.Context, error)
		force func(c *rlock.Client) (bool, error)
		free  func(c *rlock.Client, h context.Context) error
	}
	kinds := []kind{
		{"mutex", func(c *rlock.Client) (context.Context, error) { return c.NewMutex("f").Lock(bg) },
			func(c *rlock.Client) (bool, error) { return c.NewMutex("f").ForceUnlock(bg) },
			func(c *rlock.Client, h context.Context) error { return c.NewMutex("f").Unlock(h) }},
		{"fair mutex", func(c *rlock.Client) (context.Context, error) { return c.NewFairMutex("f").Lock(bg) },
			func(c *rlock.Client) (bool, error) { return c.NewFairMutex("f").ForceUnlock(bg) },
			func(c *rlock.Client, h context.Context) error { return c.NewFairMutex("f").Unlock(h) }},
		{"rw write", func(c *rlock.Client) (context.Context, error) { return c.NewRWMutex("f").Lock(bg) },
			func(c *rlock.Client) (bool, error) { return c.NewRWMutex("f").ForceUnlock(bg) },
			func(c *rlock.Client, h context.Context) error { return c.NewRWMutex("f").Unlock(h) }},
		{"semaphore", func(c *rlock.Client) (context.Context, error) { return c.NewSemaphore("f", 1).Acquire(bg, 1) },
			func(c *rlock.Client) (bool, error) { return c.NewSemaphore("f", 1).ForceRelease(bg) },
			func(c *rlock.Client, h context.Context) error { return c.NewSemaphore("f", 1).Release(h) }},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			e := newEnv(t)
			other := e.client(rlock.Options{})
			c, err := rlock.New(newSlowForce(e.Rueidis()), rlock.Options{KeyPrefix: e.Prefix})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, c.Close()) })

			_, err = k.hold(other)
			require.NoError(t, err)
			got := make(chan context.Context, 1)
			go func() {
				w, err := k.hold(c)
				assert.NoError(t, err)
				got <- w
			}()
			require.Eventually(t, func() bool { return len(e.Channels()) == 1 }, 3*time.Second, time.Millisecond,
				"the waiter subscribed")
			ok, err := k.force(c)
			require.NoError(t, err)
			require.True(t, ok)
			var w context.Context
			select {
			case w = <-got:
			case <-time.After(3 * time.Second):
				t.Fatal("the waiter did not get the lock after the force unlock")
			}
			require.NoError(t, w.Err(), "the waiter's new hold lives on: %v", context.Cause(w))
			require.NoError(t, k.free(c, w)) // and the env's check finds nothing left
		})
	}
}
