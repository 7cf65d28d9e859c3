package rlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
)

// One owner's read and write holds of an RWMutex each have a lease of their own: one that
// lapses is lost alone. The owner's hold contexts live while it holds either mode, and its
// releases of the mode it still holds reach Redis.

// TestRWModes_lapsedWriteLeavesLiveRead: with WithLease(400ms), a write hold at 0 and the same
// owner's read hold at 200ms. At 450ms the Unlock of the lapsed write hold returns ErrLockLost,
// the read hold's context lives on, and the RUnlock releases the read hold in Redis: a writer
// of another owner, waiting, gets the lock then, not when the read lease ends (600ms).
func TestRWModes_lapsedWriteLeavesLiveRead(t *testing.T) {
	inParallel(t, func(t *testing.T, k lockKind, wait rlock.WaitStrategy) {
		e := newEnv(t)
		const lease = 400 * time.Millisecond
		m := k.rw(e.client(rlock.Options{Wait: wait}), "a", rlock.WithLease(lease))
		other := k.rw(e.client(rlock.Options{Wait: wait}), "a")

		start := time.Now()
		w, err := m.Lock(bg)
		require.NoError(t, err)
		owner := mustOwner(t, w)
		time.Sleep(lease / 2)
		r, err := m.RLock(rlock.WithOwner(bg, owner)) // a context of its own, not nested in w
		require.NoError(t, err)
		waiter := goAcquire(func() (context.Context, error) { return other.TryLock(bg, 3*time.Second) })

		time.Sleep(time.Until(start.Add(lease + 50*time.Millisecond)))
		assert.ErrorIs(t, m.Unlock(w), rlock.ErrLockLost, "the write lease had run out")
		rLive := r.Err() == nil
		rerr := m.RUnlock(r)
		released := time.Now()
		got := awaitResult(t, waiter, 3*time.Second, "the other writer")
		require.NoError(t, got.err)
		t.Logf("after the lapsed write hold's Unlock the read context was live: %v; RUnlock: %v; the waiting "+
			"writer got the lock %v after it (%v after the start; the read lease ends at %v)", rLive, rerr,
			got.at.Sub(released).Round(time.Millisecond), got.at.Sub(start).Round(time.Millisecond), lease*3/2)
		assert.True(t, rLive, "the read hold's context lives on")
		assert.NoError(t, rerr, "the read hold is released in Redis")
		assert.ErrorIs(t, context.Cause(r), context.Canceled, "released, not lost")
		assert.Less(t, got.at.Sub(start), lease*3/2-50*time.Millisecond,
			"the waiting writer got the lock when the read hold was released, not at its lease end")
		require.NoError(t, other.Unlock(got.h))
	})
}

// TestRWModes_lapsedReadLeavesLiveWrite: a write hold with a 2s lease and the same owner's read
// hold with a 100ms lease. Once the read lease has run out the write hold's context lives on,
// its Unlock releases it in Redis (a writer of another owner, waiting, gets the lock then), and
// the RUnlock of the lapsed read hold returns ErrLockLost.
func TestRWModes_lapsedReadLeavesLiveWrite(t *testing.T) {
	inParallel(t, func(t *testing.T, k lockKind, wait rlock.WaitStrategy) {
		e := newEnv(t)
		c := e.client(rlock.Options{Wait: wait})
		mw := k.rw(c, "b", rlock.WithLease(2*time.Second))
		mr := k.rw(c, "b", rlock.WithLease(100*time.Millisecond))
		other := k.rw(e.client(rlock.Options{Wait: wait}), "b")

		w, err := mw.Lock(bg)
		require.NoError(t, err)
		r, err := mr.RLock(rlock.WithOwner(bg, mustOwner(t, w)))
		require.NoError(t, err)
		time.Sleep(300 * time.Millisecond) // the read lease and the reaper's grace are over
		wLive := w.Err() == nil
		assert.Error(t, r.Err(), "the read hold's deadline passed")
		waiter := goAcquire(func() (context.Context, error) { return other.TryLock(bg, 3*time.Second) })
		requireNone(t, 50*time.Millisecond, "the other writer waits for the write hold", waiter)
		werr := mw.Unlock(w)
		released := time.Now()
		got := awaitResult(t, waiter, 3*time.Second, "the other writer")
		t.Logf("300ms in, the write context was live: %v; its Unlock: %v; the waiting writer got the lock %v "+
			"after it (err %v)", wLive, werr, got.at.Sub(released).Round(time.Millisecond), got.err)
		assert.True(t, wLive, "the write hold's context lives while its own lease does")
		assert.NoError(t, werr, "the write hold is released in Redis")
		require.NoError(t, got.err)
		assert.Less(t, got.at.Sub(released), time.Second, "the waiting writer got the lock at the release")
		assert.ErrorIs(t, mr.RUnlock(r), rlock.ErrLockLost, "the read lease had run out")
		require.NoError(t, other.Unlock(got.h))
	})
}

// TestRWModes_fixedModeNotRenewed: a write hold with a fixed 300ms lease and the same owner's
// watchdog read hold (WatchdogTimeout 300ms). The watchdog renews the read lease only: the
// write hold ends in Redis with its own lease, its context with it, while the read hold and
// its context live on.
func TestRWModes_fixedModeNotRenewed(t *testing.T) {
	rwKindsInParallel(t, func(t *testing.T, k lockKind) {
		e := newEnv(t)
		c := e.client(rlock.Options{WatchdogTimeout: 300 * time.Millisecond})
		mw := k.rw(c, "f", rlock.WithLease(300*time.Millisecond))
		mr := k.rw(c, "f")
		w, err := mw.Lock(bg)
		require.NoError(t, err)
		owner := rlock.WithOwner(bg, mustOwner(t, w))
		r, err := mr.RLock(owner)
		require.NoError(t, err)
		time.Sleep(700 * time.Millisecond) // renewals of the read hold; the write lease is over
		read, write, err := mr.HoldCount(owner)
		require.NoError(t, err)
		t.Logf("700ms in, Redis has %d read and %d write holds of the owner; write context %v, read context %v",
			read, write, w.Err(), r.Err())
		assert.Equal(t, []int{1, 0}, []int{read, write}, "the read hold renewed, the fixed write hold ended")
		assert.Error(t, w.Err())
		assert.NoError(t, r.Err())
		assert.ErrorIs(t, mw.Unlock(w), rlock.ErrLockLost)
		require.NoError(t, r.Err())
		require.NoError(t, mr.RUnlock(r))
		requireNothingHeld(t, e, "the read hold released")
	})
}

// TestRWModes_lostModeEndsLostAtOtherRelease: an owner holds for writing with the watchdog
// (WatchdogTimeout 300ms) and for reading with a fixed 5s lease; an outage of 600ms outlasts
// the write lease, which the reaper finds gone (the record and its contexts live on with the
// read hold). The RUnlock that follows releases the read hold, and with it the owner's last
// hold in Redis: the record ends, and since it still counts the write hold, whose lease ran
// out unreleased, it ends lost: the contexts' cause is ErrLockLost, not context.Canceled (as
// if every hold had been released), and Unlock reports ErrLockLost. (The same end, for a
// fixed write lease that ran out just before the read's release, before its timer fired, was
// seen in TestChaos and TestRWModes_stressNoOverlap.)
func TestRWModes_lostModeEndsLostAtOtherRelease(t *testing.T) {
	rwKindsInParallel(t, func(t *testing.T, k lockKind) {
		e := newEnv(t)
		p := e.newProxy()
		c := e.through(p).client(rlock.Options{WatchdogTimeout: 300 * time.Millisecond})
		mw := k.rw(c, "l")
		mr := k.rw(c, "l", rlock.WithLease(5*time.Second))
		w, err := mw.Lock(bg)
		require.NoError(t, err)
		r, err := mr.RLock(rlock.WithOwner(bg, mustOwner(t, w)))
		require.NoError(t, err)
		p.Outage(600 * time.Millisecond)
		time.Sleep(700 * time.Millisecond) // past the write lease; Redis answers again
		read, write, err := mr.HoldCount(r)
		require.NoError(t, err)
		require.Equal(t, []int{1, 0}, []int{read, write}, "the write lease ran out in Redis, the read lease did not")
		require.NoError(t, mr.RUnlock(r), "the read hold is released")
		require.Error(t, w.Err(), "the owner holds nothing more")
		assert.ErrorIs(t, context.Cause(w), rlock.ErrLockLost, "the write hold was lost, not released")
		assert.ErrorIs(t, mw.Unlock(w), rlock.ErrLockLost)
		requireNothingHeld(t, e, "both holds are over")
	})
}

// TestRWModes_restartEndsMixedHolds: an owner holds an RWMutex for reading with the watchdog
// and for writing with a fixed 30s lease (which no renewal checks), plain and fair; the server
// is killed and started again without its data. The hold contexts end with ErrLockLost within
// 1s of the server answering again: the fixed mode is checked as a fixed hold is.
func TestRWModes_restartEndsMixedHolds(t *testing.T) {
	e, kill, start := crashable(t, "mixed")
	m := e.Master("mixed")
	c := e.client(rlock.Options{})
	var rws []lockKind
	for _, k := range kinds {
		if rwKinds(k) {
			rws = append(rws, k)
		}
	}
	ends := make([]chan time.Time, len(rws))
	holds := make([][]context.Context, len(rws))
	for i, k := range rws {
		name := nameOn(e, m, "mixed-"+k.family())
		w, err := k.rw(c, name, rlock.WithLease(30*time.Second)).Lock(bg)
		require.NoError(t, err)
		r, err := k.rw(c, name).RLock(rlock.WithOwner(bg, mustOwner(t, w)))
		require.NoError(t, err)
		holds[i] = []context.Context{w, r}
		ends[i] = make(chan time.Time, 1)
		go func() {
			select {
			case <-w.Done():
				ends[i] <- time.Now()
			case <-time.After(20 * time.Second):
				ends[i] <- time.Time{}
			}
		}()
	}
	time.Sleep(100 * time.Millisecond) // let the watcher connect
	kill()
	start()
	back := m.Answering(t, e.LockKey(nameOn(e, m, "mixed-rw")))
	for i, k := range rws {
		end := <-ends[i]
		require.False(t, end.IsZero(), "%s: the hold context did not end", k.family())
		for _, h := range holds[i] {
			require.ErrorIs(t, context.Cause(h), rlock.ErrLockLost)
		}
		t.Logf("%s: the hold context ended %v after the server answered again", k.family(), end.Sub(back))
		assert.LessOrEqual(t, end.Sub(back), time.Second, k.family())
	}
	e.Dep.WaitSteady(t, 20*time.Second) // (its node connections meet the restart here, not in the clean-up)
}

// TestRWModes_fixedLeaseEndCause: a fixed-lease hold context whose lease ran out, beside a
// longer lease of the owner's other mode, ends with ErrLockLost: the other mode's lease does
// not hold its mode (the cause says "still held by a later hold" only for a later hold of the
// same mode). Both ways round: a 100ms read hold beside a 2s write hold, a 100ms write hold
// beside a 2s read hold.
func TestRWModes_fixedLeaseEndCause(t *testing.T) {
	rwKindsInParallel(t, func(t *testing.T, k lockKind) {
		e := newEnv(t)
		c := e.client(rlock.Options{})
		short, long := rlock.WithLease(100*time.Millisecond), rlock.WithLease(2*time.Second)

		w, err := k.rw(c, "a", long).Lock(bg)
		require.NoError(t, err)
		r, err := k.rw(c, "a", short).RLock(rlock.WithOwner(bg, mustOwner(t, w)))
		require.NoError(t, err)
		w2, err := k.rw(c, "b", short).Lock(bg)
		require.NoError(t, err)
		r2, err := k.rw(c, "b", long).RLock(rlock.WithOwner(bg, mustOwner(t, w2)))
		require.NoError(t, err)
		time.Sleep(150 * time.Millisecond)
		expired(t, r)
		expired(t, w2)
		t.Logf("the 100ms read hold's cause: %v; the 100ms write hold's: %v", context.Cause(r), context.Cause(w2))
		assert.ErrorIs(t, context.Cause(r), rlock.ErrLockLost, "the read lease ran out")
		assert.NotErrorIs(t, context.Cause(r), context.DeadlineExceeded)
		assert.ErrorIs(t, context.Cause(w2), rlock.ErrLockLost, "the write lease ran out")
		assert.NotErrorIs(t, context.Cause(w2), context.DeadlineExceeded)
		assert.NoError(t, w.Err())
		assert.NoError(t, r2.Err())

		assert.ErrorIs(t, k.rw(c, "a").RUnlock(r), rlock.ErrLockLost)
		assert.NoError(t, k.rw(c, "a").Unlock(w))
		assert.ErrorIs(t, k.rw(c, "b").Unlock(w2), rlock.ErrLockLost)
		assert.NoError(t, k.rw(c, "b").RUnlock(r2))
		requireNothingHeld(t, e, "every hold is over")
	})
}
