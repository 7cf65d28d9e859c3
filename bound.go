package rlock

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
)

// Bounds. Every call keeps its bound when Redis does not answer (down, unreachable, stalled): a
// Try call returns within its wait plus 500ms, a call whose context has a deadline within
// 500ms of it, a release within 1s. rueidis cannot be trusted to end a call when its context
// is cancelled (a new connection's handshake is bounded by the dial timeout alone, and a call
// waits for another's dial), and a context deadline that passes mid-call makes it close the
// connection under every other call on it. So a call that has a bound makes its Redis calls
// as flights: each on a goroutine of the client, under a context that is only ever cancelled,
// which the caller waits for until its bound and then leaves in flight. What the caller held
// for it (its lane's turn) goes with the flight, which, once it returns, hands what is left to
// settle to the settler (see settler.go). A call without a bound (Lock with a context that
// cannot end) makes its Redis calls itself, bounded by rueidis' timeouts.

const (
	// replyGrace is how long after its end (its wait, its context's deadline or cancellation)
	// a call still waits for a Redis call in flight, and how long giving up (leaving the queue,
	// resolving a lost reply) may take before it is left to the settler.
	replyGrace = 200 * time.Millisecond
	// releaseWait is how long a release (or a read with a context that has ended) retries
	// transport errors before it returns; a request in flight then gets replyGrace more.
	releaseWait = 500 * time.Millisecond
)

// noReplyError is the transport error of a call that Redis did not answer within its bound.
// It is a net.Error whose Timeout is true, as the timeouts of the net package are.
type noReplyError struct{}

func (noReplyError) Error() string   { return "rlock: no reply from Redis in time" }
func (noReplyError) Timeout() bool   { return true }
func (noReplyError) Temporary() bool { return true }

// errNoReply is the error of a flight left by its caller (see fly).
var errNoReply error = noReplyError{}

// bound is how long one call waits for Redis: until end (zero: no end) plus replyGrace, or
// replyGrace after ctx ends (a context that cannot end: none). A call without either has no
// bound.
type bound struct {
	ctx context.Context
	end time.Time
}

// unbounded reports whether b bounds nothing: the call waits as long as Redis takes.
func (b bound) unbounded() bool { return b.end.IsZero() && b.ctx.Done() == nil }

// within returns the bound of a step that must end within d from now, whatever ctx does.
func within(d time.Duration) bound {
	return bound{ctx: context.Background(), end: time.Now().Add(d)}
}

// readBound returns the bound of a read under ctx: its deadline or cancellation; a context
// that has ended (a released hold context still names its owner) gets releaseWait of its own.
func readBound(ctx context.Context) bound {
	if ctx.Err() != nil {
		return within(releaseWait)
	}
	b := bound{ctx: ctx}
	b.end, _ = ctx.Deadline()
	return b
}

// flight is one Redis call (or a few in a row) on a goroutine of the client that its caller
// may leave before it returns (see fly).
type flight struct {
	state  atomic.Int32 // flying, landed, or left
	done   chan struct{}
	cancel context.CancelFunc
	// keep: its caller leaving does not cancel it (see flyKept); Close does.
	keep bool
}

// States of a flight.
const (
	flying = iota
	landed // it returned while its caller waited: done is closed
	left   // its caller left: the flight runs its orphan once it returns
)

// launch starts call on a goroutine of the client, under a context with cmd's values that is
// cancelled (never given a deadline) once its caller leaves, or, if keep, once the client
// closes. If the caller leaves (see wait), orphan, if not nil, runs on that goroutine once call
// returns. It returns nil once the client is closed.
func (c *core) launch(cmd context.Context, keep bool, call func(context.Context), orphan func()) *flight {
	if !c.startFlight() {
		return nil
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(cmd))
	f := &flight{done: make(chan struct{}), cancel: cancel, keep: keep}
	go func() {
		defer c.wg.Done()
		defer cancel()
		if keep {
			defer context.AfterFunc(c.ctx, cancel)()
		}
		call(giveUp{ctx})
		if f.state.CompareAndSwap(flying, landed) {
			close(f.done)
			return
		}
		if orphan != nil {
			orphan()
		}
	}()
	return f
}

// wait waits for f until b's limit (its end plus replyGrace, or replyGrace after its context
// ends) or until the client closes. It returns nil once f has returned; otherwise it leaves f
// in flight (cancelling its context) and returns errNoReply, or ErrClosed.
func (f *flight) wait(c *core, b bound) error {
	var limit <-chan time.Time
	if !b.end.IsZero() {
		t := time.NewTimer(time.Until(b.end) + replyGrace)
		defer t.Stop()
		limit = t.C
	}
	ended := b.ctx.Done()
	var err error
	for err == nil {
		select {
		case <-f.done:
			f.cancel()
			return nil
		case <-limit:
			err = errNoReply
		case <-c.ctx.Done():
			err = ErrClosed
		case <-ended:
			ended = nil
			t := time.NewTimer(replyGrace)
			defer t.Stop()
			if limit == nil || b.end.IsZero() || time.Until(b.end) > 0 {
				limit = t.C
			}
		}
	}
	if !f.state.CompareAndSwap(flying, left) {
		<-f.done // it returned just now
		f.cancel()
		return nil
	}
	if !f.keep {
		f.cancel()
	}
	return err
}

// fly runs call as a flight bounded by b (see launch and wait) and waits for it; without a
// bound it runs call itself, under cmd without its cancellation. It returns nil once call has
// returned, else errNoReply or ErrClosed: call goes on without its caller, and orphan, if not
// nil, runs once it returns (at once, if the client was closed before it started).
func (c *core) fly(b bound, cmd context.Context, call func(context.Context), orphan func()) error {
	return c.flyWith(b, cmd, false, call, orphan)
}

// flyKept is fly for a request that must not be abandoned while it may still run: an acquire
// attempt. A cancelled call is not withdrawn from Redis (it may sit unread on a stalled or
// stopped server), and rueidis may send the request that resolves it on another connection,
// to run first; the attempt would then take a hold after its resolution found nothing. So a
// kept flight waits for its reply (or a connection failure, which rueidis' own timeouts bound)
// after its caller left, and its orphan learns the real outcome.
func (c *core) flyKept(b bound, cmd context.Context, call func(context.Context), orphan func()) error {
	return c.flyWith(b, cmd, true, call, orphan)
}

// flyWith is fly, or flyKept if keep.
func (c *core) flyWith(b bound, cmd context.Context, keep bool, call func(context.Context), orphan func()) error {
	if b.unbounded() {
		call(detach(cmd))
		return nil
	}
	f := c.launch(cmd, keep, call, orphan)
	if f == nil {
		if orphan != nil {
			orphan()
		}
		return ErrClosed
	}
	return f.wait(c, b)
}

// read runs call, a read, under ctx's bound (see readBound) and returns its error; if Redis
// did not answer in time, an error that wraps ctx's error, if it ended, and errNoReply.
func (c *core) read(ctx context.Context, call func(context.Context) error) error {
	var err error
	b := readBound(ctx)
	if ferr := c.fly(b, ctx, func(ctx context.Context) { err = call(ctx) }, nil); ferr != nil {
		if cerr := ctx.Err(); cerr != nil && b.ctx == ctx {
			return fmt.Errorf("%w (%w)", cerr, ferr)
		}
		return ferr
	}
	return err
}

// startFlight counts a flight in c.wg, unless the client is closed. Close waits for every
// flight counted: it sets closed, waits until no startFlight is between its two steps, and
// only then drops the gate, its own count in c.wg that keeps a flight's wg.Add off a zero
// counter that Wait may be waiting on (see Close).
func (c *core) startFlight() bool {
	c.starting.Add(1)
	defer c.starting.Add(-1)
	if c.closed.Load() {
		return false
	}
	c.wg.Add(1)
	return true
}

// closeGate waits until no flight is starting and drops the gate (see startFlight). Close
// calls it once closed is set.
func (c *core) closeGate() {
	for c.starting.Load() != 0 {
		runtime.Gosched()
	}
	c.wg.Done()
}

// retryWithin runs call, retrying transport errors with back-off while b's end is ahead, and
// returns its last error. The tries are not flights: each is bounded by rueidis' timeouts only,
// so its callers run it inside one (a MultiLock's releases, give-backs and leaves).
func (c *core) retryWithin(b bound, call func() error) error {
	backoff := newBackoff()
	for {
		err := call()
		if d := backoff.next(); isTransport(err) && c.ctx.Err() == nil && time.Now().Add(d).Before(b.end) {
			time.Sleep(d)
			continue
		}
		return err
	}
}

// callWithin runs call, for which the caller holds lane l's turn, as flights bounded by b (see
// fly), retrying transport errors with back-off while b's end is ahead, and returns its last
// error with held true. If Redis did not answer in time it returns errNoReply (or ErrClosed)
// with held false: the flight has l's turn, and gives it back (waking the settler) once it
// returns. For calls that change nothing when repeated, or that the settler need not resolve.
func (sh *shard) callWithin(b bound, cmd context.Context, l *lane, call func(context.Context) error) (held bool, _ error) {
	c := sh.c
	backoff := newBackoff()
	for {
		var err error
		if ferr := c.fly(b, cmd, func(ctx context.Context) { err = call(ctx) }, func() {
			sh.lanes.exit(l)
			c.settleSoon()
		}); ferr != nil {
			return false, ferr
		}
		if d := backoff.next(); isTransport(err) && c.ctx.Err() == nil && time.Now().Add(d).Before(b.end) {
			time.Sleep(d)
			continue
		}
		return true, err
	}
}

// flyOrClosed is fly for the steps of a call that gives back what it has (a release, leaving a
// queue): once the client is closed no flight starts, so call runs on the caller's goroutine,
// giving up after replyGrace (see giveUpAfter), and fly's error is nil.
func (c *core) flyOrClosed(b bound, cmd context.Context, call func(context.Context), orphan func()) error {
	return c.flyOrClosedWith(b, cmd, false, call, orphan)
}

// flyKeptOrClosed is flyOrClosed for a give-back whose orphan must learn its real outcome
// before it decides what is still owed (see flyKept).
func (c *core) flyKeptOrClosed(b bound, cmd context.Context, call func(context.Context), orphan func()) error {
	return c.flyOrClosedWith(b, cmd, true, call, orphan)
}

// flyOrClosedWith is flyOrClosed, or flyKeptOrClosed if keep.
func (c *core) flyOrClosedWith(b bound, cmd context.Context, keep bool, call func(context.Context), orphan func()) error {
	if c.closed.Load() {
		ctx, cancel := giveUpAfter(context.WithoutCancel(cmd), replyGrace)
		defer cancel()
		call(giveUp{ctx})
		return nil
	}
	return c.flyWith(b, cmd, keep, call, orphan)
}
