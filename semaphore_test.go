package rlock_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// awaitSemQueue waits until n waiters are queued for the semaphore called name.
func (e *env) awaitSemQueue(name string, n int) {
	e.T.Helper()
	require.Eventually(e.T, func() bool { return len(e.kindQueue(name)) == n }, 5*time.Second, time.Millisecond,
		"queue of %s never reached %d", name, n)
}

// requireAvailable requires s to have want permits available.
func requireAvailable(t *testing.T, s *rlock.Semaphore, want int64, msg string) {
	t.Helper()
	n, err := s.Available(bg)
	require.NoError(t, err, msg)
	require.Equal(t, want, n, msg)
}

// TestSemaphore_neverMoreThanPermits: 9 goroutines on 3 clients take 1 or 2 of 3 permits in a
// loop; a counter of permits out never exceeds 3.
func TestSemaphore_neverMoreThanPermits(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		const permits, clients, perClient, iters = 3, 3, 3, 20
		var out, most, violations, acquired atomic.Int64
		var wg sync.WaitGroup
		for range clients {
			s := e.client(rlock.Options{Wait: wait}).NewSemaphore("count", permits)
			for range perClient {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range iters {
						n := 1 + rand.Int64N(2)
						h, err := s.Acquire(bg, n)
						if !assert.NoError(t, err) {
							return
						}
						now := out.Add(n)
						if now > permits {
							violations.Add(1)
						}
						for {
							old := most.Load()
							if now <= old || most.CompareAndSwap(old, now) {
								break
							}
						}
						acquired.Add(1)
						time.Sleep(300 * time.Microsecond)
						out.Add(-n)
						if !assert.NoError(t, s.Release(h)) {
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		assert.Zero(t, violations.Load(), "more than %d permits were out", permits)
		assert.EqualValues(t, clients*perClient*iters, acquired.Load())
		t.Logf("at most %d of %d permits out at once", most.Load(), permits)
		requireAvailable(t, e.client(rlock.Options{}).NewSemaphore("count", permits), permits, "all permits back")
	})
}

func TestSemaphore_weightedHolds(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{})
	s := c.NewSemaphore("weighted", 5)
	assert.Equal(t, "weighted", s.Name())
	assert.EqualValues(t, 5, s.Permits())
	requireAvailable(t, s, 5, "unused")

	h1, err := s.Acquire(bg, 3)
	require.NoError(t, err)
	requireAvailable(t, s, 2, "3 of 5 out")
	_, err = s.TryAcquire(bg, 3, 0)
	require.ErrorIs(t, err, rlock.ErrNotObtained, "3 more do not fit")
	_, err = s.TryAcquire(bg, 3, 100*time.Millisecond)
	require.ErrorIs(t, err, rlock.ErrNotObtained, "3 more do not fit")
	h2, err := s.TryAcquire(bg, 2, 0)
	require.NoError(t, err, "2 more fit")
	requireAvailable(t, s, 0, "all out")
	other := c.NewSemaphore("weighted", 5)
	requireAvailable(t, other, 0, "seen through another Semaphore value")

	require.NoError(t, s.Release(h1))
	require.ErrorIs(t, h1.Err(), context.Canceled)
	requireAvailable(t, s, 3, "exactly the 3 of h1 came back")
	require.NoError(t, h2.Err())
	h3, err := s.TryAcquire(bg, 3, 0)
	require.NoError(t, err)
	require.NoError(t, s.Release(h3))
	require.NoError(t, s.Release(h2))
	requireAvailable(t, s, 5, "all back")
	assert.Empty(t, e.Keys(), "nothing held, nobody waits: no keys")
}

// TestSemaphore_release: every Acquire is a new hold, whatever owner the context carries, and
// Release gives back the hold its context carries, once.
func TestSemaphore_release(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{})
	s := c.NewSemaphore("rel", 5)

	o := rlock.WithOwner(bg, "o")
	a, err := s.Acquire(o, 2)
	require.NoError(t, err)
	owner, ok := rlock.Owner(a)
	assert.True(t, ok)
	assert.Equal(t, "o", owner, "a hold context keeps the owner its parent carries")
	b, err := s.Acquire(a, 2)
	require.NoError(t, err, "an Acquire through a hold context is a new hold")
	requireAvailable(t, s, 1, "two holds of 2")
	b2, err := s.Acquire(o, 1)
	require.NoError(t, err, "the same owner again: a new hold")
	requireAvailable(t, s, 0, "three holds")

	require.NoError(t, s.Release(b))
	require.ErrorIs(t, b.Err(), context.Canceled)
	require.NoError(t, a.Err(), "releasing the inner hold leaves the outer")
	requireAvailable(t, s, 2, "b's 2 came back")
	require.ErrorIs(t, s.Release(b), rlock.ErrNotHeld, "a second Release")
	requireAvailable(t, s, 2, "returned once")
	require.ErrorIs(t, s.Release(o), rlock.ErrNotHeld, "a context with an owner but no hold")
	require.ErrorIs(t, s.Release(bg), rlock.ErrNotHeld, "a context with nothing")
	require.ErrorIs(t, c.NewSemaphore("another", 5).Release(a), rlock.ErrNotHeld, "a hold of another semaphore")
	requireAvailable(t, s, 2, "nothing changed")

	require.NoError(t, s.Release(b2))
	require.NoError(t, s.Release(a))
	require.ErrorIs(t, a.Err(), context.Canceled)
	requireAvailable(t, s, 5, "all back")

	h, err := s.Acquire(bg, 1)
	require.NoError(t, err)
	_, ok = rlock.Owner(h)
	assert.False(t, ok, "a semaphore hold does not make the context carry an owner")
	derived, cancel := context.WithCancel(h)
	defer cancel()
	require.NoError(t, s.Release(derived), "a context derived from the hold context releases it")
	require.ErrorIs(t, h.Err(), context.Canceled)
	require.ErrorIs(t, s.Release(h), rlock.ErrNotHeld)
	assert.Empty(t, e.Keys())
}

func TestSemaphore_badInput(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{})
	s := c.NewSemaphore("inv", 3)
	for _, n := range []int64{0, -1, 4} {
		_, err := s.Acquire(soon(t, bg), n)
		assert.ErrorIs(t, err, rlock.ErrInvalid, "Acquire(%d) of 3 permits", n)
		_, err = s.TryAcquire(bg, n, 0)
		assert.ErrorIs(t, err, rlock.ErrInvalid, "TryAcquire(%d) of 3 permits", n)
		_, err = s.TryAcquire(bg, n, time.Second)
		assert.ErrorIs(t, err, rlock.ErrInvalid, "TryAcquire(%d) of 3 permits", n)
	}
	_, err := s.TryAcquire(bg, 1, -time.Second)
	assert.ErrorIs(t, err, rlock.ErrInvalid, "negative wait")
	//lint:ignore SA1012 a nil context is the bad input under test
	_, err = s.Acquire(nil, 1) //nolint:staticcheck
	assert.ErrorIs(t, err, rlock.ErrInvalid)

	for _, tc := range []struct {
		name string
		s    *rlock.Semaphore
	}{
		{"zero permits", c.NewSemaphore("z", 0)},
		{"negative permits", c.NewSemaphore("z", -1)},
		{"fencing", c.NewSemaphore("f", 2, rlock.WithFencing())},
		{"zero lease", c.NewSemaphore("l", 2, rlock.WithLease(0))},
		{"zero spin", c.NewSemaphore("sp", 2, rlock.WithWait(rlock.Spin(0)))},
		{"empty name", c.NewSemaphore("", 2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := map[string]error{}
			_, calls["Acquire"] = tc.s.Acquire(soon(t, bg), 1)
			_, calls["TryAcquire"] = tc.s.TryAcquire(bg, 1, 0)
			_, calls["TryAcquire wait"] = tc.s.TryAcquire(bg, 1, time.Second)
			_, calls["Available"] = tc.s.Available(bg)
			calls["Release"] = tc.s.Release(rlock.WithOwner(bg, "o"))
			for call, err := range calls {
				assert.ErrorIs(t, err, rlock.ErrInvalid, call)
			}
		})
	}
	assert.Empty(t, e.Keys(), "failed validation writes nothing")

	t.Run("wrong key type", func(t *testing.T) {
		key := e.kindBase("str")
		require.NoError(t, e.Do("SET", key, "not a semaphore").Error())
		t.Cleanup(func() { e.Do("DEL", key) })
		m := c.NewSemaphore("str", 2)
		calls := map[string]error{}
		_, calls["Acquire"] = m.TryAcquire(bg, 1, 50*time.Millisecond)
		_, calls["Available"] = m.Available(bg)
		for call, err := range calls {
			assert.ErrorIs(t, err, rlock.ErrInvalid, call)
		}
		assert.Equal(t, []string{key}, e.Keys(), "the foreign key is untouched")
	})
}

// TestSemaphore_permitsMismatch: while a semaphore is in use, a client that believes in another
// permit count gets ErrInvalid and changes nothing; once it is unused, the next user's count
// is the stored one.
func TestSemaphore_permitsMismatch(t *testing.T) {
	e := newEnv(t)
	three := e.client(rlock.Options{}).NewSemaphore("mm", 3)
	four := e.client(rlock.Options{}).NewSemaphore("mm", 4)
	h, err := three.Acquire(bg, 1)
	require.NoError(t, err)
	before := e.lockState("mm")

	ctx, cancel := context.WithTimeout(bg, 2*time.Second)
	defer cancel()
	_, err = four.Acquire(ctx, 1)
	assert.ErrorIs(t, err, rlock.ErrInvalid, "Acquire")
	_, err = four.TryAcquire(bg, 1, 0)
	assert.ErrorIs(t, err, rlock.ErrInvalid, "TryAcquire")
	_, err = four.TryAcquire(bg, 4, time.Second)
	assert.ErrorIs(t, err, rlock.ErrInvalid, "TryAcquire with a wait")
	_, err = four.Available(bg)
	assert.ErrorIs(t, err, rlock.ErrInvalid, "Available")
	assert.Equal(t, before, e.lockState("mm"), "nothing changed")
	requireAvailable(t, three, 2, "the right count still works")
	require.NoError(t, three.Release(h))
	assert.Empty(t, e.Keys())

	h, err = four.Acquire(bg, 4)
	require.NoError(t, err, "unused, the semaphore takes the new count")
	_, err = three.Available(bg)
	assert.ErrorIs(t, err, rlock.ErrInvalid, "now the old count is the wrong one")
	require.NoError(t, four.Release(h))
}

// TestSemaphore_arrivalOrder: a request for 3 of 4 permits, queued before three requests for 1,
// is served first: freed permits wait for it rather than go to the small requests behind it.
func TestSemaphore_arrivalOrder(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		s := e.client(rlock.Options{Wait: wait}).NewSemaphore("fifo", 4)
		s2 := e.client(rlock.Options{Wait: wait}).NewSemaphore("fifo", 4)
		var holds []context.Context
		for range 4 {
			h, err := s.Acquire(bg, 1)
			require.NoError(t, err)
			holds = append(holds, h)
		}
		big := goAcquire(func() (context.Context, error) { return s2.Acquire(bg, 3) })
		e.awaitSemQueue("fifo", 1)
		var small []<-chan acquireResult
		for i := range 3 {
			si := []*rlock.Semaphore{s, s2}[i%2]
			small = append(small, goAcquire(func() (context.Context, error) { return si.Acquire(bg, 1) }))
			e.awaitSemQueue("fifo", 2+i)
		}

		require.NoError(t, s.Release(holds[0]))
		requireAvailable(t, s, 1, "one free")
		requireNone(t, 150*time.Millisecond, "small requests behind the big one", small...)
		_, err := s.TryAcquire(bg, 1, 0)
		require.ErrorIs(t, err, rlock.ErrNotObtained, "a single attempt does not jump the queue")
		require.NoError(t, s.Release(holds[1]))
		requireNone(t, 100*time.Millisecond, "two free, the big request needs three", append(small, big)...)
		require.NoError(t, s.Release(holds[2]))
		b := requireGranted(t, big, 5*time.Second, "the big request")
		requireAvailable(t, s, 0, "3 + 1 out")
		requireNone(t, 100*time.Millisecond, "small requests while all permits are out", small...)

		require.NoError(t, s2.Release(b))
		for i, ch := range small {
			h := requireGranted(t, ch, 5*time.Second, "small request")
			require.NoError(t, []*rlock.Semaphore{s, s2}[i%2].Release(h))
		}
		require.NoError(t, s.Release(holds[3]))
		assert.Empty(t, e.kindQueue("fifo"))
	})
}

// TestSemaphore_bigRequestNotStarved: 8 goroutines take 1 of 4 permits in a loop, so some are
// always out; a request for all 4 is still served within a bounded time.
func TestSemaphore_bigRequestNotStarved(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		const permits, loopers, rounds = 4, 8, 3
		var grants atomic.Int64
		var grantTimes sync.Map // grant number -> time.Time
		stopCtx, stop := context.WithCancel(bg)
		defer stop()
		sems := []*rlock.Semaphore{
			e.client(rlock.Options{Wait: wait}).NewSemaphore("big", permits),
			e.client(rlock.Options{Wait: wait}).NewSemaphore("big", permits),
		}
		var wg sync.WaitGroup
		for i := range loopers {
			s := sems[i%2]
			wg.Add(1)
			go func() {
				defer wg.Done()
				for stopCtx.Err() == nil {
					h, err := s.Acquire(stopCtx, 1)
					if err != nil {
						assert.ErrorIs(t, err, context.Canceled)
						return
					}
					grantTimes.Store(grants.Add(1), time.Now())
					time.Sleep(time.Millisecond)
					assert.NoError(t, s.Release(h))
				}
			}()
		}
		require.Eventually(t, func() bool { return grants.Load() >= 5*loopers }, 10*time.Second, time.Millisecond, "loopers warm up")

		big := e.client(rlock.Options{Wait: wait}).NewSemaphore("big", permits)
		var worst time.Duration
		var worstDuring int
		for range rounds {
			time.Sleep(30 * time.Millisecond)
			start := time.Now()
			h, err := big.TryAcquire(bg, permits, 10*time.Second)
			acquired := time.Now()
			require.NoError(t, err, "the big request starved for 10s")
			during := 0
			grantTimes.Range(func(_, v any) bool {
				if at := v.(time.Time); at.After(start) && at.Before(acquired) {
					during++
				}
				return true
			})
			time.Sleep(2 * time.Millisecond)
			require.NoError(t, big.Release(h))
			worst = max(worst, acquired.Sub(start))
			worstDuring = max(worstDuring, during)
		}
		stop()
		wg.Wait()
		t.Logf("MEASURE semaphore-big-request: %s: a request for all %d permits among %d looping 1-permit holders "+
			"waited at most %v over %d rounds; at most %d small grants while it waited", wait, permits, loopers, worst, rounds, worstDuring)
		assert.Less(t, worst, 3*time.Second, "served within a bounded time")
		assert.LessOrEqual(t, worstDuring, 4*loopers, "overtaken by a bounded number of small requests")
	})
}

// TestSemaphore_TryAcquireNeverJumpsTheQueue: with a permit free but a larger request queued,
// TryAcquire of one permit fails, and its timed-out wait leaves no queue entry.
func TestSemaphore_TryAcquireNeverJumpsTheQueue(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		s := e.client(rlock.Options{Wait: wait}).NewSemaphore("nojump", 2)
		h1, err := s.Acquire(bg, 1)
		require.NoError(t, err)
		h2, err := s.Acquire(bg, 1)
		require.NoError(t, err)
		waiter := goAcquire(func() (context.Context, error) { return s.Acquire(bg, 2) })
		e.awaitSemQueue("nojump", 1)
		require.NoError(t, s.Release(h1))
		requireAvailable(t, s, 1, "one free")

		_, err = s.TryAcquire(bg, 1, 0)
		require.ErrorIs(t, err, rlock.ErrNotObtained, "TryAcquire(0) jumped the queue")
		_, err = s.TryAcquire(bg, 1, 100*time.Millisecond)
		require.ErrorIs(t, err, rlock.ErrNotObtained, "TryAcquire with a wait jumped the queue")
		assert.Len(t, e.kindQueue("nojump"), 1, "the timed-out TryAcquire left its queue entry")
		n, err := e.Do("ZCARD", e.kindBase("nojump")+":deadlines").AsInt64()
		require.NoError(t, err)
		assert.EqualValues(t, 1, n, "and its deadline")
		requireAvailable(t, s, 1, "still one free")

		require.NoError(t, s.Release(h2))
		h := requireGranted(t, waiter, 5*time.Second, "the queued request")
		require.NoError(t, s.Release(h))
	})
}

func TestSemaphore_WithLease(t *testing.T) {
	strategiesInParallel(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		const lease = 300 * time.Millisecond
		s := e.client(rlock.Options{Wait: wait}).NewSemaphore("lease", 2, rlock.WithLease(lease))
		start := time.Now()
		h, err := s.Acquire(bg, 2)
		require.NoError(t, err)
		dl, ok := h.Deadline()
		require.True(t, ok, "a fixed lease sets the hold context's deadline")
		assert.WithinDuration(t, start.Add(lease), dl, 50*time.Millisecond)

		// Nobody releases; the permits come back when the lease ends.
		w, err := s.TryAcquire(bg, 1, 3*time.Second)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, time.Since(start), lease-50*time.Millisecond)
		expired(t, h)
		require.ErrorIs(t, h.Err(), context.DeadlineExceeded)
		require.ErrorIs(t, context.Cause(h), rlock.ErrLockLost)
		assert.True(t, rlock.Lost(h))
		requireAvailable(t, s, 1, "the expired hold's 2 came back, 1 is out")
		require.ErrorIs(t, s.Release(h), rlock.ErrLockLost, "the holder learns its section may have overlapped")
		requireAvailable(t, s, 1, "a late Release returns nothing")
		require.NoError(t, s.Release(w))

		// Expiry with nobody waiting or touching the semaphore: its keys go too.
		_, err = s.Acquire(bg, 1)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return len(e.Keys()) == 0 }, 3*time.Second, 10*time.Millisecond,
			"keys of an expired hold go by themselves")
	})
}

// TestSemaphore_deadHolderReturnsPermits: a holder whose client stops (Close: no renewals)
// gives its permits back when its lease ends.
func TestSemaphore_deadHolderReturnsPermits(t *testing.T) {
	strategiesInParallel(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		const timeout = 600 * time.Millisecond
		dying := e.client(rlock.Options{WatchdogTimeout: timeout})
		h, err := dying.NewSemaphore("dead", 2).Acquire(bg, 2)
		require.NoError(t, err)
		s := e.client(rlock.Options{Wait: wait, WatchdogTimeout: timeout}).NewSemaphore("dead", 2)
		require.NoError(t, dying.Close())
		require.ErrorIs(t, context.Cause(h), rlock.ErrClosed)
		closed := time.Now()
		got, err := s.TryAcquire(bg, 1, 5*timeout)
		require.NoError(t, err)
		d := time.Since(closed)
		t.Logf("the dead holder's permits came back %v after its client stopped (lease %v)", d, timeout)
		assert.Less(t, d, timeout+timeout/2, "within a lease")
		requireAvailable(t, s, 1, "all of the dead hold's permits came back")
		require.NoError(t, s.Release(got))
	})
}

func TestSemaphore_lossCancelsHold(t *testing.T) {
	e := newEnv(t)
	const timeout = 900 * time.Millisecond
	s := e.client(rlock.Options{WatchdogTimeout: timeout}).NewSemaphore("loss", 3)
	h, err := s.Acquire(bg, 2)
	require.NoError(t, err)
	keys, err := e.Do("KEYS", e.kindBase("loss")+"*").AsStrSlice()
	require.NoError(t, err)
	require.NotEmpty(t, keys)
	require.NoError(t, e.Do(append([]string{"DEL"}, keys...)...).Error())
	start := time.Now()
	require.ErrorIs(t, causeOf(h, 2*timeout), rlock.ErrLockLost)
	t.Logf("the holder learned of the loss after %v", time.Since(start))
	assert.True(t, rlock.Lost(h))
	assert.ErrorIs(t, s.Release(h), rlock.ErrLockLost)
	requireAvailable(t, s, 3, "nothing held")
}

func TestSemaphore_Close(t *testing.T) {
	strategiesInParallel(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		e.Dirty = true // checked below: the hold expires by itself
		const timeout = 500 * time.Millisecond
		c := e.client(rlock.Options{Wait: wait, WatchdogTimeout: timeout, FairWaitTimeout: timeout})
		s := c.NewSemaphore("close", 2)
		h, err := s.Acquire(bg, 2)
		require.NoError(t, err)
		waiting := goAcquire(func() (context.Context, error) { return s.Acquire(bg, 1) })
		e.awaitSemQueue("close", 1)

		require.NoError(t, c.Close())
		res := awaitResult(t, waiting, time.Second, "waiting Acquire woken by Close")
		require.ErrorIs(t, res.err, rlock.ErrClosed)
		require.ErrorIs(t, context.Cause(h), rlock.ErrClosed)
		calls := map[string]error{}
		_, calls["Acquire"] = s.Acquire(bg, 1)
		_, calls["TryAcquire"] = s.TryAcquire(bg, 1, time.Second)
		calls["Release"] = s.Release(h)
		_, calls["Available"] = s.Available(bg)
		_, calls["new semaphore"] = c.NewSemaphore("another", 1).Acquire(bg, 1)
		for call, err := range calls {
			assert.ErrorIs(t, err, rlock.ErrClosed, call)
		}

		requireAvailable(t, e.client(rlock.Options{}).NewSemaphore("close", 2), 0, "Close does not release holds")
		assert.Empty(t, e.Channels(), "Close drops the subscriptions")
		assert.Eventually(t, func() bool { return len(e.Keys()) == 0 }, 6*timeout, 10*time.Millisecond,
			"the closed client's keys expire: %v", e.Keys())
	})
}

// TestSemaphore_waitEndsLeaveNothing: timed-out and cancelled waits leave no queue entry,
// deadline or subscription, and hold back nobody afterwards.
func TestSemaphore_waitEndsLeaveNothing(t *testing.T) {
	strategiesInParallel(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		s := e.client(rlock.Options{Wait: wait}).NewSemaphore("busy", 1)
		h, err := s.Acquire(bg, 1)
		require.NoError(t, err)
		_, err = s.TryAcquire(bg, 1, 0)
		require.ErrorIs(t, err, rlock.ErrNotObtained)
		start := time.Now()
		_, err = s.TryAcquire(bg, 1, 150*time.Millisecond)
		require.ErrorIs(t, err, rlock.ErrNotObtained)
		assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)
		ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
		defer cancel()
		_, err = s.Acquire(ctx, 1)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		cctx, ccancel := context.WithCancel(bg)
		cancelled := goAcquire(func() (context.Context, error) { return s.Acquire(cctx, 1) })
		e.awaitSemQueue("busy", 1)
		ccancel()
		require.ErrorIs(t, awaitResult(t, cancelled, 2*time.Second, "cancelled Acquire").err, context.Canceled)

		require.Eventually(t, func() bool { return len(e.Channels()) == 0 }, keptFor, 5*time.Millisecond,
			"the subscription is dropped within its linger after the last waiter leaves")
		for _, key := range e.Keys() {
			assert.NotRegexp(t, `:(queue|deadlines)$`, key, "a waiter's entry is left behind")
		}
		requireAvailable(t, s, 0, "the hold is untouched")
		require.NoError(t, s.Release(h))
		h, err = s.TryAcquire(bg, 1, 0)
		require.NoError(t, err, "nobody left in the queue holds back a single attempt")
		require.NoError(t, s.Release(h))
	})
}

// TestSemaphore_giveUpWakesNext: a queue head that gives up wakes the waiter behind it at once,
// not at its next poll (FairWaitTimeout, 5s by default).
func TestSemaphore_giveUpWakesNext(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		s := e.client(rlock.Options{Wait: wait}).NewSemaphore("giveup", 2)
		s2 := e.client(rlock.Options{Wait: wait}).NewSemaphore("giveup", 2)
		h, err := s.Acquire(bg, 1)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		big := goAcquire(func() (context.Context, error) { return s2.Acquire(ctx, 2) })
		e.awaitSemQueue("giveup", 1)
		small := goAcquire(func() (context.Context, error) { return s2.Acquire(bg, 1) })
		e.awaitSemQueue("giveup", 2)
		requireNone(t, 100*time.Millisecond, "a small request behind a big one", small)

		cancel()
		gaveUp := awaitResult(t, big, 2*time.Second, "the cancelled request")
		require.ErrorIs(t, gaveUp.err, context.Canceled)
		got := requireGranted(t, small, 5*time.Second, "the request behind it")
		d := time.Since(gaveUp.at)
		t.Logf("the next request got in %v after the head gave up", d)
		assert.Less(t, d, time.Second, "woken, not left to its next poll")
		require.NoError(t, s2.Release(got))
		require.NoError(t, s.Release(h))
	})
}

func TestSemaphore_holdContext(t *testing.T) {
	e := newEnv(t)
	const timeout = 400 * time.Millisecond
	s := e.client(rlock.Options{WatchdogTimeout: timeout}).NewSemaphore("hctx", 3)
	type key struct{}
	parent, cancel := context.WithCancel(context.WithValue(bg, key{}, "v"))
	h, err := s.Acquire(parent, 2)
	require.NoError(t, err)
	assert.Equal(t, "v", h.Value(key{}), "the hold context derives from ctx")
	_, hasDeadline := h.Deadline()
	assert.False(t, hasDeadline, "a watchdog hold has no deadline")
	cancel()
	require.ErrorIs(t, h.Err(), context.Canceled)
	time.Sleep(2*timeout + timeout/2) // past the first leases: the watchdog still renews
	requireAvailable(t, s, 1, "cancelling the Acquire context after it returned does not release the hold")
	require.NoError(t, s.Release(h), "a cancelled hold context can still release")
	requireAvailable(t, s, 3, "released")

	done, stop := context.WithCancel(bg)
	stop()
	_, err = s.Acquire(done, 1)
	require.ErrorIs(t, err, context.Canceled)
	_, err = s.TryAcquire(done, 1, time.Second)
	require.ErrorIs(t, err, context.Canceled)
	requireAvailable(t, s, 3, "a done context acquires nothing")
	assert.Empty(t, e.Keys())
}

// TestSemaphore_ForceRelease: ForceRelease deletes every hold, wakes the first waiter (which
// keeps its place and gets its permits at once), and holders learn of the loss at their next
// renewal; a semaphore nobody holds reports false and changes nothing.
func TestSemaphore_ForceRelease(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		holder := e.client(rlock.Options{WatchdogTimeout: 300 * time.Millisecond, Wait: wait})
		other := e.client(rlock.Options{WatchdogTimeout: 300 * time.Millisecond, Wait: wait,
			FairWaitTimeout: 30 * time.Second})
		ctx := context.Background()
		h, err := holder.NewSemaphore("s", 2).Acquire(ctx, 2)
		require.NoError(t, err)
		got := make(chan context.Context, 1)
		go func() {
			w, err := other.NewSemaphore("s", 2).Acquire(ctx, 1)
			assert.NoError(t, err)
			got <- w
		}()
		require.Eventually(t, func() bool {
			n, err := e.Do("LLEN", e.Prefix+":{s}:queue").AsInt64()
			return err == nil && n == 1
		}, 3*time.Second, time.Millisecond, "the waiter queued")
		start := time.Now()
		ok, err := other.NewSemaphore("s", 2).ForceRelease(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		var w context.Context
		select {
		case w = <-got:
		case <-time.After(5 * time.Second):
			t.Fatal("the waiter did not get its permit after ForceRelease")
		}
		t.Logf("waiter got its permit %v after ForceRelease", time.Since(start))
		require.Eventually(t, func() bool { return rlock.Lost(h) }, 2*time.Second, time.Millisecond,
			"the holder learns of the loss at its next renewal")
		require.ErrorIs(t, holder.NewSemaphore("s", 2).Release(h), rlock.ErrLockLost)
		n, err := other.NewSemaphore("s", 2).Available(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		require.NoError(t, other.NewSemaphore("s", 2).Release(w))
		ok, err = other.NewSemaphore("s", 2).ForceRelease(ctx)
		require.NoError(t, err)
		require.False(t, ok)
		_, err = other.NewMutex("s").ForceUnlock(ctx)
		require.NoError(t, err, "nothing left to be of another kind")
	})
}
