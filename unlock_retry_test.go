package rlock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
)

// A release whose reply is lost and whose retries fail in an outage is settled later (by the
// owner's next request or the watchdog); its outcome goes to its own retry only: a release of
// the same access, through the same hold context or, given none, by the same owner. Another
// release, or another call on the lane, never takes it or makes it forgotten.

// outage is longer than a release's bound (1s: see bound.go).
const outage = 3500 * time.Millisecond

// TestUnlockRetry_outcomeStaysWithItsAccess: an owner holds an RWMutex for writing (context w)
// and reading through w. Its release in one mode loses its reply and fails in an outage; a
// later release in the other mode through w releases that mode in Redis (it does not take the
// first one's outcome), and the first release's retry returns its own outcome.
func TestUnlockRetry_outcomeStaysWithItsAccess(t *testing.T) {
	eachRWKind(t, func(t *testing.T, k lockKind) {
		t.Parallel()
		for _, first := range []string{"Unlock", "RUnlock"} {
			t.Run(first+" first", func(t *testing.T) {
				t.Parallel() // each waits out an outage
				e := newEnv(t)
				p := e.newProxy()
				m := k.rw(e.through(p).client(rlock.Options{WatchdogTimeout: 6 * time.Second}), "acc")
				w, err := m.Lock(bg)
				require.NoError(t, err)
				_, err = m.RLock(w)
				require.NoError(t, err)
				lost, other := m.Unlock, m.RUnlock
				if first == "RUnlock" {
					lost, other = m.RUnlock, m.Unlock
				}

				p.DropReplyThenOutage(matchScript("rw_release.lua", e.LockKey("acc")), outage)
				start := time.Now()
				require.Error(t, lost(w), "every retry failed in the outage")
				time.Sleep(time.Until(start.Add(outage + 100*time.Millisecond)))
				err = other(w)
				keys := e.Keys()
				t.Logf("%s after the lost %s: %v; keys left in Redis: %v", map[bool]string{true: "RUnlock",
					false: "Unlock"}[first == "Unlock"], first, err, keys)
				require.NoError(t, err)
				assert.Empty(t, keys, "both modes released in Redis")
				assert.ErrorIs(t, causeOf(w, time.Second), context.Canceled, "the owner holds nothing")
				require.NoError(t, lost(w), "the retry returns the lost release's settled outcome")
				assert.ErrorIs(t, lost(w), rlock.ErrNotHeld)
				assert.ErrorIs(t, other(w), rlock.ErrNotHeld)
			})
		}
	})
}

// TestUnlockRetry_ownerRetryReleasesOnce: a WithOwner context holds a Mutex twice; an Unlock
// given that context loses its reply in an outage. Once it is settled, by the watchdog or by
// another call of the owner on the lane (a re-entry), the caller's retried Unlock returns its
// outcome: the second hold is still held, its context live.
func TestUnlockRetry_ownerRetryReleasesOnce(t *testing.T) {
	each(t, mutexKinds, func(t *testing.T, k lockKind) {
		t.Parallel()
		for _, by := range []string{"watchdog", "re-entry"} {
			t.Run("settled by "+by, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t)
				p := e.newProxy()
				// A lease that outlasts the outage: the holds are renewed after it.
				m := k.mutex(e.through(p).client(rlock.Options{WatchdogTimeout: 12 * time.Second}), "own")
				ctx := rlock.WithOwner(bg, "retrying-owner")
				h1, err := m.Lock(ctx)
				require.NoError(t, err)
				h2, err := m.Lock(ctx)
				require.NoError(t, err)

				match := matchScript(k.releaseScript, e.LockKey("own"))
				p.DropReplyThenOutage(match, outage)
				start := time.Now()
				require.Error(t, m.Unlock(ctx), "every retry failed in the outage")
				// Arm a fault that never fires to see the settling replay go by.
				var replays atomic.Int64
				p.DropRequest(func(cmd []string) bool {
					if match(cmd) {
						replays.Add(1)
					}
					return false
				})
				if by == "watchdog" {
					require.Eventually(t, func() bool { return replays.Load() > 0 }, 10*time.Second,
						5*time.Millisecond, "the watchdog replays the release")
					time.Sleep(100 * time.Millisecond) // it applies the outcome
				} else {
					time.Sleep(time.Until(start.Add(outage + 200*time.Millisecond))) // the outage is over
					h3, err := m.Lock(ctx)                                           // settles the Unlock first
					require.NoError(t, err)
					require.EqualValues(t, 1, replays.Load(), "the re-entry settled the release")
					require.NoError(t, m.Unlock(h3))
				}
				p.Disarm()

				err = m.Unlock(ctx)
				n, cerr := m.HoldCount(ctx)
				require.NoError(t, cerr)
				t.Logf("the retried Unlock: %v; hold count after it %d; second hold's context: %v", err, n,
					context.Cause(h2))
				require.NoError(t, err, "the retry returns the settled outcome")
				assert.Equal(t, 1, n, "2 holds, 1 release (retried): 1 left")
				assert.NoError(t, h2.Err(), "the second hold's context lives")
				assert.NoError(t, h1.Err())
				require.NoError(t, m.Unlock(ctx))
				assert.ErrorIs(t, causeOf(h2, time.Second), context.Canceled)
			})
		}
	})
}
