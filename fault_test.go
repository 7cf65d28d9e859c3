package rlock_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
)

// syncBuffer is a log sink safe for the watchdog goroutine and the test to share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startWaiters starts n goroutines that each Lock m once, hold it briefly and Unlock; the
// returned channel yields each one's error.
func startWaiters(m *rlock.Mutex, n int) <-chan error {
	done := make(chan error, n)
	for range n {
		go func() {
			h, err := m.Lock(bg)
			if err == nil {
				time.Sleep(time.Millisecond)
				err = m.Unlock(h)
			}
			done <- err
		}()
	}
	return done
}

func requireAll(t *testing.T, done <-chan error, n int, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for range n {
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-deadline:
			t.Fatalf("waiters did not all acquire within %v", within)
		}
	}
}

// TestFault_pubsubConnectionKilled kills the waiters' pub/sub connections (CLIENT KILL TYPE
// pubsub) and releases the lock at once, so the unlock message is lost: the waiters must still
// acquire, through re-subscription and the lease bound.
func TestFault_pubsubConnectionKilled(t *testing.T) {
	redistest.NeedsThrowaway(t)
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		holder := e.client(rlock.Options{WatchdogTimeout: time.Second}).NewMutex("killed")
		h, err := holder.Lock(bg)
		require.NoError(t, err)

		const n = 5
		waiting := e.client(rlock.Options{Wait: wait, WatchdogTimeout: time.Second}).NewMutex("killed")
		done := startWaiters(waiting, n)
		if wait.String() == "pubsub" {
			require.Eventually(t, func() bool { return len(e.Channels()) == 1 }, time.Second, 5*time.Millisecond)
		} else {
			time.Sleep(50 * time.Millisecond)
		}
		killed := e.KillClients("pubsub")
		if wait.String() == "pubsub" {
			assert.Positive(t, killed)
		}
		require.NoError(t, holder.Unlock(h))
		requireAll(t, done, n, 5*time.Second)
	})
}

// TestFault_scriptFlush empties the server's script cache while a lock is held and waited for.
func TestFault_scriptFlush(t *testing.T) {
	redistest.NeedsThrowaway(t)
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		m := e.client(rlock.Options{Wait: wait, WatchdogTimeout: time.Second}).NewMutex("flush")
		h, err := m.Lock(bg)
		require.NoError(t, err)
		done := startWaiters(m, 3)
		time.Sleep(50 * time.Millisecond)
		require.NoError(t, e.OnMasters("SCRIPT", "FLUSH"))
		inner, err := m.Lock(h)
		require.NoError(t, err, "re-entry after SCRIPT FLUSH")
		require.NoError(t, m.Unlock(inner))
		require.NoError(t, m.Unlock(h))
		requireAll(t, done, 3, 5*time.Second)
		time.Sleep(time.Second) // across renewals of a re-flushed cache
		require.NoError(t, e.OnMasters("SCRIPT", "FLUSH"))
		locked, err := m.IsLocked(bg)
		require.NoError(t, err)
		assert.False(t, locked)
	})
}

// TestFault_renewalErrorsAreRetried loses a renewal's request with its connection: the failure
// is logged, the watchdog renews again soon (not a period later), and the hold survives.
func TestFault_renewalErrorsAreRetried(t *testing.T) {
	e := newEnv(t)
	p := e.newProxy()
	var logs syncBuffer
	const timeout = 1500 * time.Millisecond // renewals every 500ms
	c := e.through(p).client(rlock.Options{WatchdogTimeout: timeout, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	m := c.NewMutex("renew-err")
	h, err := m.Lock(bg)
	require.NoError(t, err)

	// Wait for a renewal (the TTL jumps back up), then lose the next one's request with its
	// connection: the error is logged and the renewal tried again soon, well within the lease.
	waitRenewal(t, m)
	p.DropRequest(matchScript("renew.lua", e.LockKey("renew-err")))
	require.Eventually(t, func() bool { return p.Fired() == 1 }, timeout, time.Millisecond)
	failed := time.Now()
	waitRenewal(t, m)
	retried := time.Since(failed)
	assert.Contains(t, logs.String(), "lease renewal failed")
	assert.Less(t, retried, timeout/6, "renewed again soon after the failure, not a period (%v) later", timeout/3)
	require.NoError(t, h.Err(), "a failed renewal does not drop the hold; log:\n%s", logs.String())
	require.NoError(t, m.Unlock(h))
}

// crashable returns an env whose lock called name lives on a server that kill stops (SIGKILL)
// and start starts again without its data (see redistest.Crashable).
func crashable(t *testing.T, name string) (e *env, kill, start func()) {
	re, kill, start := redistest.Crashable(t, name)
	return &env{re}, kill, start
}

// TestFault_restartedServer restarts Redis (without persistence) under a held lock: the
// watchdog finds the owner gone and cancels the hold with ErrLockLost; locking works again.
func TestFault_restartedServer(t *testing.T) {
	e, kill, start := crashable(t, "restart")
	const timeout = 900 * time.Millisecond
	m := e.client(rlock.Options{WatchdogTimeout: timeout}).NewMutex("restart")
	h, err := m.Lock(bg)
	require.NoError(t, err)

	kill()
	start()
	require.ErrorIs(t, causeOf(h, 3*timeout), rlock.ErrLockLost)
	require.ErrorIs(t, m.Unlock(h), rlock.ErrLockLost)

	e.Dep.WaitSteady(t, 20*time.Second) // a cluster master takes writes 2s after it rejoins
	h, err = m.TryLock(bg, time.Second)
	require.NoError(t, err, "locking works after the restart (scripts reloaded)")
	require.NoError(t, m.Unlock(h))
}

// TestFault_serverGone stops Redis for good under a held lock: renewals fail, and once they
// have failed for a whole lease the hold context is cancelled with ErrLockLost (the lease can
// only have lapsed), while Lock calls fail or keep retrying rather than pretend to succeed.
// (On a cluster or Sentinel, the master comes back when the test ends, before a failover.)
func TestFault_serverGone(t *testing.T) {
	e, kill, _ := crashable(t, "gone")
	e.Dirty = true // the server is gone: nothing to check
	const timeout = 900 * time.Millisecond
	m := e.client(rlock.Options{WatchdogTimeout: timeout}).NewMutex("gone")
	h, err := m.Lock(bg)
	require.NoError(t, err)

	kill()
	start := time.Now()
	require.ErrorIs(t, causeOf(h, 3*timeout), rlock.ErrLockLost)
	assert.GreaterOrEqual(t, time.Since(start), timeout/2, "not before the lease could have lapsed")
	assert.ErrorIs(t, m.Unlock(h), rlock.ErrLockLost)

	ctx, cancel := context.WithTimeout(bg, 300*time.Millisecond)
	defer cancel()
	_, err = m.Lock(ctx)
	require.Error(t, err, "no lock without a server")
}

// A waiter whose connections are cut while it waits (its subscription too) still gets the lock
// soon after the holder lets go: the holder releases right after the cut, so the wake-up may be
// lost, and the waiter must notice by itself (re-subscription, the holder's lease as last seen,
// its own polling). And a waiter whose connections are cut and which then gives up leaves
// nothing behind: no queue entry, no waiting-writer entry, no subscription.
func TestFault_killedConnectionWhileWaiting(t *testing.T) {
	for _, strategy := range strategies {
		t.Run(strategy.name, func(t *testing.T) { killedWhileWaiting(t, strategy.name, strategy.wait) })
	}
}

// killedWhileWaiting is TestFault_killedConnectionWhileWaiting for one wait strategy.
func killedWhileWaiting(t *testing.T, strategy string, wait rlock.WaitStrategy) {
	eachKind(t, func(t *testing.T, k lockKind) {
		e := newEnv(t)
		p := e.newProxy()
		// The waiter is the subject; the holder takes the conflicting hold directly.
		subject := k.on(e.through(p).client(rlock.Options{Wait: wait}), "kw")
		direct := k.on(e.client(rlock.Options{WatchdogTimeout: time.Second}), "kw")
		waitUntilWaiting := func() {
			if strategy == "spin" {
				time.Sleep(100 * time.Millisecond)
				return
			}
			require.Eventually(t, func() bool { return len(e.Channels()) == 1 }, 2*time.Second, time.Millisecond)
			time.Sleep(20 * time.Millisecond)
		}

		t.Run("acquires after the cut", func(t *testing.T) {
			other, err := direct.conflict(0)
			require.NoError(t, err)
			got := make(chan error, 1)
			var h context.Context
			go func() {
				var err error
				h, err = subject.lock(bg)
				got <- err
			}()
			waitUntilWaiting()
			p.CutAll()
			time.Sleep(30 * time.Millisecond)
			p.CutAll()
			released := time.Now()
			require.NoError(t, direct.conflictRelease(other))
			p.CutAll()
			select {
			case err := <-got:
				require.NoError(t, err)
			case <-time.After(5 * time.Second):
				t.Fatal("the waiter did not get the lock within 5s of the release")
			}
			took := time.Since(released)
			t.Logf("acquired %v after the release", took.Round(time.Millisecond))
			assert.Less(t, took, 2*time.Second, "the waiter noticed the release (holder's lease 1s)")
			require.NoError(t, subject.release(h))
		})

		t.Run("gives up after the cut", func(t *testing.T) {
			other, err := direct.conflict(0)
			require.NoError(t, err)
			got := make(chan error, 1)
			go func() {
				_, err := subject.try(bg, 600*time.Millisecond)
				got <- err
			}()
			waitUntilWaiting()
			p.CutAll()
			time.Sleep(50 * time.Millisecond)
			p.CutAll()
			select {
			case err := <-got:
				require.ErrorIs(t, err, rlock.ErrNotObtained)
			case <-time.After(5 * time.Second):
				t.Fatal("the waiter's TryLock did not return within 5s")
			}
			require.NoError(t, direct.conflictRelease(other))
			// A waiting entry left behind would last its FairWaitTimeout (5s).
			require.Eventually(t, func() bool { return len(e.Keys()) == 0 && len(e.Channels()) == 0 },
				keptFor, 5*time.Millisecond, "left behind: keys %v, channels %v", e.Keys(), e.Channels())
		})
	})
}
