package rlock_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
)

// eachStateKind runs f as a subtest per kind of lock (an RWMutex's row for its writes).
func eachStateKind(t *testing.T, f func(t *testing.T, k lockKind)) { each(t, perKind, f) }

// sortedHolders returns st's holders by owner, then mode.
func sortedHolders(st rlock.State) []rlock.Holder {
	hs := slices.Clone(st.Holders)
	slices.SortFunc(hs, func(a, b rlock.Holder) int {
		if c := strings.Compare(a.Owner, b.Owner); c != 0 {
			return c
		}
		return strings.Compare(a.Mode, b.Mode)
	})
	return hs
}

// requireLease requires every holder's lease to be in (0, max], and clears it for comparison.
func requireLease(t *testing.T, hs []rlock.Holder, max time.Duration) []rlock.Holder {
	t.Helper()
	out := slices.Clone(hs)
	for i, h := range out {
		require.Greater(t, h.Lease, time.Duration(0), "%+v", h)
		require.LessOrEqual(t, h.Lease, max, "%+v", h)
		out[i].Lease = 0
	}
	return out
}

// waiterNames returns the owners and modes of st's waiters, in order, and requires each
// deadline to be in (0, max].
func waiterNames(t *testing.T, st rlock.State, max time.Duration) []string {
	t.Helper()
	var names []string
	for _, w := range st.Waiters {
		require.Greater(t, w.Deadline, time.Duration(0), "%+v", w)
		require.LessOrEqual(t, w.Deadline, max, "%+v", w)
		names = append(names, strings.TrimSuffix(w.Owner+" "+w.Mode, " "))
	}
	return names
}

// snapshot is every key of e with its DUMP, and its PTTL.
func snapshot(t *testing.T, e *env) map[string][2]string {
	t.Helper()
	admin := e.Admin()
	snap := map[string][2]string{}
	for _, k := range e.Keys() {
		d, err := admin.Do(context.Background(), admin.B().Dump().Key(k).Build()).ToString()
		require.NoError(t, err)
		pttl, err := admin.Do(context.Background(), admin.B().Pttl().Key(k).Build()).AsInt64()
		require.NoError(t, err)
		kind := "expires"
		if pttl < 0 {
			kind = "persists"
		}
		snap[k] = [2]string{d, kind}
	}
	return snap
}

// TestState_free: a name never used gives a State with its kind, no holders, no waiters and
// Token 0, and writes nothing; Client.State of it has Kind "".
func TestState_free(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{})
	ctx := context.Background()
	eachStateKind(t, func(t *testing.T, k lockKind) {
		st, err := k.on(c, "free").state(ctx)
		require.NoError(t, err)
		assert.Equal(t, rlock.State{Name: "free", Kind: k.kind}, st)
	})
	st, err := c.State(ctx, "free")
	require.NoError(t, err)
	assert.Equal(t, rlock.State{Name: "free"}, st)
	assert.Empty(t, e.Keys())
}

// TestState_held: one holder with its count, no mode, the lease left (server time) and the
// fencing token; the kind is the value's, and Client.State tells it from the keys (a fair
// mutex nobody waits for shows as a mutex).
func TestState_held(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{WatchdogTimeout: 10 * time.Second})
	ctx := rlock.WithOwner(context.Background(), "a")
	eachStateKind(t, func(t *testing.T, k lockKind) {
		var opts []rlock.MutexOption
		if k.fenced() {
			opts = append(opts, rlock.WithFencing())
		}
		ops := k.on(c, k.kind, opts...)
		take, give := ops.lock, ops.release
		held, err := take(ctx)
		require.NoError(t, err)
		st, err := k.on(c, k.kind, opts...).state(ctx)
		require.NoError(t, err)
		assert.Equal(t, k.kind, st.Kind)
		assert.Equal(t, k.kind, st.Name)
		want := rlock.Holder{Owner: "a", Count: 1}
		switch k.kind {
		case rlock.KindSemaphore:
			want = rlock.Holder{Owner: st.Holders[0].Owner, Count: semUnit}
			assert.NotEqual(t, "a", want.Owner, "a semaphore hold is named by its hold id")
			assert.Equal(t, int64(semPermits), st.Permits)
		case rlock.KindRWMutex, rlock.KindFairRWMutex:
			want.Mode = "write"
		}
		assert.Equal(t, []rlock.Holder{want}, requireLease(t, st.Holders, 10*time.Second))
		assert.Empty(t, st.Waiters)
		if k.kind == rlock.KindSemaphore {
			assert.Zero(t, st.Token)
		} else {
			assert.Equal(t, int64(1), st.Token)
		}

		told, err := c.State(ctx, k.kind)
		require.NoError(t, err)
		switch k.kind {
		case rlock.KindFairMutex:
			told.Kind = k.kind
		case rlock.KindFairRWMutex:
			told.Kind = k.kind
		}
		assert.Equal(t, requireLease(t, st.Holders, 10*time.Second), requireLease(t, told.Holders, 10*time.Second))
		told.Holders = st.Holders // the leases moved on
		assert.Equal(t, st, told)
		require.NoError(t, give(held))
	})
}

// TestState_reentrantAndBothModes: a re-entered hold's count; an owner holding both modes of
// an RWMutex is two holders; a reader's read count.
func TestState_reentrantAndBothModes(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{})
	bg := context.Background()
	eachMutexKind(t, func(t *testing.T, newMutex mutexMaker) {
		m := newMutex(c, "re")
		h1, err := m.Lock(rlock.WithOwner(bg, "a"))
		require.NoError(t, err)
		h2, err := m.Lock(h1)
		require.NoError(t, err)
		st, err := m.State(bg)
		require.NoError(t, err)
		assert.Equal(t, []rlock.Holder{{Owner: "a", Count: 2}}, requireLease(t, st.Holders, 30*time.Second))
		require.NoError(t, m.Unlock(h2))
		require.NoError(t, m.Unlock(h1))
	})
	eachRWKind(t, func(t *testing.T, k lockKind) {
		rw := k.rw(c, "both")
		w, err := rw.Lock(rlock.WithOwner(bg, "w"))
		require.NoError(t, err)
		r1, err := rw.RLock(w)
		require.NoError(t, err)
		r2, err := rw.RLock(r1)
		require.NoError(t, err)
		st, err := rw.State(bg)
		require.NoError(t, err)
		assert.Equal(t, []rlock.Holder{{Owner: "w", Count: 2, Mode: "read"}, {Owner: "w", Count: 1, Mode: "write"}},
			requireLease(t, sortedHolders(st), 30*time.Second))
		require.NoError(t, rw.Unlock(w)) // a downgrade: w reads on
		st, err = rw.State(bg)
		require.NoError(t, err)
		assert.Equal(t, []rlock.Holder{{Owner: "w", Count: 2, Mode: "read"}}, requireLease(t, st.Holders, 30*time.Second))
		require.NoError(t, rw.RUnlock(r2))
		require.NoError(t, rw.RUnlock(r1))
	})
}

// TestState_queue: the waiters of the fair kinds and of the Semaphore in serving order, with
// their deadlines; a plain RWMutex's waiting writer (not the reader held back behind it); a
// plain Mutex lists none.
func TestState_queue(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		c := e.client(rlock.Options{Wait: wait, FairWaitTimeout: 2 * time.Second})
		bg := context.Background()
		// waitFor starts take for owner in the background, and returns a function that
		// cancels it and waits for it to end.
		waitFor := func(owner string, take func(context.Context) (context.Context, error)) func() {
			ctx, cancel := context.WithCancel(rlock.WithOwner(bg, owner))
			done := make(chan error, 1)
			go func() {
				_, err := take(ctx)
				done <- err
			}()
			return func() {
				cancel()
				require.ErrorIs(t, <-done, context.Canceled)
			}
		}
		// queued waits until state lists n waiters, and returns it.
		queued := func(state func(context.Context) (rlock.State, error), n int) rlock.State {
			var st rlock.State
			require.Eventually(t, func() bool {
				var err error
				st, err = state(bg)
				require.NoError(t, err)
				return len(st.Waiters) == n
			}, 5*time.Second, 5*time.Millisecond, "waiters: %+v", st.Waiters)
			return st
		}

		t.Run("mutex", func(t *testing.T) {
			m := c.NewMutex("m")
			held, err := m.Lock(rlock.WithOwner(bg, "a"))
			require.NoError(t, err)
			stop := waitFor("b", m.Lock)
			time.Sleep(100 * time.Millisecond)
			st, err := m.State(bg)
			require.NoError(t, err)
			assert.Empty(t, st.Waiters)
			stop()
			require.NoError(t, m.Unlock(held))
		})
		t.Run("fair_mutex", func(t *testing.T) {
			m := c.NewFairMutex("fm")
			held, err := m.Lock(rlock.WithOwner(bg, "a"))
			require.NoError(t, err)
			stopB := waitFor("b", m.Lock)
			queued(m.State, 1)
			stopC := waitFor("c", m.Lock)
			st := queued(m.State, 2)
			assert.Equal(t, []string{"b", "c"}, waiterNames(t, st, 2*time.Second))
			told, err := c.State(bg, "fm")
			require.NoError(t, err)
			assert.Equal(t, rlock.KindFairMutex, told.Kind)
			assert.Len(t, told.Waiters, 2)
			stopB()
			st = queued(m.State, 1)
			assert.Equal(t, []string{"c"}, waiterNames(t, st, 2*time.Second))
			stopC()
			require.NoError(t, m.Unlock(held))
		})
		t.Run("rw_mutex", func(t *testing.T) {
			rw := c.NewRWMutex("rw")
			r, err := rw.RLock(rlock.WithOwner(bg, "r1"))
			require.NoError(t, err)
			stopW := waitFor("w", rw.Lock)
			queued(rw.State, 1)
			stopR := waitFor("r2", rw.RLock) // held back by the writer; not listed
			time.Sleep(100 * time.Millisecond)
			st := queued(rw.State, 1)
			assert.Equal(t, []string{"w write"}, waiterNames(t, st, 2*time.Second))
			assert.Equal(t, []rlock.Holder{{Owner: "r1", Count: 1, Mode: "read"}}, requireLease(t, st.Holders, 30*time.Second))
			told, err := c.State(bg, "rw")
			require.NoError(t, err)
			assert.Equal(t, rlock.KindRWMutex, told.Kind)
			stopR()
			stopW()
			require.NoError(t, rw.RUnlock(r))
		})
		t.Run("fair_rw_mutex", func(t *testing.T) {
			rw := c.NewFairRWMutex("frw")
			r, err := rw.RLock(rlock.WithOwner(bg, "r1"))
			require.NoError(t, err)
			stopW := waitFor("w", rw.Lock)
			queued(rw.State, 1)
			stopR := waitFor("r2", rw.RLock)
			st := queued(rw.State, 2)
			assert.Equal(t, []string{"w write", "r2 read"}, waiterNames(t, st, 2*time.Second))
			told, err := c.State(bg, "frw")
			require.NoError(t, err)
			assert.Equal(t, rlock.KindFairRWMutex, told.Kind)
			stopR() // first: r2 would go in once w is gone
			stopW()
			require.NoError(t, rw.RUnlock(r))
		})
		t.Run("semaphore", func(t *testing.T) {
			s := c.NewSemaphore("sem", 3)
			held, err := s.Acquire(bg, 2)
			require.NoError(t, err)
			stop3 := waitFor("x", func(ctx context.Context) (context.Context, error) { return s.Acquire(ctx, 3) })
			queued(s.State, 1)
			stop1 := waitFor("y", func(ctx context.Context) (context.Context, error) { return s.Acquire(ctx, 1) })
			st := queued(s.State, 2)
			assert.Equal(t, []int64{3, 1}, []int64{st.Waiters[0].Permits, st.Waiters[1].Permits})
			waiterNames(t, st, 2*time.Second)
			assert.Equal(t, int64(3), st.Permits)
			require.Len(t, st.Holders, 1)
			assert.Equal(t, 2, st.Holders[0].Count)
			stop1() // first: y fits once x is gone
			stop3()
			require.NoError(t, s.Release(held))
		})
	})
}

// TestState_changesNothing: reading the state of a lock with holders and waiters of every
// kind changes no key, value or expiry (the waiters poll every 10s: none runs meanwhile).
func TestState_changesNothing(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{FairWaitTimeout: 30 * time.Second})
	bg := context.Background()
	var stops []func()
	eachStateKind(t, func(t *testing.T, k lockKind) {
		ops := k.on(c, k.kind, rlock.WithFencing())
		take, give := ops.lock, ops.release
		if k.kind == rlock.KindSemaphore {
			ops = k.on(c, k.kind)
			take, give = ops.lock, ops.release
		}
		held, err := take(bg)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(bg)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if h, err := take(ctx); err == nil {
				_ = give(h)
			}
		}()
		stops = append(stops, func() {
			cancel()
			<-done
			require.NoError(t, give(held))
		})
		if k.kind == rlock.KindMutex {
			return
		}
		require.Eventually(t, func() bool {
			st, err := k.on(c, k.kind).state(bg)
			require.NoError(t, err)
			return len(st.Waiters) == 1
		}, 5*time.Second, 5*time.Millisecond)
	})
	// A waiter may still poll once just after joining: a round with such a poll in it is
	// tried again; a State that wrote would change every round.
	same := false
	for round := 0; round < 5 && !same; round++ {
		before := snapshot(t, e)
		for _, k := range kinds {
			if !perKind(k) {
				continue
			}
			_, err := k.on(c, k.kind).state(bg)
			require.NoError(t, err)
			_, err = c.State(bg, k.kind)
			require.NoError(t, err)
		}
		same = assert.ObjectsAreEqual(before, snapshot(t, e))
	}
	assert.True(t, same, "State changed the keys")
	for _, stop := range stops {
		stop()
	}
}

// TestState_semaphoreHoldIDs: each semaphore hold is a holder of its own, named by its hold
// id; releasing one removes that holder only.
func TestState_semaphoreHoldIDs(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{})
	bg := context.Background()
	s := c.NewSemaphore("ids", 4)
	h1, err := s.Acquire(bg, 1)
	require.NoError(t, err)
	h2, err := s.Acquire(bg, 3)
	require.NoError(t, err)
	st, err := s.State(bg)
	require.NoError(t, err)
	require.Len(t, st.Holders, 2)
	byCount := map[int]string{}
	for _, h := range st.Holders {
		byCount[h.Count] = h.Owner
	}
	require.NotEqual(t, byCount[1], byCount[3])
	require.NoError(t, s.Release(h2))
	st, err = s.State(bg)
	require.NoError(t, err)
	assert.Equal(t, []rlock.Holder{{Owner: byCount[1], Count: 1}}, requireLease(t, st.Holders, 30*time.Second))
	require.NoError(t, s.Release(h1))
}

// TestState_grantInFlight: a release that grants the lock to a queued waiter which has not
// learnt of it yet (it spins, and its next poll is seconds away) lists that waiter as a
// holder, not as a waiter.
func TestState_grantInFlight(t *testing.T) {
	e := newEnv(t)
	holderC := e.client(rlock.Options{})
	// Polls every FairWaitTimeout/3 = 10s: the grant stays unseen while the test looks.
	waiterC := e.client(rlock.Options{Wait: rlock.Spin(time.Hour), FairWaitTimeout: 30 * time.Second})
	bg := context.Background()
	// The kinds with direct handoff.
	each(t, queuedKinds, func(t *testing.T, k lockKind) {
		ops := k.on(holderC, "g")
		take, give := ops.lock, ops.release
		held, err := take(rlock.WithOwner(bg, "a"))
		require.NoError(t, err)
		waitTake := k.on(waiterC, "g").lock
		ctx, cancel := context.WithCancel(rlock.WithOwner(bg, "b"))
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := waitTake(ctx)
			done <- err
		}()
		state := k.on(holderC, "g").state
		var st rlock.State
		require.Eventually(t, func() bool {
			st, err = state(bg)
			require.NoError(t, err)
			return len(st.Waiters) == 1
		}, 5*time.Second, 5*time.Millisecond)
		waiter := st.Waiters[0].Owner
		time.Sleep(300 * time.Millisecond) // past any attempt right after joining: the next is 10s away
		require.NoError(t, give(held))
		st, err = state(bg)
		require.NoError(t, err)
		select {
		case err := <-done:
			t.Fatalf("the waiter returned already (%v): no grant in flight to look at", err)
		default:
		}
		assert.Empty(t, st.Waiters)
		require.Len(t, st.Holders, 1)
		assert.Equal(t, waiter, st.Holders[0].Owner)
		assert.LessOrEqual(t, st.Holders[0].Lease, 30*time.Second)
		cancel() // gives the grant back
		require.ErrorIs(t, <-done, context.Canceled)
		st, err = state(bg)
		require.NoError(t, err)
		assert.Empty(t, st.Holders)
	})
}

// TestState_lapsed: a queued waiter that stopped polling (its process SIGSTOPped) is not listed
// once its FairWaitTimeout has passed, while the live waiter behind it is, though the lapsed
// entry is still in Redis (State purges nothing); a hold whose lease ended is not listed
// beside a live one.
func TestState_lapsed(t *testing.T) {
	e := newEnv(t)
	bg := context.Background()
	t.Run("waiters", func(t *testing.T) {
		const fairWait = "2s"
		// Every kind with waiters listed (a plain Mutex lists none).
		each(t, func(k lockKind) bool { return perKind(k) && k.kind != rlock.KindMutex }, func(t *testing.T, k lockKind) {
			t.Parallel()
			name := "lapse-" + k.kind
			// The live waiter joins after the other stopped, and polls every 10s: its join
			// gives the queue keys its expiry, and the lapsed entry stays in Redis till
			// its next poll.
			c := e.client(rlock.Options{FairWaitTimeout: 30 * time.Second})
			ops := k.on(c, name)
			take, give := ops.lock, ops.release
			held, err := take(rlock.WithOwner(bg, "a"))
			require.NoError(t, err)
			state := k.on(c, name).state
			var st rlock.State
			waiters := func(n int) {
				require.Eventually(t, func() bool {
					st, err = state(bg)
					require.NoError(t, err)
					return len(st.Waiters) == n
				}, 5*time.Second, 5*time.Millisecond, "waiters: %+v", st.Waiters)
			}
			child := redistest.StartChild(t, "wait", childEnv(e, name, rlock.PubSub(), "KIND="+k.name, "FAIRWAIT="+fairWait)...)
			child.Expect(t, "waiting")
			waiters(1)
			lapsing := st.Waiters[0].Owner
			require.NoError(t, child.Cmd.Process.Signal(syscall.SIGSTOP)) // polls no more
			done := make(chan error, 1)
			go func() {
				held, err := take(rlock.WithOwner(bg, "c"))
				if err == nil {
					err = give(held)
				}
				done <- err
			}()
			waiters(2)
			require.Equal(t, lapsing, st.Waiters[0].Owner)
			live := st.Waiters[1].Owner // "c" (a semaphore waiter: its hold id)
			require.Eventually(t, func() bool {
				st, err = state(bg)
				require.NoError(t, err)
				return len(st.Waiters) == 1
			}, 5*time.Second, 5*time.Millisecond, "the lapsed waiter is still listed: %+v", st.Waiters)
			assert.Equal(t, live, st.Waiters[0].Owner)
			key := e.LockKey(name) + ":deadlines"
			if k.kind == rlock.KindRWMutex {
				key = e.LockKey(name) + ":writers"
			}
			n, err := e.Do("ZCARD", key).AsInt64()
			require.NoError(t, err)
			assert.Equal(t, int64(2), n, "the lapsed entry is gone from Redis: nothing to show")
			require.NoError(t, child.Cmd.Process.Kill())
			require.NoError(t, give(held))
			require.NoError(t, <-done)
		})
	})
	t.Run("holds", func(t *testing.T) {
		c := e.client(rlock.Options{})
		rw := c.NewRWMutex("lapsed-rw")
		short := c.NewRWMutex("lapsed-rw", rlock.WithLease(200*time.Millisecond))
		s := c.NewSemaphore("lapsed-sem", 3)
		shortS := c.NewSemaphore("lapsed-sem", 3, rlock.WithLease(200*time.Millisecond))
		m := c.NewMutex("lapsed-m", rlock.WithLease(200*time.Millisecond))
		r1, err := short.RLock(rlock.WithOwner(bg, "r1"))
		require.NoError(t, err)
		r2, err := rw.RLock(rlock.WithOwner(bg, "r2"))
		require.NoError(t, err)
		_, err = shortS.Acquire(bg, 1)
		require.NoError(t, err)
		s2, err := s.Acquire(bg, 2)
		require.NoError(t, err)
		_, err = m.Lock(bg)
		require.NoError(t, err)
		time.Sleep(250 * time.Millisecond)
		expired(t, r1)

		st, err := rw.State(bg)
		require.NoError(t, err)
		assert.Equal(t, []rlock.Holder{{Owner: "r2", Count: 1, Mode: "read"}}, requireLease(t, st.Holders, 30*time.Second))
		st, err = s.State(bg)
		require.NoError(t, err)
		require.Len(t, st.Holders, 1)
		assert.Equal(t, 2, st.Holders[0].Count)
		st, err = m.State(bg)
		require.NoError(t, err)
		assert.Empty(t, st.Holders)
		require.NoError(t, rw.RUnlock(r2))
		require.NoError(t, s.Release(s2))
	})
}

// TestState_replica: State runs on a replica (a read-only script) and shows what the primary
// has.
func TestState_replica(t *testing.T) {
	redistest.NeedsRedis(t)
	primary, err := redistest.StartServer(redistest.ServerOptions{})
	require.NoError(t, err)
	t.Cleanup(primary.Stop)
	replica, err := redistest.StartServer(redistest.ServerOptions{})
	require.NoError(t, err)
	t.Cleanup(replica.Stop)
	e := newEnvAt(t, primary.Addr)
	rrc := redistest.NewRueidis(t, replica.Addr)
	bg := context.Background()
	require.NoError(t, rrc.Do(bg, rrc.B().Replicaof().Host("127.0.0.1").Port(mustAtoi(t, primary.Port)).Build()).Error())
	onReplica, err := rlock.New(rrc, rlock.Options{KeyPrefix: e.Prefix})
	require.NoError(t, err)
	defer onReplica.Close()

	c := e.client(rlock.Options{})
	rw := c.NewFairRWMutex("rep", rlock.WithFencing())
	w, err := rw.Lock(rlock.WithOwner(bg, "w"))
	require.NoError(t, err)
	var st rlock.State
	require.Eventually(t, func() bool {
		st, err = onReplica.NewFairRWMutex("rep").State(bg)
		return err == nil && len(st.Holders) == 1
	}, 10*time.Second, 20*time.Millisecond, "state on the replica: %+v, %v", st, err)
	assert.Equal(t, []rlock.Holder{{Owner: "w", Count: 1, Mode: "write"}}, requireLease(t, st.Holders, 30*time.Second))
	assert.Equal(t, int64(1), st.Token)
	role, err := rrc.Do(bg, rrc.B().Role().Build()).ToArray()
	require.NoError(t, err)
	kind, _ := role[0].ToString()
	assert.Equal(t, "slave", kind)
	require.NoError(t, rw.Unlock(w))
	require.Eventually(t, func() bool {
		st, err = onReplica.State(bg, "rep")
		return err == nil && len(st.Holders) == 0
	}, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, e.Do("DEL", e.LockKey("rep")+":fence").Error())
}

// TestState_errors: an invalid name or option, a closed client, and a lock of another kind
// at the name are errors (wrapping ErrInvalid, or ErrClosed) that change nothing.
func TestState_errors(t *testing.T) {
	e := newEnv(t)
	bg := context.Background()
	c := e.client(rlock.Options{})
	eachStateKind(t, func(t *testing.T, k lockKind) {
		_, err := k.on(c, "").state(bg)
		assert.ErrorIs(t, err, rlock.ErrInvalid)
		_, err = k.on(c, "}x").state(bg)
		assert.ErrorIs(t, err, rlock.ErrInvalid)
	})
	_, err := c.State(bg, "")
	assert.ErrorIs(t, err, rlock.ErrInvalid)

	// A name held as one kind, read as another.
	rw := c.NewRWMutex("kind")
	held, err := rw.RLock(bg)
	require.NoError(t, err)
	before := snapshot(t, e)
	for _, state := range []func(context.Context) (rlock.State, error){c.NewMutex("kind").State, c.NewFairMutex("kind").State, c.NewSemaphore("kind", 1).State} {
		_, err = state(bg)
		assert.ErrorIs(t, err, rlock.ErrInvalid)
	}
	assert.Equal(t, before, snapshot(t, e))
	require.NoError(t, rw.RUnlock(held))
	s := c.NewSemaphore("permits", 2)
	sh, err := s.Acquire(bg, 1)
	require.NoError(t, err)
	_, err = c.NewSemaphore("permits", 3).State(bg)
	assert.ErrorIs(t, err, rlock.ErrInvalid)
	_, err = c.NewRWMutex("permits").State(bg)
	assert.ErrorIs(t, err, rlock.ErrInvalid)
	require.NoError(t, s.Release(sh))

	// A key of another type.
	require.NoError(t, e.Do("SET", e.LockKey("str"), "x").Error())
	_, err = c.State(bg, "str")
	assert.ErrorIs(t, err, rlock.ErrInvalid)
	_, err = c.NewMutex("str").State(bg)
	assert.ErrorIs(t, err, rlock.ErrInvalid)
	require.NoError(t, e.Do("DEL", e.LockKey("str")).Error())

	closed, err := rlock.New(e.Rueidis(), rlock.Options{KeyPrefix: e.Prefix})
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	eachStateKind(t, func(t *testing.T, k lockKind) {
		_, err := k.on(closed, "x").state(bg)
		assert.ErrorIs(t, err, rlock.ErrClosed)
	})
	_, err = closed.State(bg, "x")
	assert.ErrorIs(t, err, rlock.ErrClosed)
	var re *rueidis.RedisError
	assert.False(t, errors.As(err, &re))
}
