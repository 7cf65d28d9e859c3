package rlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
)

// A lease in Redis is never shortened: a re-entry with a shorter lease than the one the owner
// holds by (or a watchdog renewal shorter than a fixed lease) leaves the longer one. Without
// that, the key expired at the shorter lease's end and another owner took the lock while the
// first hold context still looked live.

// Each test runs for every kind and mode that one owner at a time holds, re-entrantly: a Mutex
// (plain, fair) and an RWMutex's write holds (plain, fair).

// TestReentryLease_shorterReentryNeverShortens: an owner holds with a 1s lease (context A) and
// re-enters through a lock of the same name with a 60ms lease. Another owner waiting for the
// lock gets it only once A has ended, and Redis keeps the lock at least as long as A lives.
func TestReentryLease_shorterReentryNeverShortens(t *testing.T) {
	const long, short = time.Second, 60 * time.Millisecond
	each(t, exclusiveKinds, func(t *testing.T, k lockKind) {
		t.Parallel() // each waits out a lease
		strategiesInParallel(t, func(t *testing.T, wait rlock.WaitStrategy) {
			e := newEnv(t)
			c := e.client(rlock.Options{Wait: wait})
			outer := k.on(c, "re", rlock.WithLease(long))
			inner := k.on(c, "re", rlock.WithLease(short))
			other := k.on(e.client(rlock.Options{Wait: wait}), "re")

			a, err := outer.lock(bg)
			require.NoError(t, err)
			dl, ok := a.Deadline()
			require.True(t, ok)
			b, err := inner.lock(a)
			require.NoError(t, err)
			reentered := time.Now()
			pttl, err := e.Do("PTTL", e.LockKey("re")).AsInt64()
			require.NoError(t, err)
			assert.GreaterOrEqual(t, time.Duration(pttl)*time.Millisecond, time.Until(dl)-5*time.Millisecond,
				"Redis keeps at least the outer lease")

			// Another owner waits for the lock; the moment it gets it, A must have ended.
			got, err := other.try(bg, 3*time.Second)
			require.NoError(t, err)
			gotAt := time.Now()
			aLive := a.Err() == nil
			t.Logf("the other owner got the lock %v after the re-entry (outer lease %v); A live then: %v; "+
				"A's deadline %v after it", gotAt.Sub(reentered).Round(time.Millisecond), long, aLive,
				dl.Sub(gotAt).Round(time.Millisecond))
			assert.False(t, aLive, "A is done once another owner holds the lock")
			assert.False(t, dl.After(gotAt), "A's deadline had passed when another owner got the lock")
			assert.GreaterOrEqual(t, gotAt.Sub(reentered), long-short-50*time.Millisecond,
				"the shorter re-entry did not cut the lease")

			// The shorter re-entry's context ended at its own deadline, the lock still held then.
			require.Error(t, b.Err())
			assert.ErrorIs(t, context.Cause(a), rlock.ErrLockLost, "A's lease ran out")
			assert.ErrorIs(t, outer.release(a), rlock.ErrLockLost)
			assert.Error(t, outer.release(b))
			require.NoError(t, other.release(got))
		})
	})
}

// TestReentryLease_liveOnlyWhileRedisHolds polls a hold context A (1s lease) re-entered with a
// 60ms lease against Redis: A's Err is nil only while Redis still has the owner's hold.
func TestReentryLease_liveOnlyWhileRedisHolds(t *testing.T) {
	each(t, exclusiveKinds, func(t *testing.T, k lockKind) {
		t.Parallel()
		e := newEnv(t)
		c := e.client(rlock.Options{})
		outer := k.on(c, "live", rlock.WithLease(time.Second))
		inner := k.on(c, "live", rlock.WithLease(60*time.Millisecond))
		a, err := outer.lock(bg)
		require.NoError(t, err)
		_, err = inner.lock(a)
		require.NoError(t, err)
		start := time.Now()
		var liveGone, polls int
		var firstGone time.Duration
		for a.Err() == nil {
			polls++
			n, err := e.Do("EXISTS", e.LockKey("live")).AsInt64()
			require.NoError(t, err)
			if n == 0 && a.Err() == nil {
				if liveGone == 0 {
					firstGone = time.Since(start)
				}
				liveGone++
			}
			time.Sleep(2 * time.Millisecond)
		}
		t.Logf("A ended %v after the re-entry; %d of %d polls found A live with the lock gone from Redis "+
			"(first at %v)", time.Since(start).Round(time.Millisecond), liveGone, polls, firstGone)
		assert.Zero(t, liveGone, "A looked live while Redis no longer had the lock")
		assert.GreaterOrEqual(t, time.Since(start), 800*time.Millisecond, "A lived for its own lease")
		err = outer.release(a)
		assert.True(t, err == nil || errors.Is(err, rlock.ErrLockLost), "%v", err)
	})
}

// TestReentryLease_renewalNeverShortens: a hold with a fixed 2s lease (context A), re-entered
// through a watchdog lock of the same name (a 300ms WatchdogTimeout): the renewals keep
// Redis' lease at least until A's deadline, so a pause of the process that outlasts the
// watchdog lease cannot leave A live past what Redis has.
func TestReentryLease_renewalNeverShortens(t *testing.T) {
	each(t, exclusiveKinds, func(t *testing.T, k lockKind) {
		t.Parallel()
		e := newEnv(t)
		c := e.client(rlock.Options{WatchdogTimeout: 300 * time.Millisecond})
		outer := k.on(c, "renew", rlock.WithLease(2*time.Second))
		inner := k.on(c, "renew")
		a, err := outer.lock(bg)
		require.NoError(t, err)
		dl, _ := a.Deadline()
		b, err := inner.lock(a)
		require.NoError(t, err)
		time.Sleep(500 * time.Millisecond) // several renewals
		left := time.Until(dl)
		pttl, err := e.Do("PTTL", e.LockKey("renew")).AsInt64()
		require.NoError(t, err)
		t.Logf("after the renewals Redis' lease is %dms, A's deadline %v away", pttl, left.Round(time.Millisecond))
		assert.GreaterOrEqual(t, time.Duration(pttl)*time.Millisecond, left-5*time.Millisecond,
			"Redis keeps the lock at least until A's deadline")
		require.NoError(t, a.Err())
		require.NoError(t, inner.release(b))
		require.NoError(t, outer.release(a))
	})
}
