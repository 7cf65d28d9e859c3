package rlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
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
			// (the contexts of the owner's two holds end one after the other: the write hold's
			// ending woke this test, maybe before the read hold's)
			select {
			case <-h.Done():
			case <-time.After(time.Second):
			}
			require.ErrorIs(t, context.Cause(h), rlock.ErrLockLost)
		}
		t.Logf("%s: the hold context ended %v after the server answered again", k.family(), end.Sub(back))
		assert.LessOrEqual(t, end.Sub(back), time.Second, k.family())
	}
	e.Dep.WaitSteady(t, 20*time.Second) // (its node connections meet the restart here, not in the clean-up)
}

// pooledClient is client on a rueidis client without auto-pipelining: each request takes a
// connection of its own from a pool, so a request or reply that the fault proxy holds back
// holds up no other request of the client.
func (e *env) pooledClient(opts rlock.Options) *rlock.Client {
	e.T.Helper()
	o := e.Dep.ClientOption()
	if e.Proxy != nil {
		o.DialCtxFn = e.Proxy.Dial
	}
	o.DisableAutoPipelining = true
	rc, err := rueidis.NewClient(o)
	require.NoError(e.T, err)
	e.T.Cleanup(rc.Close)
	opts.KeyPrefix = e.Prefix
	c, err := rlock.New(rc, opts)
	require.NoError(e.T, err)
	e.T.Cleanup(func() { require.NoError(e.T, c.Close()) })
	return c
}

// awaitFired waits up to d for the proxy's armed faults to have fired n times in all.
func awaitFired(t *testing.T, p interface{ Fired() int64 }, n int64, d time.Duration, what string) {
	t.Helper()
	require.Eventually(t, func() bool { return p.Fired() >= n }, d, time.Millisecond, what)
}

// TestRWModes_renewalReplyAfterRetake: a renewal's reply applies to the run of holds it was
// sent for, not to a later one. An owner holds an RWMutex for writing (a fixed 800ms lease)
// and for reading (the watchdog's, WatchdogTimeout 1.5s). A renewal of the read hold runs in
// Redis and the fault proxy holds its reply back while the owner releases the read hold and
// takes one again with a fixed 100ms lease. The late reply must not give the new read hold
// the renewal's lease end: once both leases have run out in Redis and another owner holds the
// lock, the owner's hold contexts have ended (the released read hold's context lives while the
// owner holds either mode, so it shows the record's end).
func TestRWModes_renewalReplyAfterRetake(t *testing.T) {
	rwKindsInParallel(t, func(t *testing.T, k lockKind) {
		e := newEnv(t)
		p := e.newProxy()
		c := e.through(p).pooledClient(rlock.Options{WatchdogTimeout: 1500 * time.Millisecond})
		other := k.rw(e.client(rlock.Options{}), "t")
		w, err := k.rw(c, "t", rlock.WithLease(800*time.Millisecond)).Lock(bg)
		require.NoError(t, err)
		owner := rlock.WithOwner(bg, mustOwner(t, w))
		r1, err := k.rw(c, "t").RLock(owner)
		require.NoError(t, err)

		flow := p.HoldReply(matchScript("rw_renew.lua", e.LockKey("t")))
		defer flow()
		awaitFired(t, p, 1, 2*time.Second, "a renewal of the read hold")
		time.Sleep(20 * time.Millisecond) // it has run in Redis; its reply is held back
		require.NoError(t, k.rw(c, "t").RUnlock(r1))
		r2, err := k.rw(c, "t", rlock.WithLease(100*time.Millisecond)).RLock(owner)
		require.NoError(t, err)
		flow() // the renewal's reply lands on the new read hold's run

		got, err := other.TryLock(bg, 3*time.Second)
		require.NoError(t, err, "both leases of the owner run out in Redis")
		r1Err := r1.Err()
		t.Logf("another owner holds the lock; the owner's released read hold's context: %v (cause %v)",
			r1Err, context.Cause(r1))
		assert.Error(t, r1Err, "the owner holds nothing in Redis, so its hold contexts have ended")
		assert.ErrorIs(t, context.Cause(r1), rlock.ErrLockLost)
		assert.ErrorIs(t, k.rw(c, "t").RUnlock(r2), rlock.ErrLockLost)
		assert.ErrorIs(t, k.rw(c, "t").Unlock(w), rlock.ErrLockLost)
		require.NoError(t, other.Unlock(got))
		requireNothingHeld(t, e, "every hold is over")
	})
}

// TestRWModes_renewalReplyAfterRelease: a renewal that finds an owner's read hold gone in
// Redis because the owner released it does not mark the owner's next read hold lost. The owner
// holds the lock for writing (fixed 5s lease) and reading (the watchdog's, WatchdogTimeout
// 600ms); its RUnlock runs in Redis with its reply held back by the fault proxy, a renewal of
// the read hold runs after it (not held, says Redis) with its reply held back too, then the
// RUnlock returns and the owner takes a read hold again before the renewal's reply lands. The
// new read hold lives on: its RUnlock releases it in Redis.
func TestRWModes_renewalReplyAfterRelease(t *testing.T) {
	rwKindsInParallel(t, func(t *testing.T, k lockKind) {
		e := newEnv(t)
		p := e.newProxy()
		c := e.through(p).pooledClient(rlock.Options{WatchdogTimeout: 600 * time.Millisecond})
		mw, mr := k.rw(c, "u", rlock.WithLease(5*time.Second)), k.rw(c, "u")
		w, err := mw.Lock(bg)
		require.NoError(t, err)
		owner := rlock.WithOwner(bg, mustOwner(t, w))
		r1, err := mr.RLock(owner)
		require.NoError(t, err)

		flowRelease := p.HoldReply(matchScript("rw_release.lua", e.LockKey("u")))
		defer flowRelease()
		released := make(chan error, 1)
		go func() { released <- mr.RUnlock(r1) }()
		awaitFired(t, p, 1, 2*time.Second, "the RUnlock")
		time.Sleep(20 * time.Millisecond) // it has run in Redis; its reply is held back
		flowRenewal := p.HoldReply(matchScript("rw_renew.lua", e.LockKey("u")))
		defer flowRenewal()
		awaitFired(t, p, 2, 2*time.Second, "a renewal of the read hold, sent before the RUnlock returned")
		time.Sleep(20 * time.Millisecond) // it has run in Redis: the read hold is gone
		flowRelease()
		require.NoError(t, <-released)
		r2, err := mr.RLock(owner)
		require.NoError(t, err)
		flowRenewal() // the renewal's reply (not held) lands on the new read hold's run
		time.Sleep(50 * time.Millisecond)

		r2Err := r2.Err()
		runlock := mr.RUnlock(r2)
		read, write, err := mr.HoldCount(owner)
		require.NoError(t, err)
		t.Logf("after the late renewal reply: new read context %v, its RUnlock %v; Redis has %d read and %d "+
			"write holds of the owner", r2Err, runlock, read, write)
		assert.NoError(t, r2Err, "the new read hold lives")
		assert.NoError(t, runlock, "its RUnlock releases it in Redis")
		assert.Equal(t, []int{0, 1}, []int{read, write}, "the write hold is left")
		require.NoError(t, mw.Unlock(w))
		requireNothingHeld(t, e, "both holds released")
	})
}

// TestRWModes_lostWriteEndsWriteContexts: a hold context taken in write mode ends, with
// ErrLockLost, when the owner's write lease is lost, even while the owner's read holds live
// on. An owner holds for writing with the watchdog (WatchdogTimeout 300ms) and for reading with
// a fixed 5s lease, through a context of its own and through the write hold's context; an
// outage of 800ms stops the renewals, and the write lease runs out in Redis, where another
// owner's reader gets in. By then the write hold's context (and the read hold taken through
// it) has ended; the other read hold's context lives on, and both read holds are released in
// Redis once the outage is over. (The other owner polls every 5ms, so that it gets in as soon
// as Redis lets it: a lapsed lease publishes nothing.)
func TestRWModes_lostWriteEndsWriteContexts(t *testing.T) {
	rwKindsInParallel(t, func(t *testing.T, k lockKind) {
		e := newEnv(t)
		p := e.newProxy()
		c := e.through(p).client(rlock.Options{WatchdogTimeout: 300 * time.Millisecond})
		mw, mr := k.rw(c, "w"), k.rw(c, "w", rlock.WithLease(5*time.Second))
		other := k.rw(e.client(rlock.Options{Wait: rlock.Spin(5 * time.Millisecond)}), "w")
		start := time.Now()
		w, err := mw.Lock(bg)
		require.NoError(t, err)
		r, err := mr.RLock(rlock.WithOwner(bg, mustOwner(t, w)))
		require.NoError(t, err)
		rn, err := mr.RLock(w) // nested in the write hold's context
		require.NoError(t, err)
		p.Outage(800 * time.Millisecond)

		got, err := other.TryRLock(bg, 3*time.Second)
		require.NoError(t, err, "the write lease runs out in Redis")
		wErr, rErr, rnErr := w.Err(), r.Err(), rn.Err()
		t.Logf("another owner reads %v after the write hold; write context %v (cause %v), read context %v, "+
			"read context taken through the write context %v", time.Since(start).Round(time.Millisecond), wErr,
			context.Cause(w), rErr, rnErr)
		assert.Error(t, wErr, "the write context ended with the write lease")
		assert.ErrorIs(t, context.Cause(w), rlock.ErrLockLost)
		assert.NoError(t, rErr, "the read hold's own context lives on")
		assert.Error(t, rnErr, "a context nested in the write context ends with it")
		require.NoError(t, other.RUnlock(got))

		time.Sleep(time.Until(start.Add(time.Second))) // the outage is over
		assert.NoError(t, r.Err())
		assert.NoError(t, mr.RUnlock(rn), "the read hold taken through the write context is released in Redis")
		assert.NoError(t, mr.RUnlock(r), "the read hold is released in Redis")
		assert.ErrorIs(t, mw.Unlock(w), rlock.ErrLockLost)
		requireNothingHeld(t, e, "every hold is over")
	})
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

// TestRWModes_retakeLapsedModeKeepsOther: an owner holds for writing with the watchdog
// (WatchdogTimeout 1s) and for reading with a fixed 100ms lease; the read lease runs out, and
// the owner takes a read hold again. That starts a new run of read holds; the write hold and
// its context live on (no false loss), the lapsed read hold's RUnlock reports ErrLockLost, and
// the releases of the new read hold and of the write hold reach Redis: a writer of another
// owner, waiting, gets the lock then.
func TestRWModes_retakeLapsedModeKeepsOther(t *testing.T) {
	inParallel(t, func(t *testing.T, k lockKind, wait rlock.WaitStrategy) {
		e := newEnv(t)
		c := e.client(rlock.Options{Wait: wait, WatchdogTimeout: time.Second})
		mw, mr := k.rw(c, "x"), k.rw(c, "x")
		other := k.rw(e.client(rlock.Options{Wait: wait}), "x")
		w, err := mw.Lock(bg)
		require.NoError(t, err)
		owner := rlock.WithOwner(bg, mustOwner(t, w))
		r1, err := k.rw(c, "x", rlock.WithLease(100*time.Millisecond)).RLock(owner)
		require.NoError(t, err)
		time.Sleep(150 * time.Millisecond)
		expired(t, r1)
		time.Sleep(rlock.ReapGrace) // the reaper has seen the read lease gone
		r2, err := mr.RLock(owner)
		require.NoError(t, err)
		wErr := w.Err()
		t.Logf("after the lapsed read hold was taken again: write context %v (cause %v), new read context %v",
			wErr, context.Cause(w), r2.Err())
		assert.NoError(t, wErr, "the write hold lives on")
		assert.NoError(t, r2.Err())
		assert.ErrorIs(t, mr.RUnlock(r1), rlock.ErrLockLost, "the lapsed read hold")

		waiter := goAcquire(func() (context.Context, error) { return other.TryLock(bg, 3*time.Second) })
		requireNone(t, 50*time.Millisecond, "the other writer waits", waiter)
		assert.NoError(t, mr.RUnlock(r2), "the new read hold is released in Redis")
		assert.NoError(t, w.Err())
		assert.NoError(t, mw.Unlock(w), "the write hold is released in Redis")
		released := time.Now()
		got := awaitResult(t, waiter, 3*time.Second, "the other writer")
		require.NoError(t, got.err)
		assert.Less(t, got.at.Sub(released), time.Second, "the waiting writer got the lock at the release")
		require.NoError(t, other.Unlock(got.h))
	})
}

// TestRWModes_renewalAfterDowngrade: a renewal that reaches Redis after the owner released its
// write hold (a downgrade) finds the write hold gone; that is the release, not a loss. The
// owner holds for writing with the watchdog (WatchdogTimeout 1.5s: the Unlock has a second
// before the write lease would lapse) and for reading through the write hold's context; the
// fault proxy holds a renewal of both back while the Unlock runs. The write context (the owner
// is a reader) and the read context nested in it live on.
func TestRWModes_renewalAfterDowngrade(t *testing.T) {
	rwKindsInParallel(t, func(t *testing.T, k lockKind) {
		e := newEnv(t)
		p := e.newProxy()
		c := e.through(p).pooledClient(rlock.Options{WatchdogTimeout: 1500 * time.Millisecond})
		m := k.rw(c, "d")
		w, err := m.Lock(bg)
		require.NoError(t, err)
		r, err := m.RLock(w) // nested in the write hold's context
		require.NoError(t, err)

		flow := p.HoldRequest(matchScript("rw_renew.lua", e.LockKey("d")))
		defer flow()
		awaitFired(t, p, 1, 2*time.Second, "a renewal of both holds")
		require.NoError(t, m.Unlock(w), "the downgrade")
		flow() // the renewal runs in Redis after the Unlock: the write hold is not held
		time.Sleep(50 * time.Millisecond)

		wErr, rErr := w.Err(), r.Err()
		t.Logf("after the late renewal: write context %v (cause %v), read context %v", wErr, context.Cause(w), rErr)
		assert.NoError(t, wErr, "the owner is a reader: the write context lives on")
		assert.NoError(t, rErr, "the read hold lives on")
		assert.NoError(t, m.RUnlock(r), "the read hold is released in Redis")
		requireNothingHeld(t, e, "every hold is over")
	})
}
