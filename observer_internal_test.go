package rlock

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// muChecker is an Observer that checks, in every method, that the mutexes of the Client's
// shards are free: it must be able to take each. A caller that held one would never let go, so
// a check that fails for a whole second means a method was called with it held (other
// goroutines hold them for microseconds).
type muChecker struct {
	c     *Client
	mu    sync.Mutex
	calls map[string]int
	held  []string // methods called while a shard's mutex was held
}

func (o *muChecker) check(what string) {
	free := true
	deadline := time.Now().Add(time.Second)
	for i := range o.c.shards.s {
		mu := &o.c.shards.s[i].mu
		for !mu.TryLock() {
			if time.Now().After(deadline) {
				free = false
				break
			}
			time.Sleep(time.Millisecond)
		}
		if !free {
			break
		}
		mu.Unlock()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls[what]++
	if !free {
		o.held = append(o.held, what)
	}
}

func (o *muChecker) Start(ctx context.Context, op Op, _ LockInfo) context.Context {
	o.check("start " + op.String())
	return ctx
}

func (o *muChecker) End(_ context.Context, op Op, _ LockInfo, outcome Outcome, _ time.Duration, _ error) {
	o.check("end " + op.String() + " " + outcome.String())
}

func (o *muChecker) Event(ev Event) {
	what := "event " + ev.Type.String()
	if ev.Type == EventHoldEnded {
		what += " " + ev.Outcome.String()
	}
	o.check(what)
}

// TestObserver_notUnderClientMutex runs every path that reports to the observer (calls, hold
// starts and ends by Unlock, ForceUnlock, the watchdog, the reaper and Close, handoffs) and
// checks that none calls it with a shard's mutex held.
func TestObserver_notUnderClientMutex(t *testing.T) {
	prefix := "rlobsmu" + NewOwnerID()[:8]
	obs := &muChecker{calls: map[string]int{}}
	c, err := New(testRueidis(t), Options{KeyPrefix: prefix, Observer: obs, WatchdogTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	obs.c = c
	other, err := New(testRueidis(t), Options{KeyPrefix: prefix})
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })
	bg := context.Background()

	m := c.NewMutex("a")
	h, err := m.Lock(bg)
	require.NoError(t, err)
	inner, err := m.Lock(h)
	require.NoError(t, err)
	require.NoError(t, m.Unlock(inner))
	require.NoError(t, m.Unlock(h))
	require.ErrorIs(t, m.Unlock(h), ErrNotHeld)

	// A handoff from another client.
	oh, err := other.NewMutex("a").Lock(bg)
	require.NoError(t, err)
	time.AfterFunc(30*time.Millisecond, func() { _ = other.NewMutex("a").Unlock(oh) })
	h, err = m.Lock(bg)
	require.NoError(t, err)
	// Lost through ForceUnlock here (loseHolds).
	_, err = m.ForceUnlock(bg)
	require.NoError(t, err)
	require.ErrorIs(t, m.Unlock(h), ErrLockLost)
	// Lost through the watchdog (renewal finds the owner gone).
	h, err = m.Lock(bg)
	require.NoError(t, err)
	_, err = other.NewMutex("a").ForceUnlock(bg)
	require.NoError(t, err)
	select {
	case <-h.Done():
	case <-time.After(3 * time.Second):
		t.Fatal("the watchdog did not find the loss")
	}
	// Lost through the reaper (a fixed lease ran out).
	l := c.NewMutex("b", WithLease(20*time.Millisecond))
	lh, err := l.Lock(bg)
	require.NoError(t, err)
	<-lh.Done()
	time.Sleep(reapGrace)
	// Ended by Close, with a waiter.
	_, err = c.NewFairMutex("c").Lock(bg)
	require.NoError(t, err)
	waited := make(chan error, 1)
	go func() {
		_, err := c.NewFairMutex("c").Lock(bg)
		waited <- err
	}()
	time.Sleep(30 * time.Millisecond)
	require.NoError(t, c.Close())
	require.ErrorIs(t, <-waited, ErrClosed)

	obs.mu.Lock()
	defer obs.mu.Unlock()
	assert.Empty(t, obs.held)
	for _, what := range []string{
		"start lock", "end lock acquired", "end lock closed", "start unlock", "end unlock released",
		"end unlock not_held", "end unlock lost", "event hold_started", "event hold_ended released",
		"event hold_ended lost", "event hold_ended closed", "event handoff",
	} {
		assert.Positive(t, obs.calls[what], what)
	}
	assert.Equal(t, 3, obs.calls["event hold_ended lost"], "ForceUnlock, watchdog, reaper")
	// The hold left by Close expires by itself; delete it now.
	_, _ = other.NewFairMutex("c").ForceUnlock(bg)
}
