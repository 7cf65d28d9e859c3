package rlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
)

// acquireScript is the acquire script of each kind, for matchScript.
func acquireScript(kind string) string {
	if kind == "fair" {
		return "fair_acquire.lua"
	}
	return "acquire.lua"
}

// holdCount reads owner's hold count on the lock called name straight from Redis.
func (e *env) holdCount(name, owner string) int64 {
	n, err := e.Do("HGET", e.LockKey(name), owner).AsInt64()
	if err != nil {
		return 0
	}
	return n
}

// A nested Lock whose request is lost (or whose reply is lost) is replayed under its
// request id: Redis counts it exactly once, so the second-to-last Unlock does not free the
// lock under the outer hold.
func TestReplay_reentryWithLostRequestOrReply(t *testing.T) {
	for _, k := range kinds {
		for _, fault := range []string{"request", "reply"} {
			t.Run(k.name+"/"+fault, func(t *testing.T) {
				e := newEnv(t)
				p := e.newProxy()
				m := k.new(e.through(p).client(rlock.Options{}), "re")
				outer, err := m.Lock(bg)
				require.NoError(t, err)
				owner, _ := rlock.Owner(outer)

				match := matchScript(acquireScript(k.name), e.LockKey("re"))
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

// An acquire whose reply is lost after the script took the lock, in a call that then
// gives up, gives the hold back before it returns: no lock held by nobody.
func TestReplay_noPhantomHoldAfterLostReply(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name+"/TryLock 0", func(t *testing.T) {
			e := newEnv(t)
			p := e.newProxy()
			m := k.new(e.through(p).client(rlock.Options{}), "ph")
			p.DropReply(matchScript(acquireScript(k.name), e.LockKey("ph")))
			_, err := m.TryLock(bg, 0)
			require.ErrorIs(t, err, rlock.ErrNotObtained, "the reply was lost: not obtained, and the hold it took given back")
			require.EqualValues(t, 1, p.Fired())
			assert.Empty(t, e.Keys(), "the hold the lost reply took was given back")
		})
		t.Run(k.name+"/context ends after the lost reply", func(t *testing.T) {
			e := newEnv(t)
			p := e.newProxy()
			m := k.new(e.through(p).client(rlock.Options{}), "ph")
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			// cancel as the fault fires, before the client can learn of it
			p.DropReply(redistest.ThenCall(matchScript(acquireScript(k.name), e.LockKey("ph")), cancel))
			_, err := m.Lock(ctx)
			require.ErrorIs(t, err, context.Canceled)
			require.EqualValues(t, 1, p.Fired())
			assert.Empty(t, e.Keys(), "the hold the lost reply took was given back")
		})
	}
}

// An Unlock whose release ran but whose reply was lost, followed by an outage longer
// than Unlock's retries, is settled when Redis is back: the hold ends as released (not lost),
// and the caller's retried Unlock returns nil.
func TestReplay_lostReleaseReplyThenOutage(t *testing.T) {
	e := newEnv(t)
	p := e.newProxy()
	m := e.through(p).client(rlock.Options{WatchdogTimeout: 6 * time.Second}).NewMutex("rel")
	h, err := m.Lock(bg)
	require.NoError(t, err)

	p.DropReplyThenOutage(matchScript("release.lua", e.LockKey("rel")), 3500*time.Millisecond)
	require.Error(t, m.Unlock(h), "every retry failed in the outage")
	assert.Empty(t, e.Keys(), "the release had run")
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

// Replay records do not collide between clients sharing an owner id: a partial release
// by another client between a lost release reply and its replay is not undone by the replay.
func TestReplay_sharedOwnerDoesNotReleaseTwice(t *testing.T) {
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
	p.DropReplyThenOutage(matchScript("release.lua", e.LockKey("sh")), 300*time.Millisecond)
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
