package rlock

import (
	"context"
	"time"
)

// enterLane waits for the turn of owner's lane on lk within b, then settles work left on it
// once, with commands under cmd, as a flight bounded by b (see bound.go). It returns b's
// context's error, ErrClosed, errNoReply, or the transport error that kept the left work
// unsettled (the settler then retries it); the lane is then not held.
func (sh *shard) enterLane(b bound, cmd context.Context, lk *lock, owner string) (*lane, error) {
	l, err := sh.lanes.take(b, holdKey{lk.keys.Lock, owner})
	if err != nil {
		return nil, err
	}
	held, err := sh.settleIn(b, cmd, l)
	if err != nil {
		if held {
			sh.lanes.exit(l)
		}
		sh.c.settleSoon()
		return nil, err
	}
	return l, nil
}

// settleIn settles l once with commands under cmd (see settle), as a flight bounded by b, and
// returns settle's error. If Redis did not answer in time it returns errNoReply (or ErrClosed)
// and held false: the flight has l's turn, and once it returns it gives the turn back and wakes
// the settler. Otherwise held is true: the caller still holds the turn. Once the client is
// closed it settles l itself, within replyGrace.
func (sh *shard) settleIn(b bound, cmd context.Context, l *lane) (held bool, _ error) {
	sh.mu.Lock()
	work := l.work()
	sh.mu.Unlock()
	if !work {
		return true, nil // the usual case: no flight (a goroutine) for nothing
	}
	var err error
	c := sh.c
	if c.closed.Load() {
		// No flight starts once the client closes, and nothing settles l later: it is settled
		// here, giving up after replyGrace (a queue place left then lapses by itself).
		ctx, cancel := giveUpAfter(context.WithoutCancel(cmd), replyGrace)
		defer cancel()
		return true, sh.settle(giveUp{ctx}, l)
	}
	if ferr := c.fly(b, cmd, func(ctx context.Context) { err = sh.settle(ctx, l) }, func() {
		sh.lanes.exit(l)
		c.settleSoon()
	}); ferr != nil {
		return false, ferr
	}
	return true, err
}

// settleWithin is settleIn, retried after transport errors with back-off while b's end is
// ahead. Work it leaves is the settler's (woken).
func (sh *shard) settleWithin(b bound, cmd context.Context, l *lane) (held bool, _ error) {
	backoff := newBackoff()
	for {
		held, err := sh.settleIn(b, cmd, l)
		if err == nil {
			return true, nil
		}
		if d := backoff.next(); held && isTransport(err) && sh.c.ctx.Err() == nil && time.Now().Add(d).Before(b.end) {
			time.Sleep(d)
			continue
		}
		sh.c.settleSoon()
		return held, err
	}
}

// giveUp records on l, owner's lane of lk, what a call that ends without a hold leaves to
// settle: its queue place (leave: it may have one) and its last attempt, request r, whose
// outcome it does not know (lost: its reply was lost, and the caller holds l's turn). Then it
// settles l within b if it holds l's turn or can take it at once, and leaves the rest to the
// settler. The caller's turn, if it held l's, is given back (or to a flight that still runs).
func (sh *shard) giveUp(b bound, cmd context.Context, l *lane, lk *lock, r request, leave, lost bool) {
	hk := holdKey{lk.keys.Lock, r.owner}
	sh.mu.Lock()
	if !lost {
		l = sh.lanes.of(hk)
		l.refs++ // keeps the work recorded below on it until the take below, or the drop
	}
	if leave {
		l.leaves = append(l.leaves, leaving{lk, r})
	}
	if lost {
		r.mode, r.join = resolveOnly, false
		l.lostAcquire, l.lk = r, lk
	}
	sh.mu.Unlock()
	if !lost {
		// The turn if it is free at once: otherwise another call of the owner, or a flight
		// this call left (which holds it until Redis answers), has it, and the settler does
		// the rest.
		select {
		case l.turn <- struct{}{}:
		default:
			sh.lanes.drop(l)
			sh.c.settleSoon()
			return
		}
	}
	held, err := sh.settleIn(b, cmd, l)
	if held {
		sh.lanes.exit(l)
	}
	if err != nil {
		sh.c.settleSoon()
	}
}

// owe records a hold on lk in access acc taken for a caller who left (its context ended while
// the script ran, or too few replicas acknowledged it), and gives it back within b with
// commands under cmd, or leaves it to the settler. The caller holds l's turn, and still does on
// return if held is true; otherwise a flight has it.
func (sh *shard) owe(b bound, cmd context.Context, l *lane, lk *lock, acc access) (held bool) {
	sh.mu.Lock()
	l.owed[acc]++
	l.lk = lk
	sh.mu.Unlock()
	held, _ = sh.settleWithin(b, cmd, l)
	return held
}

// oweHolds queues the give-back of n holds of h in access a (a run lost here, still held in
// Redis) on its lane, and wakes the settler. Called with sh.mu held.
func (sh *shard) oweHolds(h *hold, a access, n int) {
	if n <= 0 {
		return
	}
	l := sh.lanes.of(holdKey{h.key, h.owner})
	l.owed[a] += n
	l.lk = h.lk
	sh.c.settleSoon()
}

// settle does the work left on l, whose turn the caller holds, with commands under cmd: it
// spreads losses to the holds taken with the lost one (see spreader), leaves the queue places
// of calls that gave up, resolves a lost acquire (giving its hold back
// if it ran), gives back owed holds, and replays a lost Unlock, keeping its outcome for that
// Unlock's retry (see takeOutcome). It stops at the first transport error, which it returns;
// errors from Redis are logged and drop the work (the lease bounds the damage).
func (sh *shard) settle(cmd context.Context, l *lane) error {
	err := sh.settleOnce(cmd, l)
	c := sh.c
	if isTransport(err) {
		key, attrs := c.nodes.logKey("settle", c.slotOf(l.hk.key), true)
		c.log.failLate(key, "rlock: settling requests whose reply was lost failed; retrying", err,
			append(attrs, "lock", l.hk.key, "owner", l.hk.owner)...)
	} else if !c.log.calm() {
		key, attrs := c.nodes.logKey("settle", c.slotOf(l.hk.key), false)
		c.log.ok(key, "rlock: settling requests whose reply was lost succeeds again", attrs...)
	}
	return err
}

// settleOnce is settle but for its log.
func (sh *shard) settleOnce(cmd context.Context, l *lane) error {
	c := sh.c
	sh.mu.Lock()
	lk, lost, leaves, owed, unlock, spreads := l.lk, l.lostAcquire, len(l.leaves), l.owed, l.unlock, l.spreads
	l.spreads = nil
	sh.mu.Unlock()
	for _, s := range spreads {
		s.spread(cmd)
	}
	// The queue places first: a place given up may hold a grant, which leaving gives back; an
	// attempt resolved after that finds no grant to count as its hold.
	for range leaves {
		sh.mu.Lock()
		q := l.leaves[0]
		sh.mu.Unlock()
		err := q.lk.kind.dequeue(cmd, q.r)
		if isTransport(err) {
			return err
		}
		if err != nil {
			c.opts.Logger.Warn("rlock: leaving the queue failed; the place lapses by itself", "lock", q.lk.name,
				"error", err)
		}
		sh.mu.Lock()
		l.leaves = l.leaves[1:]
		if len(l.leaves) == 0 {
			l.leaves = nil
		}
		sh.mu.Unlock()
	}
	if lost.id != "" {
		a, err := lk.tryOnce(cmd, lost)
		if isTransport(err) {
			return err
		}
		if err != nil {
			c.opts.Logger.Warn("rlock: resolving a lost acquire failed", "lock", lk.name, "error", err)
		}
		sh.mu.Lock()
		l.lostAcquire = request{}
		if err == nil && a.acquired {
			l.owed[lost.access]++
			owed[lost.access]++
		}
		sh.mu.Unlock()
	}
	for acc := range owed {
		for ; owed[acc] > 0; owed[acc]-- {
			sh.mu.Lock()
			if l.giveBack[acc].request == "" {
				l.giveBack[acc] = pendingRelease{request: c.requestID()}
			}
			p := l.giveBack[acc]
			sh.mu.Unlock()
			_, err := lk.releaseOnce(cmd, l.hk.owner, access(acc), &p)
			if isTransport(err) {
				return err
			}
			if err != nil {
				c.opts.Logger.Warn("rlock: giving back a hold failed", "lock", lk.name, "error", err)
			}
			sh.mu.Lock()
			l.owed[acc]--
			l.giveBack[acc] = pendingRelease{}
			sh.mu.Unlock()
		}
	}
	if unlock.request != "" {
		p := unlock
		rel, err := lk.releaseOnce(cmd, l.hk.owner, l.unlockAcc, &p)
		if isTransport(err) {
			return err
		}
		sh.mu.Lock()
		if err == nil {
			err = sh.applyRelease(lk, l.unlockHold, l.unlockAcc, p, rel)
		}
		if hc := l.unlockCtx; hc != nil {
			if u := &hc.unlock[l.unlockAcc]; u.request == p.request {
				u.settled, u.outcome = true, err
			}
		} else if sh.holds.get(l.hk) != nil {
			// Kept for the owner's retry while it holds the lock here (see lane.settled).
			l.settled[l.unlockAcc], l.outcome[l.unlockAcc] = true, err
		}
		l.unlock, l.unlockHold, l.unlockCtx = pendingRelease{}, nil, nil
		sh.unlockAndDeliver()
	}
	return nil
}

// orphaned takes over l, owner's lane, from an acquire attempt (request r on lk) whose caller
// left it in flight, once it returned a and err (see waiter.run): a hold it took is owed (given
// back), an outcome it does not know is resolved. Then it gives the turn back and wakes the
// settler.
func (sh *shard) orphaned(l *lane, lk *lock, r request, a attempt, err error) {
	sh.mu.Lock()
	switch {
	case err == nil && a.acquired:
		l.owed[r.access]++
		l.lk = lk
	case isTransport(err):
		r.mode, r.join = resolveOnly, false
		l.lostAcquire, l.lk = r, lk
	}
	sh.mu.Unlock()
	sh.lanes.exit(l)
	sh.c.settleSoon()
}

// trySettle settles the lane of hk with commands under cmd if it has work and nobody holds its
// turn; otherwise the work is left to the turn's holder's next request, or to the watchdog.
func (sh *shard) trySettle(cmd context.Context, hk holdKey) {
	sh.mu.Lock()
	l := sh.lanes.m[hk]
	if l == nil || !l.work() {
		sh.mu.Unlock()
		return
	}
	l.refs++
	sh.mu.Unlock()
	select {
	case l.turn <- struct{}{}:
		_ = sh.settle(cmd, l)
		<-l.turn
	default:
	}
	sh.lanes.drop(l)
}
