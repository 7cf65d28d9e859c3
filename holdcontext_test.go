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

// TestHoldContext_shortLeaseEndsByRedis: a read-write mutex's and a semaphore's leases are kept in whole
// server milliseconds (the millisecond the script ran in, plus the lease), and a hold lapses
// once the server's clock reaches that end: up to 1ms before the lease has passed since the
// request arrived. A hold context must end no later even for a lease under 10ms (or a claim
// found with that little left), where a tenth of the lease is less than that millisecond:
// each of 100 holds with WithLease(5ms) per mode has a deadline no later than its lease end in
// Redis (the leases' sorted set, or for a lone hold the hash's expiry). (Before the fix the margin was at most a tenth of the lease: about 40% of them ended
// up to 0.5ms after it.)
func TestHoldContext_shortLeaseEndsByRedis(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{})
	rw := c.NewRWMutex("rw", rlock.WithLease(5*time.Millisecond))
	sem := c.NewSemaphore("sem", 1, rlock.WithLease(5*time.Millisecond))
	type target struct {
		name, base, leases string
		lock               func() (context.Context, error)
		unlock             func(context.Context) error
	}
	acquire := func(ctx context.Context) (context.Context, error) { return sem.Acquire(ctx, 1) }
	for _, k := range []target{
		{"write", e.kindBase("rw"), e.kindBase("rw") + ":leases", func() (context.Context, error) { return rw.Lock(bg) }, rw.Unlock},
		{"read", e.kindBase("rw"), e.kindBase("rw") + ":leases", func() (context.Context, error) { return rw.RLock(bg) }, rw.RUnlock},
		{"semaphore", e.kindBase("sem"), e.kindBase("sem") + ":leases", func() (context.Context, error) { return acquire(bg) }, sem.Release},
	} {
		late, read := 0, 0
		var worst time.Duration
		for range 100 {
			h, err := k.lock()
			require.NoError(t, err)
			dl, ok := h.Deadline()
			require.True(t, ok, "a fixed lease's hold context has a deadline")
			ends, err := e.Do("ZRANGE", k.leases, "0", "-1", "WITHSCORES").AsZScores()
			require.NoError(t, err)
			var endMs int64
			if len(ends) == 1 {
				endMs = int64(ends[0].Score)
			} else if len(ends) == 0 {
				// A lone hold keeps its lease in the hash's expiry (see wire.FieldLone).
				endMs, err = e.Do("PEXPIRETIME", k.base).AsInt64()
				require.NoError(t, err)
			}
			if endMs > 0 { // (else the lease lapsed and was dropped already: a slow machine)
				read++
				end := endMs * int64(time.Millisecond)
				if over := time.Duration(dl.UnixNano() - end); over > 0 {
					late++
					worst = max(worst, over)
				}
			}
			if err := k.unlock(h); err != nil {
				require.ErrorIs(t, err, rlock.ErrLockLost)
			}
		}
		t.Logf("%s: %d of %d hold contexts with a deadline after their lease end in Redis, by up to %v",
			k.name, late, read, worst)
		require.Positive(t, read, "%s: no lease read before it lapsed", k.name)
		assert.Zero(t, late, "%s: hold contexts that outlive their lease in Redis", k.name)
	}
}
