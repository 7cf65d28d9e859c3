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
	context.Context // the hold context as built (see Client.holdContext)
	h               *hold
	// deadline, for a context with a fixed lease, is its own end (UnixNano); 0: the context
	// lives as long as its hold, whose local end (h.endNano) the watchdog moves.
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

// clock wraps ctx, a hold context of h built by holdContext, in its clocked layer. base ends the
// contexts of the hold as a whole (a watchdog hold's end is the hold's). A context with a fixed
// lease ending at end (lease > 0) gets a cancellable layer of its own, so that the clock can end
// it with its deadline's cause.
func clock(ctx context.Context, h *hold, base context.CancelCauseFunc, lease bool, end time.Time, cause error) *clocked {
	if !lease {
		return &clocked{Context: ctx, h: h, trip: base, cause: ErrLockLost}
	}
	own, cancel := context.WithCancelCause(ctx)
	return &clocked{Context: own, h: h, deadline: end.UnixNano(), trip: cancel, cause: cause}
}
