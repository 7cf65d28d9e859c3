package rlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
)

// labelledHolder returns st's holder labelled label, or fails.
func labelledHolder(t *testing.T, st rlock.State, label string) rlock.Holder {
	t.Helper()
	for _, h := range st.Holders {
		if h.Label == label {
			return h
		}
	}
	require.Failf(t, "no holder labelled", "%q in %+v", label, st.Holders)
	return rlock.Holder{}
}

// TestLabel_holds: every kind and mode shows a labelled hold's label and how long it has been
// held; a re-entry (a second hold of a Semaphore) does not reset Since; an unlabelled hold
// shows neither; the labels go with the holds (the Env checks that no key is left).
func TestLabel_holds(t *testing.T) {
	eachKind(t, func(t *testing.T, k lockKind) {
		t.Parallel()
		e := newEnv(t)
		c := e.client(rlock.Options{})
		ops := k.on(c, "l-"+k.name)
		a := rlock.WithLabel(rlock.WithOwner(bg, "a"), "host-a pid 12")
		h1, err := ops.lockOne(a)
		require.NoError(t, err)
		st, err := ops.state(bg)
		require.NoError(t, err)
		require.Len(t, st.Holders, 1)
		assert.Equal(t, "host-a pid 12", st.Holders[0].Label)
		assert.GreaterOrEqual(t, st.Holders[0].Since, time.Duration(0))
		assert.Less(t, st.Holders[0].Since, time.Second)
		time.Sleep(60 * time.Millisecond)
		var h2 context.Context
		if !k.semaphore() {
			// a re-entry, labelled otherwise: Since kept
			h2, err = ops.lockOne(rlock.WithLabel(rlock.WithOwner(bg, "a"), "again"))
			require.NoError(t, err)
			st, err = ops.state(bg)
			require.NoError(t, err)
			require.Len(t, st.Holders, 1)
			assert.Equal(t, 2, st.Holders[0].Count)
			assert.Equal(t, "host-a pid 12", st.Holders[0].Label, "the first label kept")
			assert.GreaterOrEqual(t, st.Holders[0].Since, 60*time.Millisecond, "re-entry reset Since")
			require.NoError(t, ops.release(h2))
		}
		// an unlabelled hold beside it (a reader, or a semaphore's second hold) shows no label
		if k.read || k.semaphore() {
			h2, err = ops.lockOne(rlock.WithOwner(bg, "b"))
			require.NoError(t, err)
			st, err = ops.state(bg)
			require.NoError(t, err)
			require.Len(t, st.Holders, 2)
			lab := labelledHolder(t, st, "host-a pid 12")
			assert.GreaterOrEqual(t, lab.Since, 60*time.Millisecond)
			other := labelledHolder(t, st, "")
			assert.Zero(t, other.Since)
			require.NoError(t, ops.release(h2))
		}
		require.NoError(t, ops.release(h1))
		st, err = ops.state(bg)
		require.NoError(t, err)
		assert.Empty(t, st.Holders)
		// a hold that goes with another kept: its label goes with it, the other's stays
		if k.read || k.semaphore() {
			h1, err = ops.lockOne(rlock.WithLabel(rlock.WithOwner(bg, "a"), "A"))
			require.NoError(t, err)
			h2, err = ops.lockOne(rlock.WithLabel(rlock.WithOwner(bg, "b"), "B"))
			require.NoError(t, err)
			require.NoError(t, ops.release(h1))
			st, err = ops.state(bg)
			require.NoError(t, err)
			require.Len(t, st.Holders, 1)
			assert.Equal(t, "B", st.Holders[0].Label)
			fields, err := e.Do("HKEYS", e.LockKey("l-"+k.name)).AsStrSlice()
			require.NoError(t, err)
			for _, f := range fields {
				assert.NotContains(t, f, ":a", "a field of the hold that went: %q", f)
				if k.semaphore() {
					assert.False(t, strings.HasSuffix(f, "A"), "%q", f)
				}
			}
			require.NoError(t, ops.release(h2))
		}
		// force unlock takes the labels too
		_, err = ops.lock(rlock.WithLabel(rlock.WithOwner(bg, "a"), "forced"))
		require.NoError(t, err)
		_, err = ops.force(bg)
		require.NoError(t, err)
	})
}

// TestLabel_waiters: the queued kinds and a plain RWMutex's waiting writers show a waiter's
// label; a waiter granted the lock, or taking it, holds it labelled so; a waiter that gives up
// takes its label with its place.
func TestLabel_waiters(t *testing.T) {
	waitersShown := func(k lockKind) bool { return queuedKinds(k) || k.name == "rw-write" }
	each(t, waitersShown, func(t *testing.T, k lockKind) {
		t.Parallel()
		eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
			e := newEnv(t)
			c := e.client(rlock.Options{Wait: wait})
			ops := k.on(c, "w-"+k.name)
			h, err := ops.lock(rlock.WithLabel(rlock.WithOwner(bg, "a"), "A"))
			require.NoError(t, err)
			gone, cancel := context.WithCancel(rlock.WithLabel(rlock.WithOwner(bg, "c"), "C gives up"))
			defer cancel()
			cRes := goAcquire(func() (context.Context, error) { return ops.lock(gone) })
			var st rlock.State
			require.Eventually(t, func() bool {
				st, err = ops.state(bg)
				require.NoError(t, err)
				return len(st.Waiters) == 1
			}, 5*time.Second, 5*time.Millisecond)
			bRes := goAcquire(func() (context.Context, error) {
				return ops.lock(rlock.WithLabel(rlock.WithOwner(bg, "b"), "B waits"))
			})
			require.Eventually(t, func() bool {
				st, err = ops.state(bg)
				require.NoError(t, err)
				return len(st.Waiters) == 2
			}, 5*time.Second, 5*time.Millisecond)
			// (a plain RWMutex's waiting writers are in the order of their places' deadlines,
			// which each refresh moves: not an arrival order)
			assert.ElementsMatch(t, []string{"C gives up", "B waits"}, []string{st.Waiters[0].Label, st.Waiters[1].Label})
			if k.queued {
				assert.Equal(t, "C gives up", st.Waiters[0].Label)
			}
			cancel()
			require.ErrorIs(t, (<-cRes).err, context.Canceled)
			st, err = ops.state(bg)
			require.NoError(t, err)
			require.Len(t, st.Waiters, 1)
			assert.Equal(t, "B waits", st.Waiters[0].Label)
			require.NoError(t, ops.release(h))
			b := <-bRes
			require.NoError(t, b.err)
			st, err = ops.state(bg)
			require.NoError(t, err)
			require.Len(t, st.Holders, 1)
			assert.Equal(t, "B waits", st.Holders[0].Label)
			assert.Empty(t, st.Waiters)
			require.NoError(t, ops.release(b.h))
		})
	})
}

// TestLabel_invalid: a bad label is an error wrapping ErrInvalid from the call that uses it,
// for every kind, and nothing changes in Redis.
func TestLabel_invalid(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{})
	for _, label := range []string{"", strings.Repeat("x", 257), "a\nb", "\xff"} {
		for _, k := range kinds {
			ops := k.on(c, "bad-"+k.name)
			ctx := rlock.WithLabel(rlock.WithOwner(bg, "a"), label)
			_, err := ops.lock(ctx)
			require.ErrorIs(t, err, rlock.ErrInvalid, "%s %q", k.name, label)
			_, err = ops.try(ctx, 0)
			require.ErrorIs(t, err, rlock.ErrInvalid, "%s %q", k.name, label)
		}
		assert.Empty(t, e.Keys())
	}
	_, err := c.NewMutex("ok").TryLock(rlock.WithLabel(bg, strings.Repeat("x", 256)), 0)
	require.NoError(t, err)
	_, err = c.NewMutex("ok").ForceUnlock(bg)
	require.NoError(t, err)
}

// TestLabel_election: a labelled candidate's wait and its term show the label, a term handed
// over is labelled as its candidate waited, and a bad label is refused with nothing changed.
func TestLabel_election(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		c := e.client(rlock.Options{Wait: wait})
		el := c.NewElection("el")
		_, err := el.Campaign(rlock.WithLabel(bg, ""), "x")
		require.ErrorIs(t, err, rlock.ErrInvalid)
		require.Empty(t, e.Keys())
		term, err := el.Campaign(rlock.WithLabel(bg, "leader A"), "a")
		require.NoError(t, err)
		res := goAcquire(func() (context.Context, error) { return el.Campaign(rlock.WithLabel(bg, "candidate B"), "b") })
		var st rlock.State
		require.Eventually(t, func() bool {
			st, err = el.State(bg)
			require.NoError(t, err)
			return len(st.Waiters) == 1
		}, 5*time.Second, 5*time.Millisecond)
		require.Len(t, st.Holders, 1)
		assert.Equal(t, "leader A", st.Holders[0].Label)
		assert.Equal(t, "candidate B", st.Waiters[0].Label)
		require.NoError(t, el.Resign(term))
		b := <-res
		require.NoError(t, b.err)
		st, err = el.State(bg)
		require.NoError(t, err)
		require.Len(t, st.Holders, 1)
		assert.Equal(t, "candidate B", st.Holders[0].Label)
		require.NoError(t, el.Resign(b.h))
	})
}

// TestLabel_multiLock: a MultiLock's set labels every member's hold and its wait in the queue
// of a fair member; a bad label is refused with nothing changed.
func TestLabel_multiLock(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{})
	a, f := c.NewMutex("{lbl}ma"), c.NewFairMutex("{lbl}mf") // one slot: one group, on a Cluster too
	ml := c.NewMultiLock(a, f)
	_, err := ml.TryLock(rlock.WithLabel(bg, "a\tb"), 0)
	require.ErrorIs(t, err, rlock.ErrInvalid)
	require.Empty(t, e.Keys())
	other, err := f.Lock(rlock.WithLabel(bg, "other"))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(rlock.WithLabel(bg, "the set"))
	defer cancel()
	res := goAcquire(func() (context.Context, error) { return ml.Lock(ctx) })
	var st rlock.State
	require.Eventually(t, func() bool {
		st, err = f.State(bg)
		require.NoError(t, err)
		return len(st.Waiters) == 1
	}, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, "the set", st.Waiters[0].Label)
	assert.Equal(t, "other", st.Holders[0].Label)
	// a set that gives up takes its labelled place with it
	gone, stop := context.WithCancel(rlock.WithLabel(bg, "gives up"))
	quit := goAcquire(func() (context.Context, error) { return c.NewMultiLock(f, a).Lock(gone) })
	require.Eventually(t, func() bool {
		st, err = f.State(bg)
		require.NoError(t, err)
		return len(st.Waiters) == 2
	}, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, "gives up", st.Waiters[1].Label)
	stop()
	require.ErrorIs(t, (<-quit).err, context.Canceled)
	st, err = f.State(bg)
	require.NoError(t, err)
	require.Len(t, st.Waiters, 1)
	assert.Equal(t, "the set", st.Waiters[0].Label)
	require.NoError(t, f.Unlock(other))
	set := <-res
	require.NoError(t, set.err)
	for _, m := range []*rlock.Mutex{a, f} {
		st, err = m.State(bg)
		require.NoError(t, err)
		require.Len(t, st.Holders, 1)
		assert.Equal(t, "the set", st.Holders[0].Label, m.Name())
		assert.Empty(t, st.Waiters)
	}
	require.NoError(t, ml.Unlock(set.h))
}
