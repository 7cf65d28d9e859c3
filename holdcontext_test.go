package rlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A lease that is not a whole number of milliseconds is cut to one: the hold context's
// deadline comes before the lease Redis has, so it has passed by the time another owner can
// take the lock. (Whether the context's timer has fired by then is up to the Go scheduler; the
// deadline is what the library sets.) Every kind and mode.
func TestHoldContext_fractionalLeaseEndsInTime(t *testing.T) {
	eachKind(t, func(t *testing.T, k lockKind) {
		e := newEnv(t)
		c := e.client(rlock.Options{})
		subject, other := k.on(c, "frac", rlock.WithLease(fractionalLease)), k.on(c, "frac")
		endsByLease(t, 40, func() (context.Context, error) { return subject.lock(bg) },
			func() (context.Context, error) { return other.conflict(0) }, other.conflictRelease)
	})
}

// fractionalLease is not a whole number of milliseconds.
const fractionalLease = 20*time.Millisecond + 999*time.Microsecond

// endsByLease takes a hold with lock, trials times, and lets it lapse: another owner polls with
// otherTry until it gets the lock, then gives it back with otherRelease. It asserts that the
// hold context's deadline had passed each time the other owner got the lock.
func endsByLease(t *testing.T, trials int, lock, otherTry func() (context.Context, error),
	otherRelease func(context.Context) error) {
	t.Helper()
	late, live := 0, 0
	for range trials {
		h, err := lock()
		require.NoError(t, err)
		dl, ok := h.Deadline()
		require.True(t, ok)
		var h2 context.Context
		for h2 == nil {
			h2, err = otherTry()
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
		require.NoError(t, otherRelease(h2))
	}
	t.Logf("of %d trials: deadline after the other owner got the lock %d, context not yet done %d", trials, late, live)
	assert.Zero(t, late, "hold context deadlines later than the lease Redis had")
}
