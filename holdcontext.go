package rlock

import (
	"context"
	"time"
)

// clocked is the outermost layer of every hold context: it compares the clock with the end of
// what it holds on every Err, Done and Value (through which context.Cause reads), and ends the
// context at once when that moment has passed. Timers end hold contexts too, but a process that
// was paused (SIGSTOP, a long GC, a VM pause) runs its own code before its timers: without this
// check a hold context would look live for a moment after its lease had ended.
type clocked struct {
	context.Context // the hold context as built (see newHoldContext)
	h               *hold
	// run, for a context taken in write mode of an RWMutex, is the run of write holds it was
	// taken in, whose end (accessHold.endNano) is its end while the run has holds; nil: none.
	run *accessHold
	// deadline, for a context with a fixed lease, is its own end (UnixNano); 0: the context
	// lives as long as its hold, whose local end (h.endNano, or run's) the watchdog moves.
	deadline int64
	// trip ends the context with cause when the clock has passed its end.
	trip  context.CancelCauseFunc
	cause error

	// The values the hold context adds (one layer instead of two context.WithValue): hc
	// under key (the lock's holdCtxKey), and under ownerKey{} owner, if not nil.
	key   any
	hc    holdCtx
	owner any
}

// check ends c if the clock has passed its end.
func (c *clocked) check() {
	end := c.deadline
	if end == 0 {
		end = c.h.endNano.Load()
		if c.run != nil {
			if e := c.run.endNano.Load(); e != 0 {
				end = e
			}
		}
	}
	if time.Now().UnixNano() >= end && c.Context.Err() == nil {
		c.trip(c.cause)
	}
}

func (c *clocked) Done() <-chan struct{} {
	c.check()
	return c.Context.Done()
}

// Err is the error of the context as built, but a fixed lease that the clock ended reports
// context.DeadlineExceeded, as its timer would have.
func (c *clocked) Err() error {
	c.check()
	err := c.Context.Err()
	if err == context.Canceled && c.deadline != 0 {
		if _, ok := context.Cause(c.Context).(*leaseEnd); ok {
			return context.DeadlineExceeded
		}
	}
	return err
}

func (c *clocked) Value(key any) any {
	c.check()
	if key == c.key {
		return &c.hc
	}
	if _, ok := key.(ownerKey); ok && c.owner != nil {
		return c.owner
	}
	return c.Context.Value(key)
}

// String names the context for %v, without calling Err.
func (c *clocked) String() string { return "rlock hold context" }

// clock wraps ctx, a hold context of h built by newHoldContext, in its clocked layer. base ends the
// contexts of the hold in its access as a whole (a watchdog hold's end is the hold's, or that of
// its write run r: nil for none). A context with a fixed lease ending at end (lease > 0) gets a
// cancellable layer of its own, so that the clock can end it with its deadline's cause.
func clock(ctx context.Context, h *hold, r *accessHold, base context.CancelCauseFunc, lease bool, end time.Time, cause error) *clocked {
	if !lease {
		return &clocked{Context: ctx, h: h, run: r, trip: base, cause: ErrLockLost}
	}
	own, cancel := context.WithCancelCause(ctx)
	return &clocked{Context: own, h: h, deadline: end.UnixNano(), trip: cancel, cause: cause}
}

// holdCtx is the value a hold context carries under its holdCtxKey. Its unlock field is
// guarded by the mutex of h's shard.
type holdCtx struct {
	h     *hold
	run   *accessHold // the run of holds of h its hold joined, in access acc
	acc   access
	token int64
	trip  context.CancelCauseFunc // ends this context and those nested in it (see clocked)

	// unlock, per access: a release given this context whose outcome was unknown when it
	// returned, until a retry of it (a release in that access with this context) takes it.
	unlock [accesses]ctxUnlock
}

// lostRun returns the run of holds in access acc that a release through hc (nil: none) would
// release if this process saw it lost, it still counts holds and no release of it through hc
// is in flight; otherwise nil. In hc's own access that run is the one hc's hold joined (a later
// run of the owner is not its hold's), in the other the owner's current run in hc's record.
// Called with the mutex of hc's shard held.
func (hc *holdCtx) lostRun(acc access) *accessHold {
	if hc == nil {
		return nil
	}
	s := hc.h.acc[acc]
	if hc.acc == acc {
		s = hc.run
	}
	if s.lost && s.count > 0 && hc.unlock[acc].request == "" {
		return s
	}
	return nil
}

// ctxUnlock is a release given a hold context whose reply was lost (see lane.keepUnlock).
type ctxUnlock struct {
	request string // its request id; "": none
	settled bool   // the lane settled it: outcome is what its retry returns
	outcome error
}

// leaseEnd is the deadline cause of a hold context with a fixed lease. It unwraps to
// ErrLockLost, or to context.DeadlineExceeded when a later hold of its run pushed the lease
// past the context's deadline (the lock is still held in that access, only this context
// ended). The owner's holds in the other access (an RWMutex's other mode) do not count: they
// hold another lease.
type leaseEnd struct {
	run      *accessHold
	deadline time.Time
}

func (e *leaseEnd) superseded() bool { return e.run.furthest.Load() > e.deadline.UnixNano() }

func (e *leaseEnd) Error() string {
	if e.superseded() {
		return "hold context deadline passed; the lock is still held by a later hold"
	}
	return "lease ended: " + ErrLockLost.Error()
}

func (e *leaseEnd) Unwrap() error {
	if e.superseded() {
		return context.DeadlineExceeded
	}
	return ErrLockLost
}

// holdOnly is a hold context whose parent can never be cancelled: values come from the parent,
// cancellation (and its cause) from the hold.
type holdOnly struct {
	context.Context // the parent
	hold            context.Context
}

func (j holdOnly) Done() <-chan struct{} { return j.hold.Done() }

func (j holdOnly) Err() error { return j.hold.Err() }

// Value looks in the parent first, then in the hold's context, which is what makes
// context.Cause find the hold's cause.
func (j holdOnly) Value(key any) any {
	if v := j.Context.Value(key); v != nil {
		return v
	}
	return j.hold.Value(key)
}

// newHoldContext derives the hold context of h, whose new hold joined run s in access acc, has
// fencing token token and (with a fixed lease) ends at end, from parent. Called with h's
// shard's mutex held.
func newHoldContext(parent context.Context, lk *lock, h *hold, s *accessHold, acc access, token int64, end time.Time) context.Context {
	key := lk.ctxKey
	prev, _ := parent.Value(key).(*holdCtx)
	ctx := parent
	var trip context.CancelCauseFunc
	var writes *accessHold // s, if it is an RWMutex's write run (see clocked.run)
	if lk.modes && acc == exclusive {
		writes = s
	}
	switch {
	case prev != nil && prev.h == h && (acc == shared || prev.acc == exclusive):
		// Nested in a live hold context of h, whose cancellation reaches this one: it ends with
		// the record, and a write hold's with the write lease too (see hold.bases).
		trip = prev.trip
	case parent.Done() == nil:
		b := h.base(acc)
		ctx = holdOnly{Context: parent, hold: b.ctx}
		trip = b.cancel
	default:
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(parent)
		h.addSub(sub{ctx, cancel, acc})
		trip = cancel
	}
	var owner any // the clocked layer carries h's owner unless ctx does
	if o, ok := Owner(ctx); !lk.ownerless && (!ok || o != h.owner) {
		owner = h.owner
	}
	var cause error = ErrLockLost
	if lk.lease > 0 {
		var stop context.CancelFunc
		cause = &leaseEnd{run: s, deadline: end}
		ctx, stop = context.WithDeadlineCause(ctx, end, cause)
		_ = stop // its timer goes when the deadline passes or the hold ends, whichever is first
	}
	c2 := clock(ctx, h, writes, trip, lk.lease > 0, end, cause)
	c2.key, c2.hc, c2.owner = key, holdCtx{h: h, run: s, acc: acc, token: token, trip: trip}, owner
	return c2
}

// heldIn returns the hold of lk that ctx, a hold context or one derived from it, carries; or
// nil.
func heldIn(ctx context.Context, lk *lock) *holdCtx {
	hc, _ := ctx.Value(lk.ctxKey).(*holdCtx)
	return hc
}

// tokenOf returns the fencing token of the hold of lk that ctx carries (see Mutex.Token).
func tokenOf(ctx context.Context, lk *lock) (int64, bool) {
	if lk.err != nil || !lk.fencing || ctx == nil {
		return 0, false
	}
	hc := heldIn(ctx, lk)
	if hc == nil {
		return 0, false
	}
	return hc.token, true
}
