package rlock_test

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
)

// Requests whose reply is lost (lane.go, settle.go): each test loses a request or a reply, or
// breaks the line, with redistest.Proxy, and checks one invariant, for every kind and mode:
// never a double grant, no hold left behind by a call that failed, no release counted twice.

// eachProxied runs f as a subtest per kind and mode on its own env and proxy, with the lock
// "k" on a client through the proxy (subject, with options opts) and on one straight to Redis
// (direct, which reads what Redis counts and takes conflicting holds).
func eachProxied(t *testing.T, opts rlock.Options, f func(t *testing.T, e *env, p *redistest.Proxy, k lockKind, subject, direct lockOps)) {
	eachKind(t, func(t *testing.T, k lockKind) {
		e := newEnv(t)
		p := e.newProxy()
		f(t, e, p, k, k.on(e.through(p).client(opts), "k"), k.on(e.client(rlock.Options{}), "k"))
	})
}

// held is ops.count(h), required to succeed.
func held(t *testing.T, ops lockOps, h context.Context) int64 {
	t.Helper()
	n, err := ops.count(h)
	require.NoError(t, err)
	return n
}

// requireNothingHeld requires that no key but fencing counters is left under e's prefix.
func requireNothingHeld(t *testing.T, e *env, msg string) {
	t.Helper()
	keys := slices.DeleteFunc(e.Keys(), func(k string) bool { return strings.HasSuffix(k, ":fence") })
	require.Empty(t, keys, msg)
}

// requireKeptOut requires that another owner cannot take a conflicting hold now.
func requireKeptOut(t *testing.T, direct lockOps, msg string) {
	t.Helper()
	h, err := direct.conflict(0)
	if err == nil {
		require.NoError(t, direct.conflictRelease(h))
	}
	require.ErrorIs(t, err, rlock.ErrNotObtained, msg)
}

// unit is what one hold of k counts (see lockOps.count): 1, or a semaphore's semUnit permits.
func unit(k lockKind) int64 {
	if k.semaphore() {
		return semUnit
	}
	return 1
}

// An acquire whose reply is lost after the script took the hold, in a call that then gives up,
// gives the hold back before it returns (no phantom hold); one whose reply or request is lost
// in a call that goes on is replayed under its request id and counted once (no double grant).
func TestReplay_lostAcquire(t *testing.T) {
	t.Run("TryLock 0", func(t *testing.T) {
		eachProxied(t, rlock.Options{}, func(t *testing.T, e *env, p *redistest.Proxy, k lockKind, subject, _ lockOps) {
			p.DropReply(matchScript(k.acquireScript, e.LockKey("k")))
			_, err := subject.try(bg, 0)
			require.ErrorIs(t, err, rlock.ErrNotObtained, "the reply was lost: not obtained")
			require.EqualValues(t, 1, p.Fired())
			requireNothingHeld(t, e, "the hold the lost reply took was given back before the call returned")
		})
	})
	t.Run("context ends after the lost reply", func(t *testing.T) {
		eachProxied(t, rlock.Options{}, func(t *testing.T, e *env, p *redistest.Proxy, k lockKind, subject, _ lockOps) {
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			// cancel as the fault fires, before the client can learn of it
			p.DropReply(redistest.ThenCall(matchScript(k.acquireScript, e.LockKey("k")), cancel))
			_, err := subject.lock(ctx)
			require.ErrorIs(t, err, context.Canceled)
			require.EqualValues(t, 1, p.Fired())
			// The call returns within its bound (issue 27): giving the hold back is tried in it
			// for replyGrace, then left to the settler, which a loaded machine can reach later.
			require.Eventually(t, func() bool {
				return len(slices.DeleteFunc(e.Keys(), func(k string) bool { return strings.HasSuffix(k, ":fence") })) == 0
			}, 2*time.Second, 5*time.Millisecond, "the hold the lost reply took was not given back")
		})
	})
	for _, fault := range []string{"reply", "request"} {
		t.Run("blocking call, lost "+fault, func(t *testing.T) {
			eachProxied(t, rlock.Options{}, func(t *testing.T, e *env, p *redistest.Proxy, k lockKind, subject, direct lockOps) {
				match := matchScript(k.acquireScript, e.LockKey("k"))
				if fault == "request" {
					p.DropRequest(match)
				} else {
					p.DropReply(match)
				}
				h, err := subject.lock(bg)
				require.NoError(t, err)
				require.EqualValues(t, 1, p.Fired(), "the fault fired")
				require.NoError(t, h.Err())
				assert.Equal(t, unit(k), held(t, direct, h), "Redis counts the hold once")
				requireKeptOut(t, direct, "the hold is in Redis")
				require.NoError(t, subject.release(h))
				requireNothingHeld(t, e, "one release gave everything back")
			})
		})
	}
}

// A waiter's retry whose reply is lost after it took the lock (its earlier attempts were
// answered: the lock was held) is replayed as a full attempt, which finds the hold: the call
// returns with the hold counted once, not after its own lease. (A plain Mutex's waiter with an
// owner made for the call retries without reading the hash, wire.TakeNew, only until a reply
// is lost.) The kinds whose waiters are woken and retry; a queued kind's release grants.
func TestReplay_lostRetryReply(t *testing.T) {
	eachProxied(t, rlock.Options{}, func(t *testing.T, e *env, p *redistest.Proxy, k lockKind, subject, direct lockOps) {
		if k.queued {
			t.Skip("a release grants the lock to the queued waiter: no retry to lose")
		}
		h0, err := direct.conflict(0)
		require.NoError(t, err)
		var released atomic.Bool
		match := matchScript(k.acquireScript, e.LockKey("k"))
		p.DropReply(func(cmd []string) bool { return released.Load() && match(cmd) })
		got := goAcquire(func() (context.Context, error) { return subject.lock(bg) })
		requireNone(t, 150*time.Millisecond, "behind the hold", got)
		released.Store(true)
		require.NoError(t, direct.conflictRelease(h0))
		h := requireGranted(t, got, 5*time.Second, "the retry whose reply was lost is replayed")
		require.EqualValues(t, 1, p.Fired(), "the fault fired")
		assert.Equal(t, unit(k), held(t, direct, h), "Redis counts the hold once")
		require.NoError(t, subject.release(h))
		requireNothingHeld(t, e, "one release gave everything back")
	})
}

// A second hold through the hold context (a re-entry; a new hold of the semaphore) whose
// request or reply is lost is counted once: the release of the second hold leaves the first one
// held, and its context live.
func TestReplay_secondHoldWithLostRequestOrReply(t *testing.T) {
	for _, fault := range []string{"request", "reply"} {
		t.Run(fault, func(t *testing.T) {
			eachProxied(t, rlock.Options{}, func(t *testing.T, e *env, p *redistest.Proxy, k lockKind, subject, direct lockOps) {
				// A semaphore's holds take 1 permit each here: two fit.
				outer, err := subject.lockOne(bg)
				require.NoError(t, err)
				match := matchScript(k.acquireScript, e.LockKey("k"))
				if fault == "request" {
					p.DropRequest(match)
				} else {
					p.DropReply(match)
				}
				inner, err := subject.lockOne(outer)
				require.NoError(t, err)
				require.EqualValues(t, 1, p.Fired(), "the fault fired")
				assert.EqualValues(t, 2, held(t, direct, inner), "Redis counts the second hold once")

				require.NoError(t, subject.release(inner))
				assert.EqualValues(t, 1, held(t, direct, outer), "the first hold remains")
				assert.NoError(t, outer.Err(), "the first hold context lives on")
				require.NoError(t, subject.release(outer))
				assert.ErrorIs(t, context.Cause(outer), context.Canceled)
				requireNothingHeld(t, e, "both holds were released")
			})
		})
	}
}

// A release whose reply is lost is replayed under its request id: it returns nil and gives
// back exactly one hold (the semaphore: exactly its permits); a second Release of that
// semaphore hold is ErrNotHeld and gives back nothing.
func TestReplay_lostReleaseReply(t *testing.T) {
	eachProxied(t, rlock.Options{}, func(t *testing.T, e *env, p *redistest.Proxy, k lockKind, subject, direct lockOps) {
		var first, second context.Context
		var err error
		if k.semaphore() { // 1 permit, then semUnit: all out
			first, err = subject.lockOne(bg)
			require.NoError(t, err)
			second, err = subject.lock(bg)
			require.NoError(t, err)
			require.EqualValues(t, semPermits, held(t, direct, second))
		} else { // a hold and a re-entry
			first, err = subject.lock(bg)
			require.NoError(t, err)
			second, err = subject.lock(first)
			require.NoError(t, err)
			require.EqualValues(t, 2, held(t, direct, second))
		}
		p.DropReply(matchScript(k.releaseScript, e.LockKey("k")))
		require.NoError(t, subject.release(second), "the release ran; its replay says so")
		require.EqualValues(t, 1, p.Fired(), "the fault fired")
		assert.EqualValues(t, 1, held(t, direct, first), "one hold released, once")
		if k.semaphore() {
			assert.ErrorIs(t, subject.release(second), rlock.ErrNotHeld, "a second Release of the hold")
			assert.EqualValues(t, 1, held(t, direct, first), "... gives back nothing")
		}
		require.NoError(t, first.Err(), "the remaining hold's context lives on")
		require.NoError(t, subject.release(first))
		requireNothingHeld(t, e, "everything released")
	})
}

// TestReplay_unlockAfterLostReply loses the reply of an Unlock's release script after the
// server ran it (the connection drops): Unlock retries with the same request id and the
// script recognises it, so a partial release is not counted twice and a final one is not
// mistaken for a lost lock.
func TestReplay_unlockAfterLostReply(t *testing.T) {
	e := newEnv(t)
	p := e.newProxy()
	m := e.through(p).client(rlock.Options{}).NewMutex("replay")
	outer, err := m.Lock(bg)
	require.NoError(t, err)
	inner, err := m.Lock(outer)
	require.NoError(t, err)
	inner2, err := m.Lock(inner)
	require.NoError(t, err)

	release := matchScript("release.lua", e.LockKey("replay"))
	p.DropReply(release)
	require.NoError(t, m.Unlock(inner2))
	require.EqualValues(t, 1, p.Fired(), "the release reply was lost")
	n, err := m.HoldCount(outer)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the retried release did not count twice")

	require.NoError(t, m.Unlock(inner))
	p.DropReply(release)
	require.NoError(t, m.Unlock(outer), "the final release ran; its retry reports success, not a lost lock")
	require.EqualValues(t, 2, p.Fired())
	require.ErrorIs(t, context.Cause(outer), context.Canceled)
	assert.ErrorIs(t, m.Unlock(outer), rlock.ErrNotHeld)
}

// A release that ran but whose reply was lost, followed by an outage longer than the release's
// retries, is settled when Redis is back: the hold ends as released (not lost), and the
// caller's retried release returns nil; one more is ErrNotHeld.
func TestReplay_lostReleaseReplyThenOutage(t *testing.T) {
	eachKind(t, func(t *testing.T, k lockKind) {
		t.Parallel() // each waits seconds for the watchdog; they share nothing
		e := newEnv(t)
		p := e.newProxy()
		subject := k.on(e.through(p).client(rlock.Options{WatchdogTimeout: 6 * time.Second}), "rel")
		h, err := subject.lock(bg)
		require.NoError(t, err)

		p.DropReplyThenOutage(matchScript(k.releaseScript, e.LockKey("rel")), 3500*time.Millisecond)
		require.Error(t, subject.release(h), "every retry failed in the outage")
		assert.Empty(t, e.Keys(), "the release had run")

		// The watchdog settles the release (its next tick after the outage), not marking it lost.
		require.Error(t, causeOf(h, 6*time.Second), "the hold context ends once settled")
		assert.ErrorIs(t, context.Cause(h), context.Canceled)
		assert.NotErrorIs(t, context.Cause(h), rlock.ErrLockLost)
		require.NoError(t, subject.release(h), "the retried release returns the settled outcome")
		assert.ErrorIs(t, subject.release(h), rlock.ErrNotHeld)
		requireNothingHeld(t, e, "released once")
	})
}

// Replay records do not collide between clients sharing an owner id: a release of the same
// owner by another client between a lost release reply and its replay is not undone by the
// replay (semaphore holds are never shared).
func TestReplay_sharedOwnerDoesNotReleaseTwice(t *testing.T) {
	each(t, func(k lockKind) bool { return !k.semaphore() }, func(t *testing.T, k lockKind) {
		e := newEnv(t)
		p := e.newProxy()
		a := k.on(e.through(p).client(rlock.Options{}), "sh")
		b := k.on(e.client(rlock.Options{}), "sh")
		owner := rlock.WithOwner(bg, "shared-owner")
		var holds []context.Context
		for range 3 {
			h, err := a.lock(owner)
			require.NoError(t, err)
			holds = append(holds, h)
		}
		require.EqualValues(t, 3, held(t, b, owner))
		// a's release runs, its reply is lost, and its retries wait out an outage; meanwhile b
		// (not proxied) releases one hold.
		p.DropReplyThenOutage(matchScript(k.releaseScript, e.LockKey("sh")), 300*time.Millisecond)
		done := make(chan error, 1)
		go func() { done <- a.release(holds[2]) }()
		require.Eventually(t, func() bool { n, err := b.count(owner); return p.Fired() == 1 && err == nil && n == 2 },
			time.Second, 100*time.Microsecond)
		require.NoError(t, b.release(owner))
		require.NoError(t, <-done, "the replay after the outage returns the recorded outcome")
		assert.EqualValues(t, 1, held(t, b, owner), "3 holds, 2 releases: 1 left")
		require.NoError(t, holds[0].Err())
		require.NoError(t, a.release(holds[1]))
		requireNothingHeld(t, e, "3 holds, 3 releases")
	})
}
