package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// obsKey marks the contexts a recorder's Start returns.
type obsKey struct{}

// obsRecord is one call of an Observer method.
type obsRecord struct {
	method  string // "start", "end" or "event"
	op      rlock.Op
	lock    rlock.LockInfo
	outcome rlock.Outcome
	took    time.Duration
	err     error
	ev      rlock.Event
}

func (r obsRecord) String() string {
	switch r.method {
	case "event":
		if r.ev.Type == rlock.EventHoldEnded {
			return fmt.Sprintf("event %v %s %v", r.ev.Type, r.ev.Lock.Name, r.ev.Outcome)
		}
		return fmt.Sprintf("event %v %s", r.ev.Type, r.ev.Lock.Name)
	case "end":
		return fmt.Sprintf("end %v %s %v", r.op, r.lock.Name, r.outcome)
	}
	return fmt.Sprintf("start %v %s", r.op, r.lock.Name)
}

// recorder is an Observer that records every call. Its Start marks the context with obsKey,
// and its End checks that it gets that context back.
type recorder struct {
	t       testing.TB
	mu      sync.Mutex
	recs    []obsRecord
	onEvent func(rlock.Event) // called after recording, if set
}

func (r *recorder) Start(ctx context.Context, op rlock.Op, lock rlock.LockInfo) context.Context {
	r.add(obsRecord{method: "start", op: op, lock: lock})
	return context.WithValue(ctx, obsKey{}, lock.Name)
}

func (r *recorder) End(ctx context.Context, op rlock.Op, lock rlock.LockInfo, outcome rlock.Outcome, took time.Duration, err error) {
	assert.Equal(r.t, lock.Name, ctx.Value(obsKey{}), "End gets the context Start returned")
	r.add(obsRecord{method: "end", op: op, lock: lock, outcome: outcome, took: took, err: err})
}

func (r *recorder) Event(ev rlock.Event) {
	r.add(obsRecord{method: "event", ev: ev, lock: ev.Lock})
	if r.onEvent != nil {
		r.onEvent(ev)
	}
}

func (r *recorder) add(rec obsRecord) {
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
}

// take returns the records so far and forgets them.
func (r *recorder) take() []obsRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	recs := r.recs
	r.recs = nil
	return recs
}

// all returns the records so far.
func (r *recorder) all() []obsRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.recs)
}

// events returns the recorded events of type typ.
func (r *recorder) events(typ rlock.EventType) []rlock.Event {
	var evs []rlock.Event
	for _, rec := range r.all() {
		if rec.method == "event" && rec.ev.Type == typ {
			evs = append(evs, rec.ev)
		}
	}
	return evs
}

// strings renders records for comparison.
func recStrings(recs []obsRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.String()
	}
	return out
}

// ctxSpy is a rueidis client that records, for every script command, the obsKey value of the
// context it runs under.
type ctxSpy struct {
	rueidis.Client
	mu   sync.Mutex
	seen []any
}

func (s *ctxSpy) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if c := cmd.Commands(); len(c) > 0 && (c[0] == "EVALSHA" || c[0] == "EVAL") {
		s.mu.Lock()
		s.seen = append(s.seen, ctx.Value(obsKey{}))
		s.mu.Unlock()
	}
	return s.Client.Do(ctx, cmd)
}

func (s *ctxSpy) take() []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := s.seen
	s.seen = nil
	return seen
}

// observed returns a client of e with a recorder as its observer, on a ctxSpy.
func observed(t *testing.T, e *env, opts rlock.Options) (*rlock.Client, *recorder, *ctxSpy) {
	t.Helper()
	rec := &recorder{t: t}
	spy := &ctxSpy{Client: e.Rueidis()}
	opts.KeyPrefix, opts.Observer = e.Prefix, rec
	c, err := rlock.New(spy, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c, rec, spy
}

// eachObservedKind runs f as a subtest per mutex kind, with the kind's LockInfo.Kind.
func eachObservedKind(t *testing.T, f func(t *testing.T, newMutex mutexMaker, kind string)) {
	each(t, mutexKinds, func(t *testing.T, k lockKind) { f(t, k.mutex, k.kind) })
}

// TestObserver_lockUnlock checks the Start/End pairs and hold events of a Lock, a re-entry,
// their Unlocks and a surplus Unlock, and that every script of these calls ran under the
// context Start returned.
func TestObserver_lockUnlock(t *testing.T) {
	eachObservedKind(t, func(t *testing.T, newMutex mutexMaker, kind string) {
		e := newEnv(t)
		c, rec, spy := observed(t, e, rlock.Options{})
		m := newMutex(c, "obs")

		held, err := m.Lock(bg)
		require.NoError(t, err)
		inner, err := m.Lock(held)
		require.NoError(t, err)
		require.NoError(t, m.Unlock(inner))
		time.Sleep(5 * time.Millisecond)
		require.NoError(t, m.Unlock(held))
		require.ErrorIs(t, m.Unlock(held), rlock.ErrNotHeld)

		recs := rec.take()
		require.Equal(t, []string{
			"start lock obs", "event hold_started obs", "end lock obs acquired",
			"start lock obs", "end lock obs acquired",
			"start unlock obs", "end unlock obs released",
			"start unlock obs", "event hold_ended obs released", "end unlock obs released",
			"start unlock obs", "end unlock obs not_held",
		}, recStrings(recs))
		for _, r := range recs {
			assert.Equal(t, rlock.LockInfo{Name: "obs", Kind: kind}, r.lock)
			if r.method == "end" {
				assert.Positive(t, r.took)
				assert.Equal(t, r.outcome == rlock.OutcomeNotHeld, r.err != nil, "%v: %v", r, r.err)
			}
		}
		started, ended := recs[1].ev, recs[8].ev
		owner, _ := rlock.Owner(held)
		assert.Equal(t, owner, started.Owner)
		assert.Equal(t, owner, ended.Owner)
		assert.ErrorIs(t, ended.Cause, context.Canceled)
		assert.GreaterOrEqual(t, ended.Held, 5*time.Millisecond)
		assert.Less(t, ended.Held, 5*time.Second)

		seen := spy.take()
		require.NotEmpty(t, seen)
		for _, v := range seen {
			assert.Equal(t, "obs", v, "every script of the calls ran under the observer's context")
		}
	})
}

// TestObserver_waitsThatFail checks the outcomes of acquire calls that do not acquire:
// TryLock timing out (wait 0 and a bounded wait), a wait cancelled by its context, a context
// already done, an invalid argument and a closed client.
func TestObserver_waitsThatFail(t *testing.T) {
	eachObservedKind(t, func(t *testing.T, newMutex mutexMaker, kind string) {
		e := newEnv(t)
		holder := newMutex(e.client(rlock.Options{}), "busy")
		h, err := holder.Lock(bg)
		require.NoError(t, err)
		c, rec, spy := observed(t, e, rlock.Options{})
		m := newMutex(c, "busy")

		_, err = m.TryLock(bg, 0)
		require.ErrorIs(t, err, rlock.ErrNotObtained)
		_, err = m.TryLock(bg, 30*time.Millisecond)
		require.ErrorIs(t, err, rlock.ErrNotObtained)
		ctx, cancel := context.WithTimeout(bg, 40*time.Millisecond)
		_, err = m.Lock(ctx)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		ctx, cancel = context.WithCancel(bg)
		time.AfterFunc(40*time.Millisecond, cancel)
		_, err = m.Lock(ctx)
		require.ErrorIs(t, err, context.Canceled)
		_, err = m.Lock(ctx) // already done
		require.ErrorIs(t, err, context.Canceled)
		_, err = m.TryLock(bg, -time.Second)
		require.ErrorIs(t, err, rlock.ErrInvalid)

		recs := rec.take()
		require.Equal(t, []string{
			"start lock busy", "end lock busy timed_out",
			"start lock busy", "end lock busy timed_out",
			"start lock busy", "end lock busy canceled",
			"start lock busy", "end lock busy canceled",
			"start lock busy", "end lock busy canceled",
			"start lock busy", "end lock busy error",
		}, recStrings(recs), "no hold events, no handoffs")
		assert.GreaterOrEqual(t, recs[3].took, 30*time.Millisecond, "took is the wait")
		assert.GreaterOrEqual(t, recs[5].took, 35*time.Millisecond, "the context's 40ms began just before the call")
		for _, r := range recs {
			assert.Equal(t, kind, r.lock.Kind)
			if r.method == "end" {
				assert.Equal(t, rlock.OpLock, r.op)
				assert.Error(t, r.err)
			}
		}
		for _, v := range spy.take() {
			assert.Equal(t, "busy", v, "every script of the calls ran under the observer's context")
		}

		// A wait ended by Close, and a call after it.
		done := make(chan error, 1)
		go func() {
			_, err := m.Lock(bg)
			done <- err
		}()
		require.Eventually(t, func() bool { return len(rec.all()) == 1 }, time.Second, time.Millisecond)
		time.Sleep(20 * time.Millisecond)
		require.NoError(t, c.Close())
		require.ErrorIs(t, <-done, rlock.ErrClosed)
		_, err = m.TryLock(bg, 0)
		require.ErrorIs(t, err, rlock.ErrClosed)
		assert.Equal(t, []string{
			"start lock busy", "end lock busy closed",
			"start lock busy", "end lock busy closed",
		}, recStrings(rec.take()))
		require.NoError(t, holder.Unlock(h))
	})
}

// TestObserver_handoff checks EventHandoff: reported for Locks that waited for a holder, in
// another client or queued behind this client's waiters, just before their End; not for one
// that did not wait.
func TestObserver_handoff(t *testing.T) {
	eachMutexKindAndStrategy(t, func(t *testing.T, newMutex mutexMaker, wait rlock.WaitStrategy) {
		e := newEnv(t)
		holder := newMutex(e.client(rlock.Options{}), "handoff")
		c, rec, _ := observed(t, e, rlock.Options{Wait: wait})
		m := newMutex(c, "handoff")

		h, err := m.Lock(bg) // uncontended: no handoff
		require.NoError(t, err)
		require.NoError(t, m.Unlock(h))
		require.Empty(t, rec.events(rlock.EventHandoff))

		h, err = holder.Lock(bg)
		require.NoError(t, err)
		const waiters = 2
		done := startWaiters(m, waiters)
		const held = 100 * time.Millisecond
		time.Sleep(held)
		require.NoError(t, holder.Unlock(h))
		requireAll(t, done, waiters, 5*time.Second)

		handoffs := rec.events(rlock.EventHandoff)
		require.Len(t, handoffs, waiters)
		for _, ev := range handoffs {
			assert.Equal(t, "handoff", ev.Lock.Name)
			assert.GreaterOrEqual(t, ev.Waited, held/2, "the waiters started before the holder's 100ms")
			assert.Less(t, ev.Waited, 5*time.Second)
		}
		// Each handoff comes just before its Lock's End(acquired), whose took is the same wait:
		// the next Lock End recorded (records of other calls may come between, such as the
		// previous holder's Unlock, which a fair lock's direct handoff makes simultaneous; the
		// other waiter's Lock cannot end before this one's, as it waits for this hold).
		recs := rec.all()
		for i, r := range recs {
			if r.method == "event" && r.ev.Type == rlock.EventHandoff {
				j := i + 1
				for j < len(recs) && !(recs[j].method == "end" && recs[j].op == rlock.OpLock) {
					j++
				}
				require.Less(t, j, len(recs))
				next := recs[j]
				assert.Equal(t, "end lock handoff acquired", next.String())
				assert.Equal(t, r.ev.Waited, next.took)
			}
		}
	})
}

// TestObserver_holdEnds checks EventHoldEnded for each way a hold ends, reported once per
// hold record, with the Unlock outcome that follows a loss.
func TestObserver_holdEnds(t *testing.T) {
	e := newEnv(t)
	const timeout = 300 * time.Millisecond // renewals every 100ms
	c, rec, _ := observed(t, e, rlock.Options{WatchdogTimeout: timeout})
	other := e.client(rlock.Options{})

	ended := func(name string) []rlock.Event {
		var evs []rlock.Event
		for _, ev := range rec.events(rlock.EventHoldEnded) {
			if ev.Lock.Name == name {
				evs = append(evs, ev)
			}
		}
		return evs
	}
	requireEnded := func(name string, outcome rlock.Outcome, cause error) {
		t.Helper()
		require.Eventually(t, func() bool { return len(ended(name)) > 0 }, 3*time.Second, time.Millisecond, name)
		evs := ended(name)
		require.Len(t, evs, 1, name)
		assert.Equal(t, outcome, evs[0].Outcome, name)
		assert.ErrorIs(t, evs[0].Cause, cause, name)
		assert.Positive(t, evs[0].Held, name)
	}
	endOf := func(op rlock.Op, name string) rlock.Outcome {
		recs := rec.all()
		for i := len(recs) - 1; i >= 0; i-- {
			if r := recs[i]; r.method == "end" && r.op == op && r.lock.Name == name {
				return r.outcome
			}
		}
		t.Fatalf("no End of %v %s", op, name)
		return 0
	}

	// Lost: deleted by another client; the watchdog finds out.
	m := c.NewMutex("forced-elsewhere")
	h, err := m.Lock(bg)
	require.NoError(t, err)
	inner, err := m.Lock(h)
	require.NoError(t, err)
	_, err = other.NewMutex("forced-elsewhere").ForceUnlock(bg)
	require.NoError(t, err)
	requireEnded("forced-elsewhere", rlock.OutcomeLost, rlock.ErrLockLost)
	require.ErrorIs(t, m.Unlock(inner), rlock.ErrLockLost)
	assert.Equal(t, rlock.OutcomeLost, endOf(rlock.OpUnlock, "forced-elsewhere"))
	require.ErrorIs(t, m.Unlock(h), rlock.ErrLockLost)
	assert.ErrorIs(t, m.Unlock(h), rlock.ErrNotHeld)
	assert.Equal(t, rlock.OutcomeNotHeld, endOf(rlock.OpUnlock, "forced-elsewhere"))

	// Lost: deleted through this client.
	m = c.NewMutex("forced-here")
	h, err = m.Lock(bg)
	require.NoError(t, err)
	_, err = m.ForceUnlock(bg)
	require.NoError(t, err)
	requireEnded("forced-here", rlock.OutcomeLost, rlock.ErrLockLost)
	require.ErrorIs(t, m.Unlock(h), rlock.ErrLockLost)

	// Lost: a fixed lease ran out (the reaper).
	m = c.NewMutex("lease", rlock.WithLease(30*time.Millisecond))
	h, err = m.Lock(bg)
	require.NoError(t, err)
	requireEnded("lease", rlock.OutcomeLost, rlock.ErrLockLost)
	require.ErrorIs(t, m.Unlock(h), rlock.ErrLockLost)
	assert.Equal(t, rlock.OutcomeLost, endOf(rlock.OpUnlock, "lease"))

	// Closed, for a plain and a fair hold.
	m = c.NewMutex("closed")
	h, err = m.Lock(bg)
	require.NoError(t, err)
	fm := c.NewFairMutex("closed-fair")
	_, err = fm.Lock(bg)
	require.NoError(t, err)
	time.Sleep(2 * timeout) // renewals keep them
	assert.Empty(t, ended("closed"))
	require.NoError(t, c.Close())
	requireEnded("closed", rlock.OutcomeClosed, rlock.ErrClosed)
	requireEnded("closed-fair", rlock.OutcomeClosed, rlock.ErrClosed)
	require.ErrorIs(t, m.Unlock(h), rlock.ErrClosed)
	assert.Equal(t, rlock.OutcomeClosed, endOf(rlock.OpUnlock, "closed"))

	// Every hold record that started ended exactly once.
	starts, ends := map[string]int{}, map[string]int{}
	for _, ev := range rec.events(rlock.EventHoldStarted) {
		starts[ev.Lock.Name+"/"+ev.Owner]++
	}
	for _, ev := range rec.events(rlock.EventHoldEnded) {
		ends[ev.Lock.Name+"/"+ev.Owner]++
	}
	assert.Len(t, starts, 5)
	assert.Equal(t, starts, ends)
	for k, n := range starts {
		assert.Equal(t, 1, n, k)
	}
	e.Dirty = true // the closed client's locks expire by themselves
}

// TestObserver_renewalFailed loses a renewal's request with its connection (the fault proxy):
// the failed script is reported with the holds it carried, and the hold survives.
func TestObserver_renewalFailed(t *testing.T) {
	e := newEnv(t)
	p := e.newProxy()
	const timeout = 1500 * time.Millisecond // renewals every 500ms
	c, rec, _ := observed(t, e.through(p), rlock.Options{WatchdogTimeout: timeout})
	m := c.NewMutex("renewal")
	h, err := m.Lock(bg)
	require.NoError(t, err)
	p.DropRequest(matchScript("renew.lua", e.LockKey("renewal")))
	require.Eventually(t, func() bool { return len(rec.events(rlock.EventRenewalFailed)) > 0 },
		timeout, time.Millisecond)
	ev := rec.events(rlock.EventRenewalFailed)[0]
	assert.Equal(t, 1, ev.Locks)
	assert.Equal(t, rlock.LockInfo{Name: "renewal", Kind: rlock.KindMutex}, ev.Lock)
	assert.Error(t, ev.Cause)
	time.Sleep(timeout / 2)
	require.NoError(t, h.Err(), "a failed renewal does not end the hold")
	assert.Empty(t, rec.events(rlock.EventHoldEnded))
	require.NoError(t, m.Unlock(h))
}

// TestObserver_mayCallIntoRlock has an observer that, from every method, reads a lock and
// takes and releases another one of the same client: nothing deadlocks, since no observer
// method runs with the client's internal mutex held.
func TestObserver_mayCallIntoRlock(t *testing.T) {
	e := newEnv(t)
	rec := &recorder{t: t}
	calls := &callingObserver{recorder: rec}
	opts := rlock.Options{KeyPrefix: e.Prefix, Observer: calls, WatchdogTimeout: 300 * time.Millisecond}
	c, err := rlock.New(e.Rueidis(), opts)
	require.NoError(t, err)
	calls.side = c.NewMutex("side")
	calls.main = c.NewMutex("main")

	done := make(chan struct{})
	go func() {
		defer close(done)
		h, err := calls.main.Lock(bg)
		if !assert.NoError(t, err) {
			return
		}
		inner, err := calls.main.Lock(h)
		assert.NoError(t, err)
		assert.NoError(t, calls.main.Unlock(inner))
		assert.NoError(t, calls.main.Unlock(h))
		_, err = calls.main.Lock(bg)
		assert.NoError(t, err)
		_, err = calls.main.ForceUnlock(bg) // loss, reported under loseHolds
		assert.NoError(t, err)
		l := c.NewMutex("main", rlock.WithLease(20*time.Millisecond)) // loss by the reaper
		_, err = l.Lock(bg)
		assert.NoError(t, err)
		time.Sleep(100 * time.Millisecond)
		_, err = calls.main.Lock(bg)
		assert.NoError(t, err)
		assert.NoError(t, c.Close()) // end reported under Close
	}()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("deadlock: an observer method that calls into rlock did not return")
	}
	calls.mu.Lock()
	defer calls.mu.Unlock()
	assert.Positive(t, calls.n)
	assert.Empty(t, calls.errs)
	var mainEnds []rlock.Outcome
	for _, ev := range rec.events(rlock.EventHoldEnded) {
		if ev.Lock.Name == "main" {
			mainEnds = append(mainEnds, ev.Outcome)
		}
	}
	assert.Equal(t, []rlock.Outcome{rlock.OutcomeReleased, rlock.OutcomeLost, rlock.OutcomeLost, rlock.OutcomeClosed}, mainEnds)
	e.Dirty = true // the last hold expires by itself
}

// callingObserver calls into rlock from every method about lock "main".
type callingObserver struct {
	*recorder
	main, side *rlock.Mutex
	mu         sync.Mutex
	n          int
	errs       []error
}

func (o *callingObserver) callIn(lock rlock.LockInfo) {
	if lock.Name != "main" {
		return // the side lock's own calls are observed too
	}
	ctx, cancel := context.WithTimeout(bg, 2*time.Second)
	defer cancel()
	_, err := o.main.IsLocked(ctx)
	if err == nil {
		var h context.Context
		if h, err = o.side.TryLock(ctx, time.Second); err == nil {
			err = o.side.Unlock(h)
		}
	}
	o.mu.Lock()
	o.n++
	if err != nil && !errors.Is(err, rlock.ErrClosed) {
		o.errs = append(o.errs, err)
	}
	o.mu.Unlock()
}

func (o *callingObserver) Start(ctx context.Context, op rlock.Op, lock rlock.LockInfo) context.Context {
	o.callIn(lock)
	return o.recorder.Start(ctx, op, lock)
}

func (o *callingObserver) End(ctx context.Context, op rlock.Op, lock rlock.LockInfo, outcome rlock.Outcome, took time.Duration, err error) {
	o.callIn(lock)
	o.recorder.End(ctx, op, lock, outcome, took, err)
}

func (o *callingObserver) Event(ev rlock.Event) {
	o.callIn(ev.Lock)
	o.recorder.Event(ev)
}

// TestObserver_strings pins the names observers export.
func TestObserver_strings(t *testing.T) {
	assert.Equal(t, "lock", rlock.OpLock.String())
	assert.Equal(t, "unlock", rlock.OpUnlock.String())
	var outcomes []string
	for o := rlock.OutcomeAcquired; o <= rlock.OutcomeNotHeld; o++ {
		outcomes = append(outcomes, o.String())
	}
	assert.Equal(t, []string{"acquired", "timed_out", "canceled", "closed", "error", "released", "lost", "not_held"}, outcomes)
	var events []string
	for ev := rlock.EventHoldStarted; ev <= rlock.EventHandoff; ev++ {
		events = append(events, ev.String())
	}
	assert.Equal(t, []string{"hold_started", "hold_ended", "renewal_failed", "handoff"}, events)
	assert.Equal(t, "outcome(99)", rlock.Outcome(99).String())
}

// muChecker is an Observer that checks, in every method, that the mutexes of the Client's
// shards are free: it must be able to take each. A caller that held one would never let go, so
// a check that fails for a whole second means a method was called with it held (other
// goroutines hold them for microseconds).
type muChecker struct {
	c     *rlock.Client
	mu    sync.Mutex
	calls map[string]int
	held  []string // methods called while a shard's mutex was held
}

func (o *muChecker) check(what string) {
	free := rlock.ShardsFree(o.c, time.Second)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls[what]++
	if !free {
		o.held = append(o.held, what)
	}
}

func (o *muChecker) Start(ctx context.Context, op rlock.Op, _ rlock.LockInfo) context.Context {
	o.check("start " + op.String())
	return ctx
}

func (o *muChecker) End(_ context.Context, op rlock.Op, _ rlock.LockInfo, outcome rlock.Outcome, _ time.Duration, _ error) {
	o.check("end " + op.String() + " " + outcome.String())
}

func (o *muChecker) Event(ev rlock.Event) {
	what := "event " + ev.Type.String()
	if ev.Type == rlock.EventHoldEnded {
		what += " " + ev.Outcome.String()
	}
	o.check(what)
}

// TestObserver_notUnderClientMutex runs every path that reports to the observer (calls, hold
// starts and ends by Unlock, ForceUnlock, the watchdog, the reaper and Close, handoffs) and
// checks that none calls it with a shard's mutex held.
func TestObserver_notUnderClientMutex(t *testing.T) {
	e := newEnv(t)
	e.Dirty = true // as a prefix of its own: Close leaves a hold behind (deleted below, if it can be)
	obs := &muChecker{calls: map[string]int{}}
	c, err := rlock.New(e.Rueidis(), rlock.Options{KeyPrefix: e.Prefix, Observer: obs, WatchdogTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	obs.c = c
	other := e.client(rlock.Options{})

	m := c.NewMutex("a")
	h, err := m.Lock(bg)
	require.NoError(t, err)
	inner, err := m.Lock(h)
	require.NoError(t, err)
	require.NoError(t, m.Unlock(inner))
	require.NoError(t, m.Unlock(h))
	require.ErrorIs(t, m.Unlock(h), rlock.ErrNotHeld)

	// A handoff from another client.
	oh, err := other.NewMutex("a").Lock(bg)
	require.NoError(t, err)
	time.AfterFunc(30*time.Millisecond, func() { _ = other.NewMutex("a").Unlock(oh) })
	h, err = m.Lock(bg)
	require.NoError(t, err)
	// Lost through ForceUnlock here (loseHolds).
	_, err = m.ForceUnlock(bg)
	require.NoError(t, err)
	require.ErrorIs(t, m.Unlock(h), rlock.ErrLockLost)
	// Lost through the watchdog (renewal finds the owner gone).
	h, err = m.Lock(bg)
	require.NoError(t, err)
	_, err = other.NewMutex("a").ForceUnlock(bg)
	require.NoError(t, err)
	select {
	case <-h.Done():
	case <-time.After(3 * time.Second):
		t.Fatal("the watchdog did not find the loss")
	}
	// Lost through the reaper (a fixed lease ran out).
	l := c.NewMutex("b", rlock.WithLease(20*time.Millisecond))
	lh, err := l.Lock(bg)
	require.NoError(t, err)
	<-lh.Done()
	time.Sleep(rlock.ReapGrace)
	// Ended by Close, with a waiter.
	_, err = c.NewFairMutex("c").Lock(bg)
	require.NoError(t, err)
	waited := make(chan error, 1)
	go func() {
		_, err := c.NewFairMutex("c").Lock(bg)
		waited <- err
	}()
	time.Sleep(30 * time.Millisecond)
	require.NoError(t, c.Close())
	require.ErrorIs(t, <-waited, rlock.ErrClosed)

	obs.mu.Lock()
	defer obs.mu.Unlock()
	assert.Empty(t, obs.held)
	for _, what := range []string{
		"start lock", "end lock acquired", "end lock closed", "start unlock", "end unlock released",
		"end unlock not_held", "end unlock lost", "event hold_started", "event hold_ended released",
		"event hold_ended lost", "event hold_ended closed", "event handoff",
	} {
		assert.Positive(t, obs.calls[what], what)
	}
	assert.Equal(t, 3, obs.calls["event hold_ended lost"], "ForceUnlock, watchdog, reaper")
	// The hold left by Close expires by itself; delete it now.
	_, _ = other.NewFairMutex("c").ForceUnlock(bg)
}
