package rlock_test

// The election (election.go, observe.go) in one process: terms and their handoff, candidates
// that share a value or an owner, stale terms, observers, Run, bad input and kinds mixed on one
// name. Across processes and under faults: election_process_test.go, election_fault_test.go.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
)

// campaign runs Campaign in a new goroutine; its outcome arrives on the returned channel.
func campaign(el *rlock.Election, value string) <-chan acquireResult {
	return goAcquire(func() (context.Context, error) { return el.Campaign(bg, value) })
}

// termOf returns the term that term carries, requiring one.
func termOf(t *testing.T, el *rlock.Election, term context.Context) int64 {
	t.Helper()
	n, ok := el.Term(term)
	require.True(t, ok, "the context carries a term")
	require.Positive(t, n)
	return n
}

// watcher reads an Observe channel on a goroutine of its own, keeping every value it got.
type watcher struct {
	mu   sync.Mutex
	got  []rlock.Leadership
	done chan struct{} // closed when the channel closes
}

func watch(ch <-chan rlock.Leadership) *watcher {
	w := &watcher{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for l := range ch {
			w.mu.Lock()
			w.got = append(w.got, l)
			w.mu.Unlock()
		}
	}()
	return w
}

// values returns what w got so far.
func (w *watcher) values() []rlock.Leadership {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]rlock.Leadership(nil), w.got...)
}

// await waits up to within for the latest value to satisfy ok, and returns it.
func (w *watcher) await(t *testing.T, within time.Duration, what string, ok func(l rlock.Leadership) bool) rlock.Leadership {
	t.Helper()
	var last rlock.Leadership
	require.Eventually(t, func() bool {
		v := w.values()
		if len(v) == 0 {
			return false
		}
		last = v[len(v)-1]
		return ok(last)
	}, within, time.Millisecond, "%s: the observer's latest value: %+v", what, last)
	return last
}

// leads is a condition of await: term leads with value.
func leads(term int64, value string) func(rlock.Leadership) bool {
	return func(l rlock.Leadership) bool { return l.Term == term && l.Value == value && l.Lease > 0 }
}

// vacant is a condition of await: nobody leads.
func vacant(l rlock.Leadership) bool { return l == rlock.Leadership{} }

// monotonic requires the terms of the leaders in got never to go backwards.
func monotonic(t *testing.T, got []rlock.Leadership) {
	t.Helper()
	var last int64
	for i, l := range got {
		if l.Term == 0 {
			continue
		}
		require.GreaterOrEqual(t, l.Term, last, "value %d of %v goes back a term", i, got)
		last = l.Term
	}
}

// TestElection_handoff: a leader's Resign hands the lead to the next candidate in the order
// they began to campaign, directly (no lease runs out), with a larger term each time; State
// shows the leader and the candidates in order; resigned term contexts end with
// context.Canceled; an observer sees every leader and the final vacancy.
func TestElection_handoff(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		c := e.client(rlock.Options{Wait: wait, WatchdogTimeout: 10 * time.Second})
		el := c.NewElection("handoff")
		obs := watch(el.Observe(bg))
		obs.await(t, 2*time.Second, "at first", vacant)

		a, err := el.Campaign(bg, "a")
		require.NoError(t, err)
		ta := termOf(t, el, a)
		obs.await(t, 2*time.Second, "a leads", leads(ta, "a"))

		var ch []<-chan acquireResult
		for _, v := range []string{"b", "c", "d"} {
			ch = append(ch, campaign(el, v))
			require.Eventually(t, func() bool {
				st, err := el.State(bg)
				return err == nil && len(st.Waiters) == len(ch)
			}, 2*time.Second, time.Millisecond)
		}
		st, err := el.State(bg)
		require.NoError(t, err)
		assert.Equal(t, rlock.KindElection, st.Kind)
		assert.Equal(t, ta, st.Token, "the last term")
		require.Len(t, st.Holders, 1)
		assert.Equal(t, 1, st.Holders[0].Count)
		require.Len(t, st.Waiters, 3)

		requireNone(t, 50*time.Millisecond, "candidates behind a", ch...)
		prev, prevCtx := ta, a
		for i, v := range []string{"b", "c", "d"} {
			resigned := time.Now()
			require.NoError(t, el.Resign(prevCtx))
			assert.ErrorIs(t, context.Cause(prevCtx), context.Canceled, "a resigned term ends with context.Canceled")
			h := requireGranted(t, ch[i], 2*time.Second, v+" leads")
			t.Logf("%s led %v after the resign", v, time.Since(resigned).Round(100*time.Microsecond))
			n := termOf(t, el, h)
			assert.Greater(t, n, prev, "terms rise")
			l, err := el.Leader(bg)
			require.NoError(t, err)
			assert.Equal(t, v, l.Value)
			assert.Equal(t, n, l.Term)
			assert.Positive(t, l.Lease)
			obs.await(t, 2*time.Second, v+" leads", leads(n, v))
			requireNone(t, 0, "later candidates", ch[i+1:]...)
			prev, prevCtx = n, h
		}
		require.NoError(t, el.Resign(prevCtx))
		obs.await(t, 2*time.Second, "vacant after the last resign", vacant)
		l, err := el.Leader(bg)
		require.NoError(t, err)
		assert.Equal(t, rlock.Leadership{}, l, "nobody leads")
		st, err = el.State(bg)
		require.NoError(t, err)
		assert.Empty(t, st.Holders)
		assert.Empty(t, st.Waiters)
		assert.Equal(t, prev, st.Token, "the counter keeps the last term")
		monotonic(t, obs.values())
	})
}

// TestElection_twoCandidatesOneIdentity: two Campaigns with the same owner in ctx and the same
// value are two candidates: the second waits, State lists two owners, and the term context
// carries the caller's owner on, not the candidate's.
func TestElection_twoCandidatesOneIdentity(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		c := e.client(rlock.Options{Wait: wait})
		el := c.NewElection("same")
		host := rlock.WithOwner(bg, "host-1")
		a, err := el.Campaign(host, "host-1")
		require.NoError(t, err)
		owner, ok := rlock.Owner(a)
		assert.True(t, ok)
		assert.Equal(t, "host-1", owner, "the term context carries ctx's owner")
		_, err = el.TryCampaign(host, "host-1", 100*time.Millisecond)
		require.ErrorIs(t, err, rlock.ErrNotObtained, "the same owner and value campaign as another candidate")

		b := goAcquire(func() (context.Context, error) { return el.Campaign(host, "host-1") })
		require.Eventually(t, func() bool {
			st, err := el.State(bg)
			return err == nil && len(st.Waiters) == 1
		}, 2*time.Second, time.Millisecond)
		st, err := el.State(bg)
		require.NoError(t, err)
		require.Len(t, st.Holders, 1)
		assert.NotEqual(t, st.Holders[0].Owner, st.Waiters[0].Owner, "two candidates")
		assert.NotEqual(t, "host-1", st.Holders[0].Owner)
		require.NoError(t, el.Resign(a))
		hb := requireGranted(t, b, 2*time.Second, "the second candidate leads")
		assert.Greater(t, termOf(t, el, hb), termOf(t, el, a))
		require.NoError(t, el.Resign(hb))
	})
}

// TestElection_staleTerm: Resign and Proclaim with a term that is not current change nothing:
// ErrNotHeld for a term resigned already (or a context without a term), ErrLockLost for a term
// whose lease ran out (a fixed lease) or that Redis no longer has (deleted under a watchdog
// term, which Proclaim then finds lost and ends). The next leader, its value and its observers
// are untouched.
func TestElection_staleTerm(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		c := e.client(rlock.Options{Wait: wait})
		el := c.NewElection("stale")
		short := c.NewElection("stale", rlock.WithLease(150*time.Millisecond))

		a, err := el.Campaign(bg, "a")
		require.NoError(t, err)
		require.NoError(t, el.Resign(a))
		b, err := el.Campaign(bg, "b")
		require.NoError(t, err)
		tb := termOf(t, el, b)
		obs := watch(el.Observe(bg))
		obs.await(t, 2*time.Second, "b leads", leads(tb, "b"))

		unchanged := func(what string) {
			t.Helper()
			l, err := el.Leader(bg)
			require.NoError(t, err)
			assert.Equal(t, "b", l.Value, what)
			assert.Equal(t, tb, l.Term, what)
			assert.NoError(t, b.Err(), what)
		}
		assert.ErrorIs(t, el.Resign(a), rlock.ErrNotHeld, "resigned already")
		assert.ErrorIs(t, el.Proclaim(a, "a2"), rlock.ErrNotHeld, "resigned already")
		assert.ErrorIs(t, el.Resign(bg), rlock.ErrNotHeld, "no term")
		assert.ErrorIs(t, el.Proclaim(rlock.WithOwner(bg, "x"), "x"), rlock.ErrNotHeld, "no term")
		_, ok := el.Term(bg)
		assert.False(t, ok)
		unchanged("after stale calls")

		// A term whose fixed lease ran out while b... waits: it is lost.
		require.NoError(t, el.Resign(b))
		obs.await(t, 2*time.Second, "vacant", vacant)
		s, err := short.Campaign(bg, "s")
		require.NoError(t, err)
		ts := termOf(t, short, s)
		b, err = el.Campaign(bg, "b") // waits for s's lease
		require.NoError(t, err)
		tb = termOf(t, el, b)
		assert.Greater(t, tb, ts)
		<-s.Done()
		expired(t, s)
		assert.True(t, rlock.Lost(s))
		assert.ErrorIs(t, short.Proclaim(s, "s2"), rlock.ErrLockLost)
		assert.ErrorIs(t, short.Resign(s), rlock.ErrLockLost)
		obs.await(t, 2*time.Second, "b leads again", leads(tb, "b"))
		unchanged("after a lost term's calls")

		// A watchdog term that Redis lost (deleted): Proclaim finds it so and ends it.
		require.NoError(t, el.Resign(b))
		d, err := el.Campaign(bg, "d")
		require.NoError(t, err)
		require.NoError(t, e.Do("DEL", e.LockKey("stale")).Error())
		assert.ErrorIs(t, el.Proclaim(d, "d2"), rlock.ErrLockLost)
		assert.ErrorIs(t, context.Cause(d), rlock.ErrLockLost, "its term context ends lost")
		assert.ErrorIs(t, el.Resign(d), rlock.ErrLockLost)
		l, err := el.Leader(bg)
		require.NoError(t, err)
		assert.Equal(t, rlock.Leadership{}, l)
		for _, v := range obs.values() {
			assert.NotContains(t, []string{"a2", "s2", "d2"}, v.Value, "a stale proclaim reached observers")
		}
		monotonic(t, obs.values())
	})
}

// TestElection_proclaim: Proclaim changes the value that Leader and observers see, not the
// term; a value of 4 KiB is taken, one byte more is ErrInvalid and changes nothing.
func TestElection_proclaim(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{})
	el := c.NewElection("proclaim")
	obs := watch(el.Observe(bg))
	h, err := el.Campaign(bg, "")
	require.NoError(t, err)
	n := termOf(t, el, h)
	obs.await(t, 2*time.Second, "leads with an empty value", leads(n, ""))
	for _, v := range []string{"10.0.0.1:8080", "with spaces and \x00 nul", strings.Repeat("v", 4096)} {
		require.NoError(t, el.Proclaim(h, v))
		obs.await(t, 2*time.Second, "proclaimed", leads(n, v))
		l, err := el.Leader(bg)
		require.NoError(t, err)
		assert.Equal(t, rlock.Leadership{Value: v, Term: n, Lease: l.Lease}, l)
	}
	err = el.Proclaim(h, strings.Repeat("v", 4097))
	require.ErrorIs(t, err, rlock.ErrInvalid)
	l, err := el.Leader(bg)
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("v", 4096), l.Value, "unchanged")
	require.NoError(t, el.Resign(h))
	obs.await(t, 2*time.Second, "vacant", vacant)
	got := obs.values()
	monotonic(t, got)
	for _, v := range got {
		assert.True(t, v.Term == 0 || v.Term == n, "one term: %+v", v)
	}
}

// TestElection_observeLeaseEnd: a leader whose lease runs out publishes nothing; observers see
// the vacancy within a second of its end in Redis (they read again at the lease end they
// learnt). A watchdog leader whose client dies, its lease moved by renewals, is followed by the
// waiting candidate at its lease end, and observers see it. An observer that reads slowly gets
// the latest value.
func TestElection_observeLeaseEnd(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		c := e.client(rlock.Options{Wait: wait})
		el := c.NewElection("leaseend", rlock.WithLease(300*time.Millisecond))
		slow := el.Observe(bg) // read only at the end
		obs := watch(el.Observe(bg))
		obs.await(t, 2*time.Second, "at first", vacant)
		h, err := el.Campaign(bg, "a")
		require.NoError(t, err)
		n := termOf(t, el, h)
		obs.await(t, 2*time.Second, "a leads", leads(n, "a"))
		<-h.Done()
		expired(t, h)
		// The lease in Redis ends no later than the local one plus a millisecond and 0.1%.
		end := time.Now()
		obs.await(t, time.Second+50*time.Millisecond, "vacant within 1s of the lease end", vacant)
		t.Logf("vacancy seen %v after the local lease end", time.Since(end).Round(time.Millisecond))

		// A watchdog leader that died (its client closed without resigning): renewals had
		// moved its lease.
		other := e.client(rlock.Options{Wait: wait, WatchdogTimeout: 600 * time.Millisecond})
		dog := other.NewElection("leaseend")
		d, err := dog.Campaign(bg, "dog")
		require.NoError(t, err)
		nd := termOf(t, dog, d)
		obs.await(t, 2*time.Second, "dog leads", leads(nd, "dog"))
		next := campaign(el, "next")
		time.Sleep(time.Second) // renewed every 200ms
		require.NoError(t, other.Close())
		closed := time.Now()
		hn := requireGranted(t, next, 2*time.Second, "the next candidate leads after the lease end")
		nn := termOf(t, el, hn)
		obs.await(t, 2*time.Second, "next leads", leads(nn, "next"))
		t.Logf("next led %v after the dead leader's client closed", time.Since(closed).Round(time.Millisecond))
		monotonic(t, obs.values())
		latest := <-slow
		for latest.Term != nn {
			select {
			case latest = <-slow:
			case <-time.After(time.Second):
				t.Fatalf("the slow observer's latest value: %+v", latest)
			}
		}
		assert.Equal(t, "next", latest.Value)
		<-hn.Done()
	})
}

// TestElection_run: Run campaigns, leads and campaigns again when lead returns nil (terms
// rise, never overlapping its own), goes on after a lost term, returns lead's error (having
// resigned), ctx's error when ctx ends (resigned), and ErrInvalid or ErrClosed.
func TestElection_run(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		c := e.client(rlock.Options{Wait: wait, WatchdogTimeout: 600 * time.Millisecond})
		el := c.NewElection("run")

		// Two Runs in one process: their leads never overlap, terms rise.
		var leading atomic.Int32
		var mu sync.Mutex
		var terms []int64
		ctx, cancel := context.WithCancel(bg)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range 2 {
			wg.Go(func() {
				errs[i] = el.Run(ctx, "r", func(term context.Context) error {
					if leading.Add(1) != 1 {
						t.Error("two leads at once")
					}
					defer leading.Add(-1)
					n, _ := el.Term(term)
					mu.Lock()
					terms = append(terms, n)
					k := len(terms)
					mu.Unlock()
					if k >= 20 {
						<-term.Done() // until ctx ends
					}
					return nil
				})
			})
		}
		require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(terms) >= 20 }, 10*time.Second,
			time.Millisecond)
		cancel()
		wg.Wait()
		for _, err := range errs {
			assert.ErrorIs(t, err, context.Canceled)
		}
		for i := 1; i < len(terms); i++ {
			assert.Greater(t, terms[i], terms[i-1])
		}
		l, err := el.Leader(bg)
		require.NoError(t, err)
		assert.Equal(t, rlock.Leadership{}, l, "Run resigned when it returned")

		// A lost term: lead returns an error, and Run campaigns again.
		boom := errors.New("boom")
		calls := 0
		err = el.Run(bg, "r", func(term context.Context) error {
			calls++
			switch calls {
			case 1:
				require.NoError(t, e.Do("DEL", e.LockKey("run")).Error())
				<-term.Done() // the watchdog finds it gone
				assert.True(t, rlock.Lost(term))
				return errors.New("lost")
			case 2:
				return boom // while live
			}
			return nil
		})
		assert.ErrorIs(t, err, boom)
		assert.Equal(t, 2, calls)
		l, err = el.Leader(bg)
		require.NoError(t, err)
		assert.Equal(t, rlock.Leadership{}, l, "Run resigned before returning lead's error")

		// Panics resign too.
		assert.Panics(t, func() {
			_ = el.Run(bg, "p", func(context.Context) error { panic("lead") })
		})
		l, err = el.Leader(bg)
		require.NoError(t, err)
		assert.Equal(t, rlock.Leadership{}, l, "Run resigned when lead panicked")

		assert.ErrorIs(t, el.Run(bg, "r", nil), rlock.ErrInvalid)
		assert.ErrorIs(t, el.Run(bg, strings.Repeat("v", 4097), func(context.Context) error { return nil }), rlock.ErrInvalid)
		done, cancel := context.WithCancel(bg)
		cancel()
		assert.ErrorIs(t, el.Run(done, "r", func(context.Context) error { return nil }), context.Canceled)

		// Close ends a Run that waits as a candidate.
		holder, err := el.Campaign(bg, "h")
		require.NoError(t, err)
		other := e.client(rlock.Options{Wait: wait})
		ran := make(chan error, 1)
		go func() { ran <- other.NewElection("run").Run(bg, "o", func(context.Context) error { return nil }) }()
		time.Sleep(50 * time.Millisecond)
		require.NoError(t, other.Close())
		select {
		case err := <-ran:
			assert.ErrorIs(t, err, rlock.ErrClosed)
		case <-time.After(2 * time.Second):
			t.Fatal("Run did not return on Close")
		}
		require.NoError(t, el.Resign(holder))
	})
}

// TestElection_invalid: bad input gets an error wrapping ErrInvalid and changes nothing; an
// election and the other kinds refuse each other's keys; a closed client gives ErrClosed and
// closed Observe channels.
func TestElection_invalid(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{})
	for _, bad := range []*rlock.Election{c.NewElection(""), c.NewElection("}x"), c.NewElection("x", nil),
		c.NewElection("x", rlock.WithLease(-time.Second)), c.NewElection("x", rlock.WithWait(rlock.Spin(0)))} {
		_, err := bad.Campaign(bg, "v")
		assert.ErrorIs(t, err, rlock.ErrInvalid)
		_, err = bad.TryCampaign(bg, "v", 0)
		assert.ErrorIs(t, err, rlock.ErrInvalid)
		_, err = bad.Leader(bg)
		assert.ErrorIs(t, err, rlock.ErrInvalid)
		_, err = bad.State(bg)
		assert.ErrorIs(t, err, rlock.ErrInvalid)
		assert.ErrorIs(t, bad.Resign(bg), rlock.ErrInvalid)
		assert.ErrorIs(t, bad.Proclaim(bg, "v"), rlock.ErrInvalid)
		assert.ErrorIs(t, bad.Run(bg, "v", func(context.Context) error { return nil }), rlock.ErrInvalid)
		_, open := <-bad.Observe(bg)
		assert.False(t, open, "Observe of an invalid election: closed at once")
	}
	el := c.NewElection("el", rlock.WithFencing()) // implied, and accepted
	//lint:ignore SA1012 a nil context is the bad input under test
	_, err := el.Campaign(nil, "v") //nolint:staticcheck
	assert.ErrorIs(t, err, rlock.ErrInvalid)
	_, err = el.Campaign(bg, strings.Repeat("v", 4097))
	assert.ErrorIs(t, err, rlock.ErrInvalid)
	_, err = el.TryCampaign(bg, "v", -time.Second)
	assert.ErrorIs(t, err, rlock.ErrInvalid)
	assert.Empty(t, e.Keys(), "nothing written")

	// Kinds mixed on one name, both ways, with nothing changed.
	h, err := el.Campaign(bg, "v")
	require.NoError(t, err)
	_, err = c.NewMutex("el").TryLock(bg, 0)
	assert.ErrorIs(t, err, rlock.ErrInvalid, "a Mutex on an election")
	_, err = c.NewFairMutex("el").TryLock(bg, 0)
	assert.ErrorIs(t, err, rlock.ErrInvalid, "a fair Mutex on an election")
	_, err = c.NewRWMutex("el").TryRLock(bg, 0)
	assert.ErrorIs(t, err, rlock.ErrInvalid, "an RWMutex on an election")
	_, err = c.NewSemaphore("el", 2).TryAcquire(bg, 1, 0)
	assert.ErrorIs(t, err, rlock.ErrInvalid, "a Semaphore on an election")
	st, err := c.State(bg, "el")
	require.NoError(t, err)
	assert.Equal(t, rlock.KindElection, st.Kind, "Client.State tells an election from its keys")
	require.Len(t, st.Holders, 1)
	require.NoError(t, el.Resign(h))

	m := c.NewMutex("mx")
	mh, err := m.Lock(bg)
	require.NoError(t, err)
	other := c.NewElection("mx")
	_, err = other.TryCampaign(bg, "v", 0)
	assert.ErrorIs(t, err, rlock.ErrInvalid, "an election on a Mutex")
	_, err = other.Campaign(bg, "v")
	assert.ErrorIs(t, err, rlock.ErrInvalid, "an election on a Mutex")
	_, err = other.Leader(bg)
	assert.ErrorIs(t, err, rlock.ErrInvalid)
	_, err = other.State(bg)
	assert.ErrorIs(t, err, rlock.ErrInvalid)
	n, err := m.HoldCount(mh)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the Mutex is untouched")
	require.NoError(t, m.Unlock(mh))
	require.NoError(t, e.Do("SET", e.LockKey("str"), "x").Error())
	_, err = c.NewElection("str").TryCampaign(bg, "v", 0)
	assert.ErrorIs(t, err, rlock.ErrInvalid, "a string at the name")
	require.NoError(t, e.Do("DEL", e.LockKey("str")).Error())

	// Closed.
	cl := e.client(rlock.Options{})
	ce := cl.NewElection("closed")
	obs := ce.Observe(bg)
	<-obs
	require.NoError(t, cl.Close())
	for range obs {
	}
	_, err = ce.Campaign(bg, "v")
	assert.ErrorIs(t, err, rlock.ErrClosed)
	_, err = ce.Leader(bg)
	assert.ErrorIs(t, err, rlock.ErrClosed)
	_, open := <-ce.Observe(bg)
	assert.False(t, open, "Observe after Close: closed at once")
}

// TestElection_observeCancel: an Observe channel closes when its context ends, and leaves no
// subscription; observers of one name share one.
func TestElection_observeCancel(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{})
	el := c.NewElection("cancel")
	ctx1, cancel1 := context.WithCancel(bg)
	ctx2, cancel2 := context.WithTimeout(bg, 300*time.Millisecond)
	defer cancel2()
	o1, o2 := watch(el.Observe(ctx1)), watch(el.Observe(ctx2))
	o1.await(t, 2*time.Second, "first", vacant)
	o2.await(t, 2*time.Second, "second", vacant)
	require.Eventually(t, func() bool { return len(e.Channels()) == 1 }, 2*time.Second, time.Millisecond,
		"one subscription: %v", e.Channels())
	select {
	case <-o2.done:
	case <-time.After(2 * time.Second):
		t.Fatal("the channel stayed open past its context's deadline")
	}
	cancel1()
	select {
	case <-o1.done:
	case <-time.After(2 * time.Second):
		t.Fatal("the channel stayed open after its context was cancelled")
	}
}
