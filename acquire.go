package rlock

import (
	"context"
	"time"
)

// acquire is Lock, RLock, Acquire and Campaign (bounded false) and their Try forms (bounded:
// give up after wait): it waits while ctx lives and runs its Redis commands under cmd (the
// observer's context; see detach). value is a Campaign's. blocked reports that an attempt found
// the lock held, or that the call queued behind waiters.
func (h *locker) acquire(ctx, cmd context.Context, acc access, n int64, value string, bounded bool, wait time.Duration) (_ context.Context, blocked bool, _ error) {
	lk := &h.lock
	if err := lk.check(ctx); err != nil {
		return nil, false, err
	}
	if bounded && wait < 0 {
		return nil, false, lk.errorf("%w", invalidf("negative wait %v", wait))
	}
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	label, err := labelOf(ctx)
	if err != nil {
		return nil, false, lk.errorf("%w", err)
	}
	req := lk.core.requestID() // unique across clients: a random client id and a counter
	var owner string
	var ok bool
	if !lk.ownerless {
		if owner, ok, err = lk.callerOwner(ctx); err != nil {
			return nil, false, err
		}
	}
	if !ok {
		// An owner made for this call is its request id: the scripts know by that that nobody
		// else can hold as it, and skip the replay record (see lib.lua).
		owner = req
	}
	w := waiter{lk: lk, sh: h.sh, style: lk.kind.style(acc), ctx: ctx, cmd: cmd, bounded: bounded, fresh: !ok,
		r: request{owner: owner, id: req, access: acc, n: n, value: value, label: label, join: !bounded || wait != 0}}
	if w.bounded {
		w.deadline = time.Now().Add(wait)
		w.end = w.deadline
	}
	if d, ok := ctx.Deadline(); ok && (w.end.IsZero() || d.Before(w.end)) {
		w.end = d
	}
	c := h.c
	noticed := c.watchers.notices()
	a, err := w.acquire()
	if err != nil {
		return nil, w.blocked, err
	}
	held, r, err := w.sh.register(ctx, lk, owner, acc, a)
	if err != nil {
		// The caller left, or the client closed, while the script ran: the hold is given
		// back, within replyGrace, or by the settler.
		if w.sh.owe(within(0), cmd, w.lane, lk, acc) {
			w.sh.lanes.exit(w.lane)
		}
		return nil, w.blocked, err
	}
	w.sh.lanes.exit(w.lane)
	if r.first {
		c.watchers.firstHold()
	}
	if !r.claim.IsZero() {
		c.watchdog.renewSoon(r.claim)
	}
	if r.moved {
		c.reaper.holdEnds(r.end)
	}
	if c.watchers.notices() != noticed {
		// A watcher noticed a restart or failover while this call ran: the check it started
		// may have looked before this hold was registered (see notice).
		c.watchers.verifyNow()
	}
	return held, w.blocked, nil
}

// observeAcquire runs an acquire call (see acquire) between the observer's Start and End.
func (h *locker) observeAcquire(ctx context.Context, op Op, acc access, n int64, bounded bool, wait time.Duration) (context.Context, error) {
	return h.observeCall(ctx, op, acc, n, "", bounded, wait)
}

// observeCall is observeAcquire with a Campaign's value.
func (h *locker) observeCall(ctx context.Context, op Op, acc access, n int64, value string, bounded bool, wait time.Duration) (context.Context, error) {
	obs := h.core.obs
	if obs == nil || ctx == nil {
		held, _, err := h.acquire(ctx, ctx, acc, n, value, bounded, wait)
		return held, err
	}
	start := time.Now()
	info := h.info()
	octx := obs.Start(ctx, op, info)
	if octx == nil {
		octx = ctx
	}
	held, blocked, err := h.acquire(ctx, octx, acc, n, value, bounded, wait)
	took := time.Since(start)
	if err == nil && blocked {
		obs.Event(Event{Type: EventHandoff, Lock: info, Waited: took})
	}
	obs.End(octx, op, info, lockOutcome(err), took, err)
	return held, err
}

// acquire waits with the lock's strategy until an attempt succeeds (it returns holding the
// owner's lane), the wait ends, ctx is done, or the client closes. On error it holds nothing:
// its queue place is left, and an attempt whose reply was lost is resolved (its hold given
// back if it took one), within replyGrace, or else by the settler (see shard.giveUp).
func (w *waiter) acquire() (attempt, error) {
	a, err := w.wait()
	if err != nil {
		leave := w.queued && w.r.join
		if w.lane != nil || leave {
			w.sh.giveUp(within(0), w.cmd, w.lane, w.lk, w.r, leave, w.lane != nil)
			w.lane = nil
		}
	}
	return a, err
}

// wait runs the first attempt, then waits with the lock's strategy: queued waiters in their
// queue, a plain Mutex's by its barging rules, other waiters until a wake-up for them.
func (w *waiter) wait() (attempt, error) {
	switch d, how := w.sh.courtesy.firstMove(w.lk, w.style, w.r, w.fresh); how {
	case yieldWait:
		return w.pubsub(attempt{pttl: d}, nil)
	case yieldQueue:
		w.blocked = true
		return w.pubsub(attempt{pttl: d}, nil)
	case yieldProbe:
		a, err := w.run(reenterOnly)
		if err == nil && a.acquired || err != nil && !isTransport(err) {
			return a, err
		}
		if err == nil && a.pttl == 0 {
			a.pttl = maxCourtesy // left free for a woken waiter
		}
		return w.pubsub(a, err)
	case yieldBack:
		if !w.bounded || time.Until(w.deadline) > d {
			if err := w.sleep(d, nil); err != nil {
				return attempt{}, err
			}
		}
	}
	if w.style.wake == wakeAddressed && w.r.join {
		w.sh.subs.arrive(w.lk.keys.Channel, w.address(), 1)
		defer w.sh.subs.arrive(w.lk.keys.Channel, w.address(), -1)
	}
	if w.style.wake == wakeReaders && w.r.join {
		w.peeked, w.woken = w.sh.subs.peekReaders(w.lk.keys.Channel)
	}
	a, err := w.try()
	if err == nil && a.acquired {
		return a, nil
	}
	if err != nil && !isTransport(err) {
		return a, err
	}
	if w.style.queued {
		return w.queue(a, err)
	}
	if w.bounded && !time.Now().Before(w.deadline) || w.over {
		// The wait is over (an attempt whose outcome is unknown is resolved, and given back,
		// as the call leaves): ErrNotObtained, wrapping the attempt's transport error if any.
		return a, w.ended()
	}
	if s, ok := w.lk.wait.(spinWait); ok {
		return w.spin(s.interval, err)
	}
	if w.style.wake == wakeOne {
		return w.pubsub(a, err)
	}
	return w.queue(a, err)
}
