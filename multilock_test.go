package rlock_test

// MultiLock: every member or none, one hold context for the set, waits in the global order
// (no deadlock with other sets nor with single holders), TryLock's total budget, retried
// Unlocks, the loss of one member, re-entry, fair members' queues, bad input. Names with a
// {tag} share a hash slot on a Cluster (one group, one script); names without one spread over
// slots there (groups taken in order). Off a Cluster every set is one group.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
)

// holders returns the owners that hold m, as its State reads them.
func holders(t *testing.T, m *rlock.Mutex) []string {
	t.Helper()
	st, err := m.State(bg)
	require.NoError(t, err)
	out := []string{}
	for _, h := range st.Holders {
		out = append(out, h.Owner)
	}
	return out
}

// waiters returns the owners that wait in m's queue, in order.
func waiters(t *testing.T, m *rlock.Mutex) []string {
	t.Helper()
	st, err := m.State(bg)
	require.NoError(t, err)
	out := []string{}
	for _, w := range st.Waiters {
		out = append(out, w.Owner)
	}
	return out
}

// eventually requires cond to hold within d, polling every 10ms.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	give := time.Now().Add(d)
	for !cond() {
		if time.Now().After(give) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMultiLock_holdsEveryMember: a set over plain and fair members, fenced or not, across
// slots and within one tag on a Cluster: its hold context carries a hold of every member (their
// HoldCount, Token and State see the set's owner), a single Mutex is kept out of each, a
// member's Unlock accepts the context, and Unlock releases the set once.
func TestMultiLock_holdsEveryMember(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{})
	a, b := c.NewMutex("a"), c.NewFairMutex("b", rlock.WithFencing())
	tc, td := c.NewMutex("{t}c", rlock.WithFencing()), c.NewFairMutex("{t}d")
	members := []*rlock.Mutex{a, b, tc, td}
	ml := c.NewMultiLock(td, b, tc, a)
	names := ml.Names()
	assert.ElementsMatch(t, []string{"a", "b", "{t}c", "{t}d"}, names)
	for i := 1; i < len(names); i++ {
		if names[i] == "{t}d" {
			assert.Equal(t, "{t}c", names[i-1], "one slot's members in name order: %v", names)
		}
	}
	if e.Dep.Topology != "cluster" {
		assert.Equal(t, []string{"a", "b", "{t}c", "{t}d"}, names, "one slot: by name")
	}

	for round := 0; round < 2; round++ {
		h, err := ml.Lock(rlock.WithOwner(bg, "set"))
		require.NoError(t, err)
		owner, _ := rlock.Owner(h)
		assert.Equal(t, "set", owner)
		for _, m := range members {
			assert.Equal(t, []string{"set"}, holders(t, m), m.Name())
			n, err := m.HoldCount(h)
			require.NoError(t, err)
			assert.Equal(t, 1, n, m.Name())
			_, err = m.TryLock(bg, 0)
			assert.ErrorIs(t, err, rlock.ErrNotObtained, m.Name())
		}
		tb, ok := b.Token(h)
		assert.True(t, ok)
		tk, ok := tc.Token(h)
		assert.True(t, ok)
		assert.Positive(t, tb+tk)
		_, ok = a.Token(h)
		assert.False(t, ok, "a has no fencing")
		require.NoError(t, h.Err())

		if round == 1 {
			// A member's own Unlock accepts the set's context; the set's context then ends,
			// and the set's Unlock releases the others.
			require.NoError(t, b.Unlock(h))
			assert.Empty(t, holders(t, b))
			assert.ErrorIs(t, causeOf(h, time.Second), context.Canceled)
		}
		require.NoError(t, ml.Unlock(h))
		assert.ErrorIs(t, causeOf(h, time.Second), context.Canceled)
		for _, m := range members {
			assert.Empty(t, holders(t, m), m.Name())
		}
		assert.ErrorIs(t, ml.Unlock(h), rlock.ErrNotHeld, "once")
	}
	assert.ErrorIs(t, ml.Unlock(rlock.WithOwner(bg, "set")), rlock.ErrNotHeld)
	assert.ErrorIs(t, ml.Unlock(bg), rlock.ErrNotHeld, "no owner")
}

// TestMultiLock_waitsForEveryMember: a set blocked by single holders of a plain and a fair
// member waits until both are released, with either wait strategy; on a Cluster, a member of
// an earlier slot than the blocked one is held meanwhile, and nothing is left once it has
// them all and releases them.
func TestMultiLock_waitsForEveryMember(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		c := e.client(rlock.Options{Wait: wait})
		a, b, tc := c.NewMutex("a"), c.NewFairMutex("b"), c.NewMutex("{t}c")
		ml := c.NewMultiLock(a, b, tc)
		hb, err := b.Lock(bg)
		require.NoError(t, err)
		hc, err := tc.Lock(bg)
		require.NoError(t, err)
		ch := goAcquire(func() (context.Context, error) { return ml.Lock(rlock.WithOwner(bg, "set")) })
		requireNone(t, 150*time.Millisecond, "the set waits", ch)
		assert.Equal(t, []string{"set"}, waiters(t, b), "the set waits in b's queue")
		require.NoError(t, tc.Unlock(hc))
		requireNone(t, 100*time.Millisecond, "the set waits for b", ch)
		require.NoError(t, b.Unlock(hb))
		h := requireGranted(t, ch, 2*time.Second, "the set")
		for _, m := range []*rlock.Mutex{a, b, tc} {
			assert.Equal(t, []string{"set"}, holders(t, m), m.Name())
		}
		require.NoError(t, ml.Unlock(h))
	})
}

// TestMultiLock_nestedSingleHolder is the deadlock of a set that held a place in every fair
// queue of its group: H holds fair a alone, the set {a, b} waits for a, and H then takes b (in
// the global order, nesting). H gets b at once: the set holds no place in b's queue; the set
// gets both once H releases them.
func TestMultiLock_nestedSingleHolder(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		c := e.client(rlock.Options{Wait: wait})
		a, b := c.NewFairMutex("{n}a"), c.NewFairMutex("{n}b")
		H := rlock.WithOwner(bg, "H")
		ha, err := a.Lock(H)
		require.NoError(t, err)
		ch := goAcquire(func() (context.Context, error) { return c.NewMultiLock(a, b).Lock(bg) })
		requireNone(t, 100*time.Millisecond, "the set waits for a", ch)
		start := time.Now()
		hb, err := b.TryLock(H, 2*time.Second)
		require.NoError(t, err, "H takes b past the waiting set")
		assert.Less(t, time.Since(start), time.Second)
		require.NoError(t, b.Unlock(hb))
		require.NoError(t, a.Unlock(ha))
		h := requireGranted(t, ch, 2*time.Second, "the set")
		owner, _ := rlock.Owner(h)
		assert.Equal(t, []string{owner}, holders(t, b))
		require.NoError(t, c.NewMultiLock(b, a).Unlock(h), "another MultiLock of the same members")
	})
}

// TestMultiLock_allOrNothingSeenByReader: a reader that reads every member of one group in one
// script never sees a set hold some of them and not the others, while two sets over
// overlapping members and a single holder of one of them contend.
func TestMultiLock_allOrNothingSeenByReader(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{})
	names := []string{"{r}a", "{r}b", "{r}c", "{r}d"}
	ms := []*rlock.Mutex{c.NewMutex(names[0]), c.NewFairMutex(names[1]), c.NewMutex(names[2]), c.NewFairMutex(names[3])}
	sets := map[string]*rlock.MultiLock{"S1": c.NewMultiLock(ms...), "S2": c.NewMultiLock(ms[3], ms[1], ms[0])}
	setKeys := map[string][]string{}
	for _, i := range []int{0, 1, 2, 3} {
		setKeys["S1"] = append(setKeys["S1"], e.LockKey(names[i]))
	}
	for _, i := range []int{0, 1, 3} {
		setKeys["S2"] = append(setKeys["S2"], e.LockKey(names[i]))
	}
	rc := e.Rueidis()
	read := rueidis.NewLuaScriptReadOnly(`local n = 0
for i = 1, #KEYS do if redis.call('hexists', KEYS[i], ARGV[1]) == 1 then n = n + 1 end end
return n`)
	ctx, cancel := context.WithCancel(bg)
	var readers sync.WaitGroup
	var partial, whole atomic.Int64
	for owner, keys := range setKeys {
		readers.Go(func() {
			for ctx.Err() == nil {
				n, err := read.Exec(ctx, rc, keys, []string{owner}).AsInt64()
				switch {
				case err != nil:
				case n == int64(len(keys)):
					whole.Add(1)
				case n > 0:
					partial.Add(1)
				}
			}
		})
	}
	var contenders sync.WaitGroup
	var errs atomic.Int64
	for owner, ml := range sets {
		contenders.Go(func() {
			for range 60 {
				h, err := ml.Lock(rlock.WithOwner(bg, owner))
				if err == nil {
					err = ml.Unlock(h)
				}
				if err != nil {
					errs.Add(1)
				}
			}
		})
	}
	contenders.Go(func() {
		for range 60 {
			h, err := ms[1].Lock(bg)
			if err == nil {
				err = ms[1].Unlock(h)
			}
			if err != nil {
				errs.Add(1)
			}
		}
	})
	contenders.Wait()
	cancel()
	readers.Wait()
	assert.Zero(t, errs.Load())
	assert.Zero(t, partial.Load(), "a reader saw a set hold some members and not others")
	assert.Positive(t, whole.Load())
	t.Logf("reads that saw a set hold all its members: %d", whole.Load())
}

// TestMultiLock_tryLockBudget: TryLock's wait is a budget for the whole set, not per member:
// one member is released during the wait, another is not; the call gives up once its wait has
// passed, holding nothing and leaving no queue place. A TryLock with wait 0 gives up at once.
// On a Cluster, a set that holds an earlier slot's member while it waits gives it back too.
func TestMultiLock_tryLockBudget(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		c := e.client(rlock.Options{Wait: wait})
		a, b, tc := c.NewFairMutex("{u}a"), c.NewFairMutex("{u}b"), c.NewFairMutex("{u}c")
		x, y := c.NewMutex("x"), c.NewMutex("y")
		ha, err := a.Lock(bg)
		require.NoError(t, err)
		hc, err := tc.Lock(bg)
		require.NoError(t, err)
		time.AfterFunc(200*time.Millisecond, func() { _ = a.Unlock(ha) })
		ml := c.NewMultiLock(a, b, tc)
		const budget = 500 * time.Millisecond
		start := time.Now()
		_, err = ml.TryLock(rlock.WithOwner(bg, "set"), budget)
		took := time.Since(start)
		require.ErrorIs(t, err, rlock.ErrNotObtained)
		t.Logf("gave up after %v", took.Round(time.Millisecond))
		assert.GreaterOrEqual(t, took, budget)
		assert.Less(t, took, budget+400*time.Millisecond, "one budget for every member")
		for _, m := range []*rlock.Mutex{a, b, tc} {
			assert.Empty(t, waiters(t, m), "%s: no queue place left", m.Name())
			assert.NotContains(t, holders(t, m), "set", m.Name())
		}
		start = time.Now()
		_, err = ml.TryLock(bg, 0)
		require.ErrorIs(t, err, rlock.ErrNotObtained)
		assert.Less(t, time.Since(start), 200*time.Millisecond)
		require.NoError(t, tc.Unlock(hc))

		// Two slots on a Cluster: the set holds the first while it waits for the second.
		set := c.NewMultiLock(x, y)
		first, last := x, y
		if set.Names()[0] == "y" {
			first, last = y, x
		}
		hl, err := last.Lock(bg)
		require.NoError(t, err)
		ch := goAcquire(func() (context.Context, error) { return set.TryLock(rlock.WithOwner(bg, "set"), 300*time.Millisecond) })
		time.Sleep(150 * time.Millisecond)
		if e.Dep.Topology == "cluster" {
			assert.Equal(t, []string{"set"}, holders(t, first), "held while the set waits for a later slot")
		} else {
			assert.Empty(t, holders(t, first), "one group: all or nothing")
		}
		r := awaitResult(t, ch, 2*time.Second, "the set")
		require.ErrorIs(t, r.err, rlock.ErrNotObtained)
		assert.Empty(t, holders(t, first), "given back")
		require.NoError(t, last.Unlock(hl))
	})
}

// TestMultiLock_fairQueueOrder: a set waits its turn in a fair member's queue, listed there by
// State, between single waiters that came before and after it.
func TestMultiLock_fairQueueOrder(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		c := e.client(rlock.Options{Wait: wait})
		a, b := c.NewFairMutex("{f}a"), c.NewMutex("{f}b")
		ha, err := a.Lock(bg)
		require.NoError(t, err)
		w1 := goAcquire(func() (context.Context, error) { return a.Lock(rlock.WithOwner(bg, "W1")) })
		eventually(t, 2*time.Second, "W1 queued", func() bool { return len(waiters(t, a)) == 1 })
		set := goAcquire(func() (context.Context, error) { return c.NewMultiLock(a, b).Lock(rlock.WithOwner(bg, "S")) })
		eventually(t, 2*time.Second, "S queued", func() bool { return len(waiters(t, a)) == 2 })
		w2 := goAcquire(func() (context.Context, error) { return a.Lock(rlock.WithOwner(bg, "W2")) })
		eventually(t, 2*time.Second, "W2 queued", func() bool { return len(waiters(t, a)) == 3 })
		assert.Equal(t, []string{"W1", "S", "W2"}, waiters(t, a))
		assert.Empty(t, holders(t, b), "the set holds nothing while it waits")

		require.NoError(t, a.Unlock(ha))
		h1 := requireGranted(t, w1, 2*time.Second, "W1")
		requireNone(t, 50*time.Millisecond, "S and W2 wait", set, w2)
		require.NoError(t, a.Unlock(h1))
		hs := requireGranted(t, set, 2*time.Second, "S")
		assert.Equal(t, []string{"S"}, holders(t, b))
		requireNone(t, 50*time.Millisecond, "W2 waits", w2)
		require.NoError(t, c.NewMultiLock(a, b).Unlock(hs))
		h2 := requireGranted(t, w2, 2*time.Second, "W2")
		require.NoError(t, a.Unlock(h2))
	})
}

// TestMultiLock_reentrant: an owner that holds a member alone re-enters it with the set; a set
// taken again through its own context re-enters every member; each Unlock releases one hold.
func TestMultiLock_reentrant(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{})
	a, b := c.NewFairMutex("{e}a", rlock.WithFencing()), c.NewMutex("e")
	ml := c.NewMultiLock(a, b)
	W := rlock.WithOwner(bg, "W")
	ha, err := a.Lock(W)
	require.NoError(t, err)
	tok, _ := a.Token(ha)
	h, err := ml.Lock(W)
	require.NoError(t, err)
	count := func(m *rlock.Mutex) int {
		n, err := m.HoldCount(W)
		require.NoError(t, err)
		return n
	}
	assert.Equal(t, 2, count(a))
	assert.Equal(t, 1, count(b))
	got, _ := a.Token(h)
	assert.Equal(t, tok, got, "a re-entry keeps the hold's token")
	h2, err := ml.Lock(h)
	require.NoError(t, err)
	assert.Equal(t, 3, count(a))
	assert.Equal(t, 2, count(b))
	require.NoError(t, ml.Unlock(h2))
	require.NoError(t, ml.Unlock(h))
	assert.Equal(t, 1, count(a))
	assert.Equal(t, 0, count(b))
	assert.NoError(t, ha.Err(), "a's own hold lives on")
	require.NoError(t, a.Unlock(ha))
}

// TestMultiLock_lossOfOneMember: when one member is lost (its hash deleted, a force unlock, or
// the end of its fixed lease) the set's context ends with ErrLockLost and the library gives
// the other members back at once, not at their lease end; Unlock then reports ErrLockLost and
// releases nothing twice.
func TestMultiLock_lossOfOneMember(t *testing.T) {
	for _, how := range []string{"del", "force", "lease"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t)
			c := e.client(rlock.Options{WatchdogTimeout: 300 * time.Millisecond})
			var opts []rlock.MutexOption
			if how == "lease" {
				opts = append(opts, rlock.WithLease(300*time.Millisecond))
			}
			a := c.NewMutex("{l}a", opts...)
			others := []*rlock.Mutex{c.NewFairMutex("{l}b"), c.NewMutex("lc"), c.NewFairMutex("ld")}
			ml := c.NewMultiLock(append([]*rlock.Mutex{a}, others...)...)
			h, err := ml.Lock(bg)
			require.NoError(t, err)
			start := time.Now()
			switch how {
			case "del":
				require.NoError(t, e.Do("DEL", e.LockKey("{l}a")).Error())
			case "force":
				ok, err := a.ForceUnlock(bg)
				require.NoError(t, err)
				require.True(t, ok)
			}
			require.ErrorIs(t, causeOf(h, 2*time.Second), rlock.ErrLockLost)
			assert.True(t, rlock.Lost(h))
			lost := time.Since(start)
			eventually(t, time.Second, "the others given back", func() bool {
				for _, m := range others {
					if len(holders(t, m)) > 0 {
						return false
					}
				}
				return true
			})
			t.Logf("lost after %v, the others given back %v later", lost.Round(time.Millisecond),
				(time.Since(start) - lost).Round(time.Millisecond))
			assert.ErrorIs(t, ml.Unlock(h), rlock.ErrLockLost)
			for _, m := range others {
				assert.ErrorIs(t, m.Unlock(h), rlock.ErrLockLost, "%s: given back, its hold through the set is lost", m.Name())
			}
			h, err = ml.TryLock(bg, time.Second)
			require.NoError(t, err, "every member is free again")
			require.NoError(t, ml.Unlock(h))
		})
	}
}

// TestMultiLock_restart: the server restarts without its data under a set: the set's context
// ends with ErrLockLost at once (the node watchers' check), and the set can be taken again.
func TestMultiLock_restart(t *testing.T) {
	e, kill, start := crashable(t, "mlrestart")
	m := e.Master("mlrestart")
	c := e.client(rlock.Options{})
	var ms []*rlock.Mutex
	for _, base := range []string{"mlrestart", "mlrestart-b"} {
		ms = append(ms, c.NewMutex(nameOn(e, m, base)), c.NewFairMutex(nameOn(e, m, base+"-fair")))
	}
	ml := c.NewMultiLock(ms...)
	h, err := ml.Lock(bg)
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond) // let the watchers connect
	kill()
	start()
	require.ErrorIs(t, causeOf(h, 5*time.Second), rlock.ErrLockLost)
	assert.ErrorIs(t, ml.Unlock(h), rlock.ErrLockLost)
	e.Dep.WaitSteady(t, 20*time.Second)
	h, err = ml.TryLock(bg, 2*time.Second)
	require.NoError(t, err, "taken again after the restart")
	require.NoError(t, ml.Unlock(h))
}

// TestMultiLock_unlockRetried: a set taken twice by one owner; the first Unlock's reply is lost
// and its retries fail in an outage; its retry after the outage returns the settled outcome,
// and the set is released once (the owner still holds it once).
func TestMultiLock_unlockRetried(t *testing.T) {
	t.Parallel() // it waits out an outage
	e := newEnv(t)
	p := e.newProxy()
	c := e.through(p).client(rlock.Options{WatchdogTimeout: 6 * time.Second})
	a, b := c.NewMutex("{q}a"), c.NewFairMutex("{q}b")
	ml := c.NewMultiLock(a, b)
	W := rlock.WithOwner(bg, "W")
	h1, err := ml.Lock(W)
	require.NoError(t, err)
	h2, err := ml.Lock(W)
	require.NoError(t, err)
	p.DropReplyThenOutage(matchScript("multi_release.lua", e.LockKey("{q}a")), outage)
	start := time.Now()
	require.Error(t, ml.Unlock(h2), "every retry failed in the outage")
	time.Sleep(time.Until(start.Add(outage + 100*time.Millisecond)))
	require.NoError(t, ml.Unlock(h2), "the retry returns the settled outcome")
	for _, m := range []*rlock.Mutex{a, b} {
		n, err := m.HoldCount(W)
		require.NoError(t, err)
		assert.Equal(t, 1, n, "%s: released once", m.Name())
	}
	assert.ErrorIs(t, ml.Unlock(h2), rlock.ErrNotHeld)
	require.NoError(t, h1.Err())
	require.NoError(t, ml.Unlock(h1))
	assert.ErrorIs(t, causeOf(h1, time.Second), context.Canceled)
}

// TestMultiLock_invalid: bad arguments are errors wrapping ErrInvalid from the first call, and
// change nothing.
func TestMultiLock_invalid(t *testing.T) {
	e := newEnv(t)
	c, other := e.client(rlock.Options{}), e.client(rlock.Options{})
	a := c.NewMutex("a")
	many := make([]*rlock.Mutex, 1001)
	for i := range many {
		many[i] = c.NewMutex(strconv.Itoa(i))
	}
	for what, ml := range map[string]*rlock.MultiLock{
		"no member":       c.NewMultiLock(),
		"1001 members":    c.NewMultiLock(many...),
		"a member twice":  c.NewMultiLock(a, c.NewMutex("b"), c.NewFairMutex("a")),
		"the same twice":  c.NewMultiLock(a, a),
		"another client":  c.NewMultiLock(a, other.NewMutex("b")),
		"nil member":      c.NewMultiLock(a, nil),
		"an invalid name": c.NewMultiLock(a, c.NewMutex("")),
		"a bad option":    c.NewMultiLock(a, c.NewMutex("b", rlock.WithLease(-1))),
	} {
		_, err := ml.Lock(bg)
		assert.ErrorIs(t, err, rlock.ErrInvalid, what)
		_, err = ml.TryLock(bg, 0)
		assert.ErrorIs(t, err, rlock.ErrInvalid, what)
		assert.ErrorIs(t, ml.Unlock(rlock.WithOwner(bg, "o")), rlock.ErrInvalid, what)
	}
	ml := c.NewMultiLock(a)
	_, err := ml.TryLock(bg, -time.Second)
	assert.ErrorIs(t, err, rlock.ErrInvalid)
	_, err = ml.Lock(rlock.WithOwner(bg, ""))
	assert.ErrorIs(t, err, rlock.ErrInvalid)
	//lint:ignore SA1012 a nil context is the bad input under test
	_, err = ml.Lock(nil)
	assert.ErrorIs(t, err, rlock.ErrInvalid)
	assert.Empty(t, e.Keys())
	assert.Len(t, c.NewMultiLock(many[:1000]...).Names(), 1000, "1,000 members are fine")
}

// TestMultiLock_options: the members' RestartGrace, SyncReplicas and watchdog: within a grace
// no set is taken; a set whose new holds too few replicas acknowledge is given back; a set
// held past several leases is renewed.
func TestMultiLock_options(t *testing.T) {
	e := newEnv(t)
	ms := func(c *rlock.Client) *rlock.MultiLock {
		return c.NewMultiLock(c.NewMutex("{o}a"), c.NewFairMutex("{o}b"), c.NewMutex("o"))
	}

	graced := ms(e.client(rlock.Options{RestartGrace: 24 * time.Hour}))
	_, err := graced.TryLock(bg, 0)
	assert.ErrorIs(t, err, rlock.ErrNotObtained, "no new hold within the grace")
	_, err = graced.TryLock(bg, 100*time.Millisecond)
	assert.ErrorIs(t, err, rlock.ErrNotObtained)

	replicas := len(e.ReplicasOf(e.Master("{o}a")))
	synced := ms(e.client(rlock.Options{SyncReplicas: 1, SyncTimeout: 100 * time.Millisecond}))
	h, err := synced.Lock(bg)
	if replicas == 0 {
		assert.ErrorIs(t, err, rlock.ErrNotReplicated)
	} else {
		require.NoError(t, err)
		require.NoError(t, synced.Unlock(h))
	}

	// 300ms as the watchdog tests: with 150ms a renewal round late by 100ms (3 masters, -race,
	// a loaded machine) lost the set (seen once on a cluster).
	renewed := ms(e.client(rlock.Options{WatchdogTimeout: 300 * time.Millisecond}))
	h, err = renewed.Lock(bg)
	require.NoError(t, err)
	time.Sleep(900 * time.Millisecond)
	require.NoError(t, h.Err(), "renewed by the watchdog (cause: %v)", context.Cause(h))
	require.NoError(t, renewed.Unlock(h))
	assert.Empty(t, e.Keys())
}

// TestMultiLock_closeWhileWaiting: Close ends a waiting set with ErrClosed; it gives back what
// it held (on a Cluster, an earlier slot's member) and leaves its queue place.
func TestMultiLock_closeWhileWaiting(t *testing.T) {
	e := newEnv(t)
	holder := e.client(rlock.Options{})
	c, err := rlock.New(e.Rueidis(), rlock.Options{KeyPrefix: e.Prefix})
	require.NoError(t, err)
	x, y := c.NewMutex("x"), c.NewFairMutex("y")
	ml := c.NewMultiLock(x, y)
	last := holder.NewMutex(ml.Names()[1])
	if ml.Names()[1] == "y" {
		last = holder.NewFairMutex("y")
	}
	hl, err := last.Lock(bg)
	require.NoError(t, err)
	ch := goAcquire(func() (context.Context, error) { return ml.Lock(bg) })
	requireNone(t, 150*time.Millisecond, "the set waits", ch)
	require.NoError(t, c.Close())
	r := awaitResult(t, ch, 2*time.Second, "the set")
	require.ErrorIs(t, r.err, rlock.ErrClosed)
	require.NoError(t, last.Unlock(hl))
	assert.Empty(t, e.Keys(), "nothing left")
}

// TestMultiLock_stressAcrossProcesses: 3 processes of 6 goroutines take random sets of 2 to 4
// of 6 members (plain and fair, in one tag and across slots on a Cluster), each given in a
// random order, or a single member, 25 times each; every hold is checked against a guard key
// per member. No overlap, and no deadlock: every process finishes.
func TestMultiLock_stressAcrossProcesses(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		const procs = 3
		children := make([]*redistest.Child, procs)
		for i := range children {
			children[i] = redistest.StartChild(t, "multi", childEnv(e, "", wait, "ITERS=25", "GOROUTINES=6",
				"SEED="+strconv.Itoa(i))...)
		}
		for _, ch := range children {
			ch.Expect(t, "ready")
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for _, ch := range children {
				ch.Wait(t)
			}
		}()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Fatal("a process did not finish within 60s: deadlock")
		}
		assert.Empty(t, e.Keys())
	})
}

func init() { helpers["multi"] = helperMulti }

// stressMembers are the members of helperMulti's sets: their names and whether each is fair.
var stressMembers = []struct {
	name string
	fair bool
}{{"{m}0", false}, {"{m}1", true}, {"{m}2", false}, {"x3", false}, {"x4", true}, {"x5", false}}

// helperMulti runs GOROUTINES goroutines that each take ITERS random sets (or single members),
// checking exclusion with a guard key per member (SET NX; DEL of its own value), and exit with
// an error on any overlap.
func helperMulti(ch child) error {
	rc, c := ch.rc, ch.c
	iters, goroutines := envInt("ITERS"), envInt("GOROUTINES")
	prefix := os.Getenv("PREFIX")
	ms := make([]*rlock.Mutex, len(stressMembers))
	for i, m := range stressMembers {
		if m.fair {
			ms[i] = c.NewFairMutex(m.name)
		} else {
			ms[i] = c.NewMutex(m.name)
		}
	}
	guard := func(i int) string { return prefix + ":guard:" + stressMembers[i].name }
	fmt.Println("ready")
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for gi := range goroutines {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(envInt("SEED")), uint64(gi)))
			for it := range iters {
				pick := rnd.Perm(len(ms))[:2+rnd.IntN(3)]
				if rnd.IntN(5) == 0 {
					pick = pick[:1]
				}
				set := make([]*rlock.Mutex, len(pick))
				for k, i := range pick {
					set[k] = ms[i]
				}
				if err := stressRound(rc, c, guard, set, pick, fmt.Sprintf("%d-%d-%d", envInt("SEED"), gi, it), rnd); err != nil {
					errs <- fmt.Errorf("iteration %d: %w", it, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// stressRound takes set (a MultiLock, or its one member), checks the guard key of each member
// (pick: their indexes) and releases it.
func stressRound(rc rueidis.Client, c *rlock.Client, guard func(int) string, set []*rlock.Mutex, pick []int, me string, rnd *rand.Rand) error {
	ml := c.NewMultiLock(set...)
	lctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	var h context.Context
	var err error
	if len(set) == 1 {
		h, err = set[0].Lock(lctx)
	} else {
		h, err = ml.Lock(lctx)
	}
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	for _, i := range pick {
		ok, err := rc.Do(bg, rc.B().Set().Key(guard(i)).Value(me).Nx().Px(10*time.Second).Build()).AsBool()
		if err != nil && !rueidis.IsRedisNil(err) {
			return err
		}
		if !ok {
			return fmt.Errorf("overlap on %s", stressMembers[i].name)
		}
	}
	time.Sleep(time.Duration(rnd.IntN(500)) * time.Microsecond)
	for _, i := range pick {
		if err := rc.Do(bg, rc.B().Del().Key(guard(i)).Build()).Error(); err != nil {
			return err
		}
	}
	if h.Err() != nil {
		return fmt.Errorf("hold ended: %w", context.Cause(h))
	}
	if len(set) == 1 {
		err = set[0].Unlock(h)
	} else {
		err = ml.Unlock(h)
	}
	if err != nil {
		return fmt.Errorf("unlock: %w", err)
	}
	return nil
}

// TestMultiLock_cancelWhileTaking: three clients' goroutines loop on sets over random pairs
// of 100 accounts; when their context ends, every Lock returns. A Lock whose context ended
// just as it took its groups (the hold could not be registered) used to take and give them
// back for ever.
func TestMultiLock_cancelWhileTaking(t *testing.T) {
	e := newEnv(t)
	var accts [3][]*rlock.Mutex
	var cs [3]*rlock.Client
	for p := range accts {
		c := e.client(rlock.Options{})
		cs[p] = c
		for i := range 100 {
			accts[p] = append(accts[p], c.NewMutex(fmt.Sprintf("acct-%d", i)))
		}
	}
	ctx, cancel := context.WithCancel(bg)
	var wg sync.WaitGroup
	var n atomic.Int64
	for g := range 30 {
		wg.Go(func() {
			c, ms := cs[g%3], accts[g%3]
			rng := rand.New(rand.NewPCG(1, uint64(g)))
			for ctx.Err() == nil {
				from := rng.IntN(len(ms))
				to := (from + 1 + rng.IntN(len(ms)-1)) % len(ms)
				ml := c.NewMultiLock(ms[from], ms[to])
				h, err := ml.Lock(ctx)
				if err != nil {
					continue
				}
				time.Sleep(time.Millisecond)
				assert.NoError(t, ml.Unlock(h))
				n.Add(1)
			}
		})
	}
	time.Sleep(time.Second)
	cancel()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a Lock did not return after its context ended")
	}
	t.Logf("%d transfers", n.Load())
}
