package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tests of the hardening issue: each loses a request or a reply, or breaks the line, with
// faultProxy, and checks one invariant: never two holders, no hold left behind by a call that
// failed, no release counted twice, no hold context outliving its lease.

// acquireScript is the acquire script of each kind, for matchScript.
func acquireScript(kind string) string {
	if kind == "fair" {
		return "fair_acquire.lua"
	}
	return "acquire.lua"
}

// holdCount reads owner's hold count on the lock called name straight from Redis.
func (e *env) holdCount(name, owner string) int64 {
	n, err := e.do("HGET", e.lockKey(name), owner).AsInt64()
	if err != nil {
		return 0
	}
	return n
}

// Item 1: a nested Lock whose request is lost (or whose reply is lost) is replayed under its
// request id: Redis counts it exactly once, so the second-to-last Unlock does not free the
// lock under the outer hold.
func TestHardening_reentryWithLostRequestOrReply(t *testing.T) {
	for _, k := range kinds {
		for _, fault := range []string{"request", "reply"} {
			t.Run(k.name+"/"+fault, func(t *testing.T) {
				e := newEnv(t)
				p := e.newProxy()
				m := k.new(e.through(p).client(rlock.Options{}), "re")
				outer, err := m.Lock(bg)
				require.NoError(t, err)
				owner, _ := rlock.Owner(outer)

				match := matchScript(acquireScript(k.name), e.lockKey("re"))
				if fault == "request" {
					p.DropRequest(match)
				} else {
					p.DropReply(match)
				}
				inner, err := m.Lock(outer)
				require.NoError(t, err)
				require.EqualValues(t, 1, p.Fired(), "the fault fired")
				assert.EqualValues(t, 2, e.holdCount("re", owner), "Redis counts the nested hold once")

				require.NoError(t, m.Unlock(inner))
				assert.EqualValues(t, 1, e.holdCount("re", owner), "the outer hold remains")
				assert.NoError(t, outer.Err(), "the outer hold context lives on")
				require.NoError(t, m.Unlock(outer))
				assert.ErrorIs(t, context.Cause(outer), context.Canceled)
			})
		}
	}
}

// Item 2: an acquire whose reply is lost after the script took the lock, in a call that then
// gives up, gives the hold back before it returns: no lock held by nobody.
func TestHardening_noPhantomHoldAfterLostReply(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name+"/TryLock 0", func(t *testing.T) {
			e := newEnv(t)
			p := e.newProxy()
			m := k.new(e.through(p).client(rlock.Options{}), "ph")
			p.DropReply(matchScript(acquireScript(k.name), e.lockKey("ph")))
			_, err := m.TryLock(bg, 0)
			require.ErrorIs(t, err, rlock.ErrNotObtained, "the reply was lost: not obtained, and the hold it took given back")
			require.EqualValues(t, 1, p.Fired())
			assert.Empty(t, e.keys(), "the hold the lost reply took was given back")
		})
		t.Run(k.name+"/context ends after the lost reply", func(t *testing.T) {
			e := newEnv(t)
			p := e.newProxy()
			m := k.new(e.through(p).client(rlock.Options{}), "ph")
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			// cancel as the fault fires, before the client can learn of it
			p.DropReply(thenCall(matchScript(acquireScript(k.name), e.lockKey("ph")), cancel))
			_, err := m.Lock(ctx)
			require.ErrorIs(t, err, context.Canceled)
			require.EqualValues(t, 1, p.Fired())
			assert.Empty(t, e.keys(), "the hold the lost reply took was given back")
		})
	}
}

// Item 3: an Unlock whose release ran but whose reply was lost, followed by an outage longer
// than Unlock's retries, is settled when Redis is back: the hold ends as released (not lost),
// and the caller's retried Unlock returns nil.
func TestHardening_lostReleaseReplyThenOutage(t *testing.T) {
	e := newEnv(t)
	p := e.newProxy()
	m := e.through(p).client(rlock.Options{WatchdogTimeout: 6 * time.Second}).NewMutex("rel")
	h, err := m.Lock(bg)
	require.NoError(t, err)

	p.DropReplyThenOutage(matchScript("release.lua", e.lockKey("rel")), 3500*time.Millisecond)
	require.Error(t, m.Unlock(h), "every retry failed in the outage")
	assert.Empty(t, e.keys(), "the release had run")
	locked, err := m.IsLocked(rlock.WithOwner(bg, "x"))
	require.NoError(t, err)
	assert.False(t, locked, "the release had run")

	// The watchdog settles the Unlock (its next tick after the outage), not marking it lost.
	require.Error(t, causeOf(h, 6*time.Second), "the hold context ends once settled")
	assert.ErrorIs(t, context.Cause(h), context.Canceled)
	assert.NotErrorIs(t, context.Cause(h), rlock.ErrLockLost)
	require.NoError(t, m.Unlock(h), "the retried Unlock returns the settled outcome")
	assert.ErrorIs(t, m.Unlock(h), rlock.ErrNotHeld)
}

// Item 4: replay records do not collide between clients sharing an owner id: a partial release
// by another client between a lost release reply and its replay is not undone by the replay.
func TestHardening_sharedOwnerReplayDoesNotReleaseTwice(t *testing.T) {
	e := newEnv(t)
	p := e.newProxy()
	a := e.through(p).client(rlock.Options{}).NewMutex("sh")
	b := e.client(rlock.Options{}).NewMutex("sh")
	owner := rlock.WithOwner(bg, "shared-owner")
	var holds []context.Context
	for range 3 {
		h, err := a.Lock(owner)
		require.NoError(t, err)
		holds = append(holds, h)
	}
	// a's release runs, its reply is lost, and its retries wait out an outage; meanwhile b
	// releases one hold.
	p.DropReplyThenOutage(matchScript("release.lua", e.lockKey("sh")), 300*time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- a.Unlock(holds[2]) }()
	require.Eventually(t, func() bool { return p.Fired() == 1 && e.holdCount("sh", "shared-owner") == 2 },
		time.Second, 100*time.Microsecond)
	require.NoError(t, b.Unlock(owner))
	require.NoError(t, <-done, "the replay after the outage returns the recorded outcome")
	assert.EqualValues(t, 1, e.holdCount("sh", "shared-owner"), "3 holds, 2 releases: 1 left")
	require.NoError(t, holds[0].Err())
	require.NoError(t, a.Unlock(holds[1]))
	locked, err := a.IsLocked(bg)
	require.NoError(t, err)
	assert.False(t, locked)
}

// Item 5: a lease that is not a whole number of milliseconds is cut to one: the hold context's
// deadline comes before the lease Redis has, so it has passed by the time another owner can
// take the lock. (Whether the context's timer has fired by then is up to the Go scheduler; the
// deadline is what the library sets.)
func TestHardening_fractionalLeaseEndsInTime(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{})
	m := c.NewMutex("frac", rlock.WithLease(20*time.Millisecond+999*time.Microsecond))
	other := c.NewMutex("frac")
	const trials = 40
	late, live := 0, 0
	for range trials {
		h, err := m.Lock(bg)
		require.NoError(t, err)
		dl, ok := h.Deadline()
		require.True(t, ok)
		var h2 context.Context
		for h2 == nil {
			h2, err = other.TryLock(bg, 0)
			if errors.Is(err, rlock.ErrNotObtained) {
				time.Sleep(100 * time.Microsecond)
				continue
			}
			require.NoError(t, err)
		}
		got := time.Now()
		if dl.After(got) {
			late++
		}
		if h.Err() == nil {
			live++
		}
		require.NoError(t, other.Unlock(h2))
	}
	t.Logf("of %d trials: deadline after the other owner got the lock %d, context not yet done %d", trials, late, live)
	assert.Zero(t, late, "hold context deadlines later than the lease Redis had")
}

// Item 6: with renewals failing, the hold context ends by the lease end as of the last
// successful renewal, before another process can take the lock; and a failed renewal is
// retried soon, not a whole period later.
func TestHardening_lossSignalledByLeaseEnd(t *testing.T) {
	t.Run("renewals fail for good", func(t *testing.T) {
		e := newEnv(t)
		p := e.newProxy()
		m := e.through(p).client(rlock.Options{WatchdogTimeout: 900 * time.Millisecond}).NewMutex("late")
		other := e.client(rlock.Options{}).NewMutex("late")
		h, err := m.Lock(bg)
		require.NoError(t, err)
		p.Outage(5 * time.Second)
		var h2 context.Context
		for h2 == nil {
			h2, err = other.TryLock(bg, 0)
			if errors.Is(err, rlock.ErrNotObtained) {
				time.Sleep(200 * time.Microsecond)
				continue
			}
			require.NoError(t, err)
		}
		assert.Error(t, h.Err(), "the hold context ended before another owner got the lock")
		assert.ErrorIs(t, context.Cause(h), rlock.ErrLockLost)
		require.NoError(t, other.Unlock(h2))
		e.dirty = true // the proxied client's resubscription may outlive the test by a moment
	})
	t.Run("a failed renewal is retried soon", func(t *testing.T) {
		e := newEnv(t)
		p := e.newProxy()
		const lease = 3 * time.Second // renewals every 1s
		m := e.through(p).client(rlock.Options{WatchdogTimeout: lease}).NewMutex("retry")
		h, err := m.Lock(bg)
		require.NoError(t, err)
		waitRenewal(t, m)
		renewed := time.Now()
		p.Outage(1200 * time.Millisecond) // the renewal at 1s fails; the next period's is at 2s
		time.Sleep(1100 * time.Millisecond)
		waitRenewal(t, m) // its TTL reads go through the proxy, up again by now
		took := time.Since(renewed)
		t.Logf("renewed again %v after the last renewal (outage 1.2s, period 1s)", took)
		assert.Less(t, took, 1800*time.Millisecond, "retried soon after the outage, not at the next period (2s)")
		require.NoError(t, h.Err())
		require.NoError(t, m.Unlock(h))
	})
}

// waitRenewal returns just after the watchdog renewed m's lease (its TTL jumped up).
func waitRenewal(t *testing.T, m *rlock.Mutex) {
	t.Helper()
	last, err := m.TTL(bg)
	require.NoError(t, err)
	for {
		ttl, err := m.TTL(bg)
		require.NoError(t, err)
		if ttl > last {
			return
		}
		last = ttl
		time.Sleep(2 * time.Millisecond)
	}
}

// Item 7: re-entries during one hold do not grow its state: 20,000 of them through contexts
// that carry the owner but no hold cost nothing that outlives them.
func TestHardening_reentriesDoNotGrowHoldState(t *testing.T) {
	e := newEnv(t)
	m := e.client(rlock.Options{}).NewMutex("grow")
	h, err := m.Lock(bg)
	require.NoError(t, err)
	owner, _ := rlock.Owner(h)
	const n = 20000
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	// Warm up, then measure the heap before and after n re-entries whose contexts are dropped.
	for range 100 {
		_, err := m.Lock(rlock.WithOwner(bg, owner))
		require.NoError(t, err)
	}
	before := heap()
	for range n {
		_, err := m.Lock(rlock.WithOwner(bg, owner))
		require.NoError(t, err)
	}
	grown := int64(heap()) - int64(before)
	t.Logf("heap growth after %d re-entries: %d bytes (%.1f per re-entry)", n, grown, float64(grown)/n)
	assert.Less(t, grown, int64(n*16), "re-entries keep state while their contexts are dropped")
	_, err = m.ForceUnlock(bg)
	require.NoError(t, err)
}

// Item 8: bad input is rejected with ErrInvalid and changes nothing; scripts check every key
// before they write any.
func TestHardening_badInputChangesNothing(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{})

	t.Run("HoldCount(nil)", func(t *testing.T) {
		//lint:ignore SA1012 a nil context is the bad input under test
		_, err := c.NewMutex("x").HoldCount(nil) //nolint:staticcheck
		assert.ErrorIs(t, err, rlock.ErrInvalid)
	})
	t.Run("durations under a millisecond", func(t *testing.T) {
		for _, o := range []rlock.Options{{FairWaitTimeout: 500 * time.Microsecond}, {WatchdogTimeout: time.Millisecond}, {Wait: rlock.Spin(100 * time.Microsecond)}} {
			_, err := rlock.New(e.admin(), o)
			assert.ErrorIs(t, err, rlock.ErrInvalid, "%+v", o)
		}
		_, err := c.NewMutex("x", rlock.WithLease(500*time.Microsecond)).Lock(bg)
		assert.ErrorIs(t, err, rlock.ErrInvalid)
	})
	for _, k := range kinds {
		for _, fence := range []string{"not-a-number", "9223372036854775807"} {
			t.Run(k.name+"/fence "+fence, func(t *testing.T) {
				name := "fence-" + k.name + fence[:3]
				key := e.lockKey(name) + ":fence"
				require.NoError(t, e.do("SET", key, fence).Error())
				defer e.do("DEL", key)
				_, err := k.new(c, name, rlock.WithFencing()).TryLock(bg, 0)
				assert.ErrorIs(t, err, rlock.ErrInvalid)
				assert.ErrorContains(t, err, "fencing counter")
				n, err := e.do("EXISTS", e.lockKey(name)).AsInt64()
				require.NoError(t, err)
				assert.Zero(t, n, "the lock hash was not written")
			})
		}
	}
	t.Run("fair queue of the wrong type", func(t *testing.T) {
		m := c.NewFairMutex("wq")
		h, err := m.Lock(bg)
		require.NoError(t, err)
		queue := e.lockKey("wq") + ":queue"
		require.NoError(t, e.do("SET", queue, "x").Error())
		assert.ErrorIs(t, m.Unlock(h), rlock.ErrInvalid)
		n, err := m.HoldCount(h)
		require.NoError(t, err)
		assert.Equal(t, 1, n, "the lock was not deleted")
		require.NoError(t, e.do("DEL", queue).Error())
		require.NoError(t, m.Unlock(h))
	})
}

// Item 10a: a fair queue whose deadlines lost an entry (a volatile-* eviction drops a key
// whole; an edit drops a member) does not block the queue forever.
func TestHardening_fairQueueWithoutDeadlines(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		m := e.client(rlock.Options{Wait: wait}).NewFairMutex("ev")
		require.NoError(t, e.do("RPUSH", e.lockKey("ev")+":queue", "ghost").Error())
		require.NoError(t, e.do("PEXPIRE", e.lockKey("ev")+":queue", "10000").Error())
		h, err := m.TryLock(bg, 2*time.Second)
		require.NoError(t, err, "a queue head without a deadline is dead")
		require.NoError(t, m.Unlock(h))
	})
}

// Item 10b: a new owner that joins this client's waiters sleeps no longer than the holder's
// lease as the waiters last saw it (an expiry publishes nothing).
func TestHardening_joinerSleepsAtMostTheLease(t *testing.T) {
	e := newEnv(t)
	holder := e.client(rlock.Options{}).NewMutex("join", rlock.WithLease(300*time.Millisecond))
	c := e.client(rlock.Options{}) // watchdog lease 30s: the old bound of a joiner's first sleep
	first := c.NewMutex("join", rlock.WithLease(300*time.Millisecond))
	_, err := holder.Lock(bg) // never unlocked: it expires
	require.NoError(t, err)
	firstDone := make(chan error, 1)
	go func() { // the first waiter takes the lock at the lease end and keeps it until it expires
		_, err := first.Lock(bg)
		firstDone <- err
	}()
	require.Eventually(t, func() bool { return len(e.channels()) == 1 }, time.Second, time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	start := time.Now()
	h, err := c.NewMutex("join").TryLock(bg, 3*time.Second) // joins the first waiter
	require.NoError(t, err)
	// The first waiter's lease ends ~600ms after the start; without the bound the joiner
	// sleeps until its TryLock's wait runs out (3s).
	assert.Less(t, time.Since(start), 1500*time.Millisecond, "the joiner woke at the lease end")
	// Whichever of the two got the lock first, the other gets it once the joiner lets go (the
	// first waiter's own hold, if it came first, has expired by now).
	require.NoError(t, c.NewMutex("join").Unlock(h))
	select {
	case err := <-firstDone:
		require.NoError(t, err)
	case <-time.After(3 * time.Second):
		t.Fatal("the first waiter never got the lock")
	}
}

// Item 10d: concurrent Close calls all return once everything is stopped: every hold
// context is done by the time any Close returns.
func TestHardening_concurrentClose(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{})
	var holds []context.Context
	for i := range 1000 {
		h, err := c.NewMutex(fmt.Sprint("cc", i)).Lock(bg)
		require.NoError(t, err)
		holds = append(holds, h)
	}
	m := c.NewMutex("cc0")
	waiting := make(chan error, 1)
	go func() {
		_, err := m.Lock(bg)
		waiting <- err
	}()
	require.Eventually(t, func() bool { return len(e.channels()) == 1 }, time.Second, time.Millisecond)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			assert.NoError(t, c.Close())
			for _, h := range holds {
				if !assert.ErrorIs(t, context.Cause(h), rlock.ErrClosed, "a Close returned before the holds ended") {
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	assert.ErrorIs(t, <-waiting, rlock.ErrClosed)
	e.dirty = true // the locks expire with their lease
}

// Item 11: errors tell the caller what to do, and name the package once.
func TestHardening_errorMessages(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{})
	m := c.NewMutex("msg")
	h, err := m.Lock(bg)
	require.NoError(t, err)
	err = m.Unlock(bg)
	require.ErrorIs(t, err, rlock.ErrNotHeld)
	assert.Contains(t, err.Error(), "pass the context that Lock returned")
	require.NoError(t, m.Unlock(h))

	short := c.NewMutex("msg2", rlock.WithLease(20*time.Millisecond))
	h, err = short.Lock(bg)
	require.NoError(t, err)
	<-h.Done()
	errs := []error{err, context.Cause(h), short.Unlock(h), m.Unlock(bg), m.Unlock(rlock.WithOwner(bg, "nobody"))}
	_, e1 := c.NewMutex("").Lock(bg)
	_, e2 := m.TryLock(bg, -1)
	errs = append(errs, e1, e2)
	for _, err := range errs {
		if err != nil {
			assert.LessOrEqual(t, strings.Count(err.Error(), "rlock:"), 1, "%q", err.Error())
		}
	}
	assert.Equal(t, "lease ended: rlock: lock lost", context.Cause(h).Error())
}
