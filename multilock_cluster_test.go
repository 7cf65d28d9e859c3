package rlock_test

// MultiLock on a Redis Cluster, where a set's members spread over slots: a member of an earlier
// slot lost while the set waits for a later one, and a slot migration in the middle of a wait.

import (
	"context"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/internal/wire"
)

// needsCluster skips t off a Redis Cluster.
func needsCluster(t *testing.T, e *env) {
	t.Helper()
	if e.Dep.Topology != "cluster" {
		t.Skip("members in several hash slots: a Redis Cluster's")
	}
}

// crossSlot returns the two members of a set made of c's mutexes called x and y, in the order
// the set takes them (different slots on a Cluster).
func crossSlot(c *rlock.Client, x, y *rlock.Mutex) (first, last *rlock.Mutex) {
	if c.NewMultiLock(x, y).Names()[0] == x.Name() {
		return x, y
	}
	return y, x
}

// TestMultiLock_clusterLostWhileWaiting: a set holds the member of the earlier slot while it
// waits for the later one; that member's hold is lost meanwhile (its hash deleted): the set
// takes it again, in order, and holds both when the later one is released.
func TestMultiLock_clusterLostWhileWaiting(t *testing.T) {
	e := newEnv(t)
	needsCluster(t, e)
	c := e.client(rlock.Options{WatchdogTimeout: 300 * time.Millisecond})
	first, last := crossSlot(c, c.NewMutex("wa"), c.NewMutex("wb"))
	hl, err := last.Lock(bg)
	require.NoError(t, err)
	ch := goAcquire(func() (context.Context, error) {
		return c.NewMultiLock(first, last).Lock(rlock.WithOwner(bg, "set"))
	})
	eventually(t, 2*time.Second, "the set holds the first member", func() bool { return len(holders(t, first)) == 1 })
	require.NoError(t, e.Do("DEL", e.LockKey(first.Name())).Error())
	time.Sleep(200 * time.Millisecond) // a renewal finds it gone
	requireNone(t, 0, "the set waits", ch)
	require.NoError(t, last.Unlock(hl))
	h := requireGranted(t, ch, 2*time.Second, "the set")
	assert.Equal(t, []string{"set"}, holders(t, first), "taken again")
	assert.Equal(t, []string{"set"}, holders(t, last))
	require.NoError(t, h.Err())
	require.NoError(t, c.NewMultiLock(first, last).Unlock(h))
}

// TestMultiLock_clusterSlotMigration: a set holds a member of one slot and waits for a plain and
// then a fair member of another, held elsewhere with 30s leases; that slot migrates to another
// master (CLUSTER SETSLOT, MIGRATE) in the middle of the wait. Released, each member reaches the
// set on the new master long before the holders' lease end (the set's subscriptions follow the
// slot once they subscribe again there), and the set holds all three.
func TestMultiLock_clusterSlotMigration(t *testing.T) {
	e := newEnv(t)
	needsCluster(t, e)
	redistest.NeedsThrowaway(t)
	c, other := e.client(rlock.Options{}), e.client(rlock.Options{})
	p, f := c.NewMutex("{mt}a"), c.NewFairMutex("{mt}f") // the plain one first in the group
	var a *rlock.Mutex
	for i := 0; a == nil; i++ { // a member in a slot before {mt}'s, on another master
		name := "ma" + strconv.Itoa(i)
		if wire.Slot(e.LockKey(name)) < wire.Slot(e.LockKey("{mt}a")) && e.Master(name).Addr != e.Master("{mt}a").Addr {
			a = c.NewMutex(name)
		}
	}
	hp, err := other.NewMutex("{mt}a").Lock(bg)
	require.NoError(t, err)
	hf, err := other.NewFairMutex("{mt}f").Lock(bg)
	require.NoError(t, err)
	ml := c.NewMultiLock(f, p, a)
	ch := goAcquire(func() (context.Context, error) { return ml.Lock(rlock.WithOwner(bg, "set")) })
	eventually(t, 2*time.Second, "the set holds a", func() bool { return len(holders(t, a)) == 1 })

	migrateSlot(t, e, "{mt}a")
	requireNone(t, 200*time.Millisecond, "the set waits", ch)
	released := time.Now()
	require.NoError(t, other.NewMutex("{mt}a").Unlock(hp))
	eventually(t, 5*time.Second, "the set waits in f's queue", func() bool { return len(waiters(t, f)) == 1 })
	t.Logf("the set queued on f %v after p's release", time.Since(released).Round(time.Millisecond))
	released = time.Now()
	require.NoError(t, other.NewFairMutex("{mt}f").Unlock(hf))
	h := requireGranted(t, ch, 5*time.Second, "the set")
	t.Logf("the set got f %v after its release", time.Since(released).Round(time.Millisecond))
	for _, m := range []*rlock.Mutex{a, p, f} {
		assert.Equal(t, []string{"set"}, holders(t, m), m.Name())
	}
	require.NoError(t, ml.Unlock(h))
}

// migrateSlot moves the hash slot of the lock called name to another master (see moveSlot),
// and back when the test ends.
func migrateSlot(t *testing.T, e *env, name string) {
	t.Helper()
	slot, src, dst := slotAndMasters(t, e, name)
	moveSlot(t, e, slot, src, dst)
	t.Cleanup(func() {
		moveSlot(t, e, slot, dst, src)
		e.Dep.WaitSteady(t, 20*time.Second)
	})
}

// moveSlot moves slot from one master to another: CLUSTER SETSLOT IMPORTING and MIGRATING,
// MIGRATE of its keys, SETSLOT NODE on every master.
func moveSlot(t *testing.T, e *env, slot string, from, to redistest.Node) {
	t.Helper()
	toID := startMigrating(t, slot, from, to)
	host, port, err := net.SplitHostPort(to.Addr)
	require.NoError(t, err)
	for {
		keys, err := from.Do(t, "CLUSTER", "GETKEYSINSLOT", slot, "1000").AsStrSlice()
		require.NoError(t, err)
		if len(keys) == 0 {
			break
		}
		args := append([]string{"MIGRATE", host, port, "", "0", "5000", "KEYS"}, keys...)
		require.NoError(t, from.Do(t, args...).Error())
	}
	for _, m := range e.Dep.Masters {
		require.NoError(t, m.Do(t, "CLUSTER", "SETSLOT", slot, "NODE", toID).Error())
	}
	t.Logf("slot %s moved from %s to %s", slot, from.Addr, to.Addr)
}

// slotAndMasters returns the hash slot of the lock called name, its master, and another.
func slotAndMasters(t *testing.T, e *env, name string) (slot string, src, dst redistest.Node) {
	t.Helper()
	src = e.Master(name)
	for _, m := range e.Dep.Masters {
		if m.Addr != src.Addr {
			return strconv.Itoa(int(wire.Slot(e.LockKey(name)))), src, m
		}
	}
	t.Fatal("one master only")
	return
}

// startMigrating marks slot IMPORTING on to and MIGRATING on from, moving no key, and returns
// to's node id.
func startMigrating(t *testing.T, slot string, from, to redistest.Node) (toID string) {
	t.Helper()
	fromID, err := from.Do(t, "CLUSTER", "MYID").ToString()
	require.NoError(t, err)
	toID, err = to.Do(t, "CLUSTER", "MYID").ToString()
	require.NoError(t, err)
	require.NoError(t, to.Do(t, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID).Error())
	require.NoError(t, from.Do(t, "CLUSTER", "SETSLOT", slot, "MIGRATING", toID).Error())
	return toID
}

// TestCluster_migratingSlotRefusal: a lock's slot is half migrated (CLUSTER SETSLOT MIGRATING and
// IMPORTING, no key moved yet), so a script that finds some of its keys and not others is
// refused with TRYAGAIN. A waiter of every kind, under either strategy, keeps waiting through
// that refusal rather than fail with it, and is served once the slot is stable and the lock
// released; a Try with a wait returns within its bound, with an error wrapping the refusal.
func TestCluster_migratingSlotRefusal(t *testing.T) {
	e := newEnv(t)
	needsCluster(t, e)
	redistest.NeedsThrowaway(t)
	each(t, perKind, func(t *testing.T, k lockKind) {
		eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
			name := "{mg}" + k.name + wait.String()
			other := e.client(rlock.Options{})
			c := e.client(rlock.Options{Wait: wait})
			holder := k.on(other, name)
			h, err := holder.lock(bg)
			require.NoError(t, err)
			stable := markMigrating(t, e, name)
			ctx, cancel := context.WithTimeout(bg, 20*time.Second)
			defer cancel()
			ops := k.on(c, name)
			start := time.Now()
			_, err = ops.try(bg, 300*time.Millisecond)
			require.Error(t, err)
			// its bound is wait+500ms; a loaded -race cluster run gets 500ms more (before: the
			// refusal itself came back at once, without ErrNotObtained)
			assert.Less(t, time.Since(start), 300*time.Millisecond+2*boundSlack, "the Try kept its bound")
			assert.ErrorIs(t, err, rlock.ErrNotObtained)
			t.Logf("the Try: %v", err)
			ch := goAcquire(func() (context.Context, error) { return ops.lock(ctx) })
			requireNone(t, 400*time.Millisecond, "the waiter waits through the refusal", ch)
			stable()
			require.NoError(t, holder.release(h))
			got := requireGranted(t, ch, 5*time.Second, "the waiter")
			require.NoError(t, ops.release(got))
		})
	})
}

// markMigrating marks the hash slot of the lock called name MIGRATING on its master and
// IMPORTING on another, moving no key, and returns what makes it stable again (also run when
// the test ends).
func markMigrating(t *testing.T, e *env, name string) (stable func()) {
	t.Helper()
	slot, src, dst := slotAndMasters(t, e, name)
	startMigrating(t, slot, src, dst)
	done := false
	stable = func() {
		if !done {
			done = true
			require.NoError(t, src.Do(t, "CLUSTER", "SETSLOT", slot, "STABLE").Error())
			require.NoError(t, dst.Do(t, "CLUSTER", "SETSLOT", slot, "STABLE").Error())
		}
	}
	t.Cleanup(stable)
	return stable
}

// TestMultiLock_clusterGiveBackStalled: a set's TryLock takes the later of its two groups while
// the earlier is held elsewhere, and gives it back; that give-back's request is held back (a
// proxy), as if Redis stalled right after the attempt. The TryLock still returns within its
// bound (before: when the request got through, 3s later), and once it gets through the
// group is released and nothing is left of the set.
func TestMultiLock_clusterGiveBackStalled(t *testing.T) {
	e := newEnv(t)
	needsCluster(t, e)
	p := e.newProxy()
	c, other := e.through(p).client(rlock.Options{}), e.client(rlock.Options{})
	first, last := crossSlot(c, c.NewMutex("sa"), c.NewMutex("sb"))
	hf, err := other.NewMutex(first.Name()).Lock(bg)
	require.NoError(t, err)
	flow := p.HoldRequest(matchScript("multi_release.lua", e.LockKey(last.Name())))
	time.AfterFunc(3*time.Second, flow)
	const wait = 300 * time.Millisecond
	start := time.Now()
	_, err = c.NewMultiLock(first, last).TryLock(rlock.WithOwner(bg, "set"), wait)
	took := time.Since(start)
	t.Logf("the TryLock: %v, %v", took.Round(time.Millisecond), err)
	require.ErrorIs(t, err, rlock.ErrNotObtained)
	// its bound is wait+500ms (500ms here); a loaded -race cluster run gets 500ms more, well
	// under the 3s the give-back is held back
	assert.LessOrEqual(t, took, wait+2*boundSlack, "the TryLock kept its bound")
	assert.Equal(t, int64(1), p.Fired(), "the give-back was held back")
	eventually(t, 10*time.Second, "the later group given back", func() bool { return len(holders(t, last)) == 0 })
	require.NoError(t, other.NewMutex(first.Name()).Unlock(hf))
	eventually(t, 5*time.Second, "nothing left", func() bool { return len(e.Keys()) == 0 })
}

// TestCluster_migrationStress: two clients' workers lock, hold and release one lock of each kind
// (under either strategy), and a MultiLock with a member there and one elsewhere, while the
// lock's slot moves between two masters again and again (MIGRATE of its keys mid-use). Never
// two holders, no call fails, no hold is lost, and nothing is left once they are done. (Before
// refusals counted as unreachable: TRYAGAIN failed acquires and releases of every kind, and a
// release that failed so kept its lock held until its lease ran out, so that waits of 5s ended
// with their deadline.)
func TestCluster_migrationStress(t *testing.T) {
	e := newEnv(t)
	needsCluster(t, e)
	redistest.NeedsThrowaway(t)
	d := 2 * time.Second // per row; RLOCK_MIGRATESTRESS=10s for a longer run
	if s := os.Getenv("RLOCK_MIGRATESTRESS"); s != "" {
		var err error
		d, err = time.ParseDuration(s)
		require.NoError(t, err)
	}
	clients := func(wait rlock.WaitStrategy) []*rlock.Client {
		return []*rlock.Client{e.client(rlock.Options{Wait: wait, WatchdogTimeout: time.Second}),
			e.client(rlock.Options{Wait: wait, WatchdogTimeout: time.Second})}
	}
	each(t, perKind, func(t *testing.T, k lockKind) {
		eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
			name := "{mv}" + k.name + wait.String()
			cs := clients(wait)
			stressMigrating(t, e, name, d, func(i int) stressOps {
				o := k.on(cs[i%2], name)
				return stressOps{o.lock, o.release}
			})
		})
	})
	t.Run("multilock", func(t *testing.T) {
		eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
			name := "{mv}set" + wait.String()
			cs := clients(wait)
			stressMigrating(t, e, name, d, func(i int) stressOps {
				c := cs[i%2]
				ml := c.NewMultiLock(c.NewMutex(name), c.NewFairMutex("{mw}set"+wait.String()))
				return stressOps{ml.Lock, ml.Unlock}
			})
		})
	})
}

// stressOps are what a worker of stressMigrating takes and gives back.
type stressOps struct {
	lock    func(ctx context.Context) (context.Context, error)
	release func(h context.Context) error
}

// stressMigrating runs 6 workers, worker i with ops(i), taking, holding for 1ms and releasing
// for d while the slot of the lock called name moves back and forth, and checks what
// TestCluster_migrationStress says.
func stressMigrating(t *testing.T, e *env, name string, d time.Duration, ops func(i int) stressOps) {
	var in, overlaps, holds, lost atomic.Int64
	var errs sync.Map
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 6 {
		o := ops(i)
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				// (a plain member lets waiters barge: one may wait seconds behind the others)
				ctx, cancel := context.WithTimeout(bg, 15*time.Second)
				h, err := o.lock(ctx)
				if err != nil {
					cancel()
					errs.Store(err.Error(), true)
					continue
				}
				if in.Add(1) > 1 {
					overlaps.Add(1)
				}
				time.Sleep(time.Millisecond)
				in.Add(-1)
				if cause := context.Cause(h); cause != nil {
					lost.Add(1)
					errs.Store("lost: "+cause.Error(), true)
				}
				if err := o.release(h); err != nil {
					errs.Store("release: "+err.Error(), true)
				}
				cancel()
				holds.Add(1)
			}
		})
	}
	slot, a, b := slotAndMasters(t, e, name)
	for end := time.Now().Add(d); time.Now().Before(end); a, b = b, a {
		time.Sleep(100 * time.Millisecond)
		moveSlot(t, e, slot, a, b)
	}
	close(stop)
	wg.Wait()
	if a.Addr != e.Master(name).Addr { // back where it was
		moveSlot(t, e, slot, a, b)
	}
	t.Logf("%d holds, %d overlaps, %d lost", holds.Load(), overlaps.Load(), lost.Load())
	errs.Range(func(k, _ any) bool { t.Errorf("error: %v", k); return true })
	assert.Zero(t, overlaps.Load(), "two holders")
	assert.Zero(t, lost.Load(), "holds lost")
	assert.Positive(t, holds.Load())
	eventually(t, 5*time.Second, "nothing left", func() bool { return len(e.Keys()) == 0 })
}
