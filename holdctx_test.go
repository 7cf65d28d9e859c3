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
// deadline is what the library sets.)
func TestHoldContext_fractionalLeaseEndsInTime(t *testing.T) {
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
