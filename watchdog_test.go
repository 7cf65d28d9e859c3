package rlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
)

// With renewals failing, the hold context ends by the lease end as of the last
// successful renewal, before another process can take the lock (every kind and mode); and a
// failed renewal is retried soon, not a whole period later.
func TestWatchdog_lossSignalledByLeaseEnd(t *testing.T) {
	t.Run("renewals fail for good", func(t *testing.T) {
		eachKind(t, func(t *testing.T, k lockKind) {
			e := newEnv(t)
			p := e.newProxy()
			subject := k.on(e.through(p).client(rlock.Options{WatchdogTimeout: 900 * time.Millisecond}), "late")
			other := k.on(e.client(rlock.Options{}), "late")
			h, err := subject.lock(bg)
			require.NoError(t, err)
			p.Outage(5 * time.Second)
			var h2 context.Context
			for h2 == nil {
				h2, err = other.conflict(0)
				if errors.Is(err, rlock.ErrNotObtained) {
					time.Sleep(200 * time.Microsecond)
					continue
				}
				require.NoError(t, err)
			}
			assert.Error(t, h.Err(), "the hold context ended before another owner got the lock")
			assert.ErrorIs(t, context.Cause(h), rlock.ErrLockLost)
			require.NoError(t, other.conflictRelease(h2))
			e.Dirty = true // the proxied client's state may outlive the test by a moment
		})
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

// TestWatchdog_renewsAfterScriptFlush: the watchdog's pipelined renewals (EVALSHA) find the scripts
// gone after SCRIPT FLUSH (a restarted server) and load them again, for every kind: no hold is
// lost although several leases pass.
func TestWatchdog_renewsAfterScriptFlush(t *testing.T) {
	redistest.NeedsThrowaway(t)
	e := newEnv(t)
	c := e.client(rlock.Options{WatchdogTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	m, err := c.NewMutex("m").Lock(ctx)
	require.NoError(t, err)
	r, err := c.NewRWMutex("rw").RLock(ctx)
	require.NoError(t, err)
	s, err := c.NewSemaphore("s", 2).Acquire(ctx, 1)
	require.NoError(t, err)
	for i := 0; i < 4; i++ {
		require.NoError(t, e.OnMasters("SCRIPT", "FLUSH"))
		time.Sleep(250 * time.Millisecond) // most of a lease: renewals run in between
	}
	for name, held := range map[string]context.Context{"mutex": m, "read": r, "semaphore": s} {
		require.NoError(t, held.Err(), "%s hold lost after SCRIPT FLUSH", name)
	}
	require.NoError(t, c.NewMutex("m").Unlock(m))
	require.NoError(t, c.NewRWMutex("rw").RUnlock(r))
	require.NoError(t, c.NewSemaphore("s", 2).Release(s))
}

// TestWatchdog_stalledNodeHoldsUpNoRenewal: on a cluster, a client holds a watchdog lock on one
// master (a 1.5s lease) and has an acquire whose reply was lost (and whose resolution failed in
// an outage) left on the lane of a lock on another master, which stalls (DEBUG SLEEP 2.5s) just
// as the outage ends and the watchdog settles that acquire. The stalled node must not hold up
// the renewals of the healthy master's hold: its context lives, and Redis keeps it.
func TestWatchdog_stalledNodeHoldsUpNoRenewal(t *testing.T) {
	redistest.NeedsThrowaway(t)
	if redistest.Suite().Topology != "cluster" {
		t.Skip("needs two masters: a cluster")
	}
	e := newEnv(t)
	healthy, stalled := e.Dep.Masters[0], e.Dep.Masters[1]
	a, b := nameOn(e, healthy, "healthy"), nameOn(e, stalled, "stalled")
	p := e.newProxy(stalled.Addr)
	c := e.through(p).client(rlock.Options{WatchdogTimeout: 1500 * time.Millisecond})
	ha, err := c.NewMutex(a).Lock(bg)
	require.NoError(t, err)

	p.DropReplyThenOutage(matchScript("acquire.lua", e.LockKey(b)), outage)
	start := time.Now()
	_, err = c.NewMutex(b).TryLock(bg, 0)
	require.ErrorIs(t, err, rlock.ErrNotObtained, "the reply was lost, and its resolution failed in the outage")
	time.Sleep(time.Until(start.Add(outage - 300*time.Millisecond)))
	const stall = 2500 * time.Millisecond
	stallEnd := time.Now().Add(stall)
	slept := make(chan error, 1)
	go func() {
		slept <- stalled.RC.Do(bg, stalled.RC.B().Arbitrary("DEBUG", "SLEEP").Args("2.5").Build()).Error()
	}()
	var lostAt time.Duration
	for time.Now().Before(stallEnd.Add(500 * time.Millisecond)) {
		if ha.Err() != nil {
			lostAt = time.Since(start)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	require.NoError(t, <-slept)
	_, err = e.client(rlock.Options{}).NewMutex(a).TryLock(bg, 0)
	t.Logf("the healthy master's hold: context %v (ended %v after the lost reply), another owner's TryLock: %v",
		context.Cause(ha), lostAt.Round(time.Millisecond), err)
	assert.NoError(t, ha.Err(), "the hold on the healthy master was renewed throughout")
	assert.ErrorIs(t, err, rlock.ErrNotObtained, "Redis kept the hold on the healthy master")
	require.NoError(t, c.NewMutex(a).Unlock(ha))
	// The acquire is resolved, and its hold given back, once the node answers again.
	require.Eventually(t, func() bool { return len(e.Keys()) == 0 }, 5*time.Second, 20*time.Millisecond)
}

// TestWatchdog_lateRenewalAfterRetake: a renewal whose request is slow on its way (held back by
// the fault proxy) reaches Redis after the hold it was sent for ended here (the reaper, at its
// local end; Redis' lease ran out too) and after the owner took the lock again: the renewal
// extends the new hold. Its reply must not give that hold back as the ended one's, which would
// release the new hold in Redis while its context lives, so that another owner gets the lock
// beside it. A second watchdog hold of the client (another lock, taken later) keeps the renewal
// waited for past the first hold's end. WatchdogTimeout 1.5s, every kind an owner re-enters.
func TestWatchdog_lateRenewalAfterRetake(t *testing.T) {
	each(t, exclusiveKinds, func(t *testing.T, k lockKind) {
		t.Parallel()
		e := newEnv(t)
		p := e.newProxy()
		const lease = 1500 * time.Millisecond
		c := e.through(p).pooledClient(rlock.Options{WatchdogTimeout: lease})
		renewal := matchScript("renew.lua", e.LockKey("a"))
		if k.rw != nil {
			renewal = matchScript("rw_renew.lua", e.LockKey("a"))
		}
		a, b := k.on(c, "a"), k.on(c, "b")
		other := k.on(e.client(rlock.Options{}), "a")

		h, err := a.lock(bg)
		require.NoError(t, err)
		owner := rlock.WithOwner(bg, mustOwner(t, h))
		renewed := make(chan time.Time, 1) // a renewal of h passes the proxy (the fault never fires)
		p.DropRequest(func(cmd []string) bool {
			if renewal(cmd) {
				select {
				case renewed <- time.Now():
				default:
				}
			}
			return false
		})
		var t1 time.Time
		select {
		case t1 = <-renewed:
		case <-time.After(2 * lease):
			t.Fatal("no renewal of the hold")
		}
		time.Sleep(time.Until(t1.Add(lease / 6)))
		hb, err := b.lock(bg) // its lease ends after h's: the next renewal waits for both
		require.NoError(t, err)
		flow := p.HoldRequest(renewal)
		defer flow()
		awaitFired(t, p, 1, lease, "the next renewal of both holds")

		select {
		case <-h.Done():
		case <-time.After(lease):
			t.Fatal("the hold did not end at its local lease end")
		}
		require.ErrorIs(t, context.Cause(h), rlock.ErrLockLost)
		time.Sleep(30 * time.Millisecond) // Redis' lease has run out too
		h2, err := a.lock(owner)
		require.NoError(t, err, "the owner takes the lock again")
		flow() // the renewal extends the new hold; its reply is for the ended one
		took := time.Since(t1)

		violations := 0
		for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			h3, err := other.conflict(0)
			if err == nil {
				if h2.Err() == nil {
					violations++
				}
				require.NoError(t, other.conflictRelease(h3))
				continue
			}
			require.ErrorIs(t, err, rlock.ErrNotObtained)
		}
		t.Logf("the late renewal reached Redis %v after the one before; the new hold's context then: %v; "+
			"another owner got the lock %d times while it was live", took.Round(time.Millisecond), context.Cause(h2),
			violations)
		assert.Zero(t, violations, "two holders")
		assert.NoError(t, h2.Err(), "the new hold lives on")
		assert.NoError(t, a.release(h2))
		require.NoError(t, b.release(hb))
		assert.ErrorIs(t, a.release(h), rlock.ErrLockLost)
	})
}

// TestWatchdog_stalledNodeDelaysNoRenewal: on a cluster, a client holds a watchdog lock (a 1.5s
// lease, renewed every 500ms) on each of two masters, and one master stalls (DEBUG SLEEP 2.5s).
// The renewals of the other master's hold must not wait for the stalled one: its context lives
// throughout, and Redis keeps it. (With one pipeline for every node, the healthy node's replies
// were applied only once the stalled node's came or the pass gave up, after its local end.)
func TestWatchdog_stalledNodeDelaysNoRenewal(t *testing.T) {
	redistest.NeedsThrowaway(t)
	if redistest.Suite().Topology != "cluster" {
		t.Skip("needs two masters: a cluster")
	}
	e := newEnv(t)
	healthy, stalled := e.Dep.Masters[0], e.Dep.Masters[1]
	a, b := nameOn(e, healthy, "healthy"), nameOn(e, stalled, "stalled")
	c := e.client(rlock.Options{WatchdogTimeout: 1500 * time.Millisecond})
	ha, err := c.NewMutex(a).Lock(bg)
	require.NoError(t, err)
	hb, err := c.NewMutex(b).Lock(bg)
	require.NoError(t, err)

	const stall = 2500 * time.Millisecond
	stallEnd := time.Now().Add(stall)
	slept := make(chan error, 1)
	go func() {
		slept <- stalled.RC.Do(bg, stalled.RC.B().Arbitrary("DEBUG", "SLEEP").Args("2.5").Build()).Error()
	}()
	var lostAt time.Duration
	start := time.Now()
	for time.Now().Before(stallEnd.Add(300 * time.Millisecond)) {
		if ha.Err() != nil {
			lostAt = time.Since(start)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	require.NoError(t, <-slept)
	_, err = e.client(rlock.Options{}).NewMutex(a).TryLock(bg, 0)
	t.Logf("the healthy master's hold: context %v (ended %v into the stall); the stalled one's: %v",
		context.Cause(ha), lostAt.Round(time.Millisecond), context.Cause(hb))
	assert.NoError(t, ha.Err(), "the hold on the healthy master was renewed throughout")
	assert.ErrorIs(t, err, rlock.ErrNotObtained, "Redis kept the hold on the healthy master")
	require.NoError(t, c.NewMutex(a).Unlock(ha))
	_ = c.NewMutex(b).Unlock(hb) // lost in the stall, or not
	e.Dirty = true               // the stalled master's hold may outlive the test by its lease
}
