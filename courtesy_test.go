package rlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
)

// The courtesy window holds back the releasing client's new Lock calls, not its waiters that
// had already tried and that the release woke. The window is opened by hand
// here, 2s wide, so the measurement cannot be mistaken.
func TestCourtesy_sparesWaitersThatTried(t *testing.T) {
	e := newEnv(t)
	holder, waiter := e.client(rlock.Options{}).NewMutex("c"), e.client(rlock.Options{}).NewMutex("c")
	h, err := holder.Lock(context.Background())
	require.NoError(t, err)
	got := make(chan time.Time, 1)
	go func() {
		w, err := waiter.Lock(context.Background())
		got <- time.Now()
		if assert.NoError(t, err) {
			assert.NoError(t, waiter.Unlock(w))
		}
	}()
	require.Eventually(t, func() bool { return rlock.LocalWaiters(waiter) == 1 }, time.Second, time.Millisecond)
	time.Sleep(5 * time.Millisecond) // the waiter has tried and sleeps

	// a window far longer than any handoff, so timing cannot blur it
	openWindow := func() { rlock.OpenCourtesy(waiter, 2*time.Second) }
	openWindow()
	start := time.Now()
	require.NoError(t, holder.Unlock(h))
	d := (<-got).Sub(start)
	assert.Less(t, d, time.Second, "the woken waiter did not sit out its client's window")

	// A new Lock call of that client does sit it out.
	openWindow()
	start = time.Now()
	w, err := waiter.Lock(context.Background())
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), 1900*time.Millisecond, "a new call keeps the window")
	require.NoError(t, waiter.Unlock(w))
}
