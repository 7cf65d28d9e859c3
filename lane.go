package rlock

import (
	"context"
	"fmt"
	"time"
)

// Requests whose reply is lost. A script whose reply never arrived may or may not have run, so
// every acquire and release carries a request id, and the script records the id (and the hold
// count it left) of the last request of each client and owner in the lock hash, in the field
// NUL + client id + owner: sending the same id again returns the recorded outcome instead of
// counting again. The record names only the last request, so this client sends one request at
// a time per owner and lock: the lane. A request whose outcome is still unknown when its call
// returns stays on the lane and is settled before the lane's next request, or by the watchdog:
// a lost acquire is resolved and its hold given back, a lost Unlock is replayed.

// lane serialises this client's requests for one owner on one lock. turn holds a token while
// a request is in flight; every other field is guarded by sh.mu.
type lane struct {
	hk   holdKey
	sh   *shard // the shard of hk.key
	turn chan struct{}
	refs int   // calls using or waiting for the lane
	lk   *lock // the lock that left work on the lane, to settle it

	lostAcquire request                  // an acquire whose reply was lost and whose caller left; id "": none
	owed        [accesses]int            // holds taken for callers who left, to give back
	giveBack    [accesses]pendingRelease // the give-back in flight (replayed after a lost reply)

	unlock     pendingRelease // an Unlock whose outcome is unknown
	unlockAcc  access         // its access
	unlockHold *hold          // the hold record that Unlock released
	unlockCtx  *holdCtx       // the hold context it was given, where its outcome goes; nil: below

	// settled, per access: the outcome of an Unlock given no hold context, settled after its
	// call returned, for the owner's next Unlock of that access without a hold context (taken
	// for its retry). It is kept while the owner has a hold record on the lock here (see kept),
	// and dropped when that record ends: a retry then returns ErrNotHeld.
	settled [accesses]bool
	outcome [accesses]error
}

// work reports whether l carries work to settle (see settle). Called with l.sh.mu held.
func (l *lane) work() bool {
	return l.lostAcquire.id != "" || l.owed != [accesses]int{} || l.unlock.request != ""
}

// kept reports whether l keeps a settled outcome for a retry (see lane.settled). Called with
// l.sh.mu held.
func (l *lane) kept() bool {
	return l.settled != [accesses]bool{} && l.sh.holds[l.hk] != nil
}

// unsettled reports whether l must outlive its calls: work left, or an outcome kept. Called
// with l.sh.mu held.
func (l *lane) unsettled() bool { return l.work() || l.kept() }

// keepUnlock leaves Unlock request p, whose outcome is unknown, on l. Called with l.sh.mu
// held.
func (l *lane) keepUnlock(lk *lock, acc access, p pendingRelease, h *hold, hc *holdCtx) {
	l.lk, l.unlock, l.unlockAcc, l.unlockHold, l.unlockCtx = lk, p, acc, h, hc
	if hc != nil {
		hc.unlock[acc] = ctxUnlock{request: p.request}
	}
}

// takeOutcome returns the outcome of a settled Unlock that a release in access acc with hold
// context hc (nil for none) retries, and true; or false. Only a release of the same access
// takes it: through the same hold context, or, for an Unlock given none, the owner's next one
// given none. Called with l.sh.mu held.
func (l *lane) takeOutcome(hc *holdCtx, acc access) (error, bool) {
	if hc != nil {
		u := &hc.unlock[acc]
		if !u.settled {
			return nil, false
		}
		err := u.outcome
		*u = ctxUnlock{}
		return err, true
	}
	if !l.settled[acc] {
		return nil, false
	}
	err := l.outcome[acc]
	l.settled[acc], l.outcome[acc] = false, nil
	return err, true
}

// dropOutcomes forgets the outcomes l keeps for retries, and l itself if nothing else keeps it:
// the owner's hold record on the lock ended. Called with l.sh.mu held.
func (l *lane) dropOutcomes() {
	l.settled, l.outcome = [accesses]bool{}, [accesses]error{}
	if sh := l.sh; l.refs == 0 && !l.work() && sh.lanes[l.hk] == l {
		delete(sh.lanes, l.hk)
	}
}

// enterLane waits for the turn of owner's lane on lk while ctx lives, then settles work left on
// it once with commands under cmd. It returns ctx's error, ErrClosed, or the transport error
// that kept the left work unsettled; the lane is then not held.
func (lk *lock) enterLane(ctx, cmd context.Context, owner string) (*lane, error) {
	l, err := lk.takeLane(ctx, owner)
	if err != nil {
		return nil, err
	}
	if err := lk.c.settle(cmd, l); err != nil {
		lk.exitLane(l)
		return nil, err
	}
	return l, nil
}

// takeLane waits for the turn of owner's lane on lk while ctx lives, settling nothing. It
// returns ctx's error or ErrClosed, holding nothing, if those end the wait.
func (lk *lock) takeLane(ctx context.Context, owner string) (*lane, error) {
	c, sh := lk.c, lk.sh
	sh.mu.Lock()
	l := sh.laneOf(holdKey{lk.keys.Lock, owner})
	l.refs++
	sh.mu.Unlock()
	select {
	case l.turn <- struct{}{}:
	default:
		select {
		case l.turn <- struct{}{}:
		case <-ctx.Done():
			c.dropLane(l)
			return nil, ctx.Err()
		case <-c.ctx.Done():
			c.dropLane(l)
			return nil, ErrClosed
		}
	}
	return l, nil
}

// laneOf returns the lane of hk, whose key is in sh, making it if there is none. Called with
// sh.mu held.
func (sh *shard) laneOf(hk holdKey) *lane {
	l := sh.lanes[hk]
	if l == nil {
		if l = sh.spare; l != nil {
			sh.spare = nil
			l.hk = hk
		} else {
			l = &lane{hk: hk, sh: sh, turn: make(chan struct{}, 1)}
		}
		if sh.lanes == nil {
			sh.lanes = make(map[holdKey]*lane)
		}
		sh.lanes[hk] = l
	}
	return l
}

// exitLane gives up the turn of l.
func (lk *lock) exitLane(l *lane) {
	<-l.turn
	lk.c.dropLane(l)
}

// dropLane drops one reference to l, forgetting it once unused and settled. The caller must
// not use l afterwards: a forgotten lane may be reused for another owner or lock (see spare).
func (c *Client) dropLane(l *lane) {
	sh := l.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if l.refs--; l.refs == 0 && !l.unsettled() && sh.lanes[l.hk] == l {
		delete(sh.lanes, l.hk)
		if sh.spare == nil {
			// Nobody holds its turn (a turn is taken and given back under a reference).
			*l = lane{sh: sh, turn: l.turn}
			sh.spare = l
		}
	}
}

// leave records that the caller holding l's turn leaves an acquire (request r) whose outcome
// is unknown, and tries to settle it within releaseBudget, with commands under cmd. Whatever
// is left is settled later (see settle). The turn is still held on return.
func (lk *lock) leave(cmd context.Context, l *lane, r request) {
	c := lk.c
	l.sh.mu.Lock()
	r.mode, r.join = resolveOnly, false
	l.lostAcquire, l.lk = r, lk
	l.sh.mu.Unlock()
	_ = c.settleWithin(cmd, l, releaseBudget)
}

// owe records a hold in access acc taken for a caller who left (its context ended while the
// script ran), and gives it back within releaseBudget, or later, with commands under cmd. The
// turn of l is held.
func (lk *lock) owe(cmd context.Context, l *lane, acc access) {
	c := lk.c
	l.sh.mu.Lock()
	l.owed[acc]++
	l.lk = lk
	l.sh.mu.Unlock()
	_ = c.settleWithin(cmd, l, releaseBudget)
}

// oweHolds queues the give-back of every hold recorded in h in access a (lost here, still held
// in Redis) on its lane, for the watchdog to settle. Called with sh.mu held, sh being h's
// shard.
func (sh *shard) oweHolds(h *hold, a access) {
	if h.acc[a].count <= 0 {
		return
	}
	l := sh.laneOf(holdKey{h.key, h.owner})
	l.owed[a] += h.acc[a].count
	l.lk = h.lk
}

// settleWithin settles l with commands under cmd, retrying transport errors with back-off
// until budget has passed. It returns the last transport error if work is left (the watchdog
// retries it).
func (c *Client) settleWithin(cmd context.Context, l *lane, budget time.Duration) error {
	err := retryTransport(budget, func() error {
		err := c.settle(cmd, l)
		if err != nil && c.ctx.Err() != nil {
			return fmt.Errorf("%w: %w", ErrClosed, err) // no retries once the client closes
		}
		return err
	})
	if err != nil {
		c.opts.Logger.Warn("rlock: could not settle a request with a lost reply; the watchdog retries",
			"lock", l.hk.key, "owner", l.hk.owner, "error", err)
	}
	return err
}

// settle does the work left on l, whose turn the caller holds, with commands under cmd: it
// resolves a lost acquire (giving its hold back if it ran), gives back owed holds, and replays
// a lost Unlock, keeping its outcome for that Unlock's retry (see takeOutcome). It stops at the
// first transport error, which it returns; errors from Redis are logged and drop the work (the
// lease bounds the damage).
func (c *Client) settle(cmd context.Context, l *lane) error {
	sh := l.sh
	sh.mu.Lock()
	lk, lost, owed, unlock := l.lk, l.lostAcquire, l.owed, l.unlock
	sh.mu.Unlock()
	if lost.id != "" {
		a, err := lk.tryAcquire(cmd, lost)
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
			err = c.released(sh, lk, l.unlockHold, l.unlockAcc, p, rel)
		}
		if hc := l.unlockCtx; hc != nil {
			if u := &hc.unlock[l.unlockAcc]; u.request == p.request {
				u.settled, u.outcome = true, err
			}
		} else if sh.holds[l.hk] != nil {
			// Kept for the owner's retry while it holds the lock here (see lane.settled).
			l.settled[l.unlockAcc], l.outcome[l.unlockAcc] = true, err
		}
		l.unlock, l.unlockHold, l.unlockCtx = pendingRelease{}, nil, nil
		sh.unlockAndDeliver()
	}
	return nil
}

// settleLanes settles, for the watchdog, every lane with work left that nobody is using, on a
// goroutine of its own (joined on Close), and returns a channel closed when it is done (nil if
// there was nothing to do). It gives up after within: a node that does not answer (stalled, or
// dialled and silent: rueidis bounds a connection's handshake by its dial timeout alone) holds
// up neither the watchdog's renewals nor, past that, the other lanes. What it gave up on stays
// on its lane (a request whose outcome is unknown is replayed under its id) for the next pass.
// Called by the watchdog goroutine only.
func (c *Client) settleLanes(within time.Duration) <-chan struct{} {
	var todo []*lane
	c.each(func(sh *shard) {
		for _, l := range sh.lanes {
			if l.refs == 0 && l.work() {
				l.refs++
				todo = append(todo, l)
			}
		}
	})
	if len(todo) == 0 {
		return nil
	}
	done := make(chan struct{})
	c.wg.Add(1) // the watchdog is in c.wg itself: Close is not waiting on a zero count
	go func() {
		defer c.wg.Done()
		defer close(done)
		ctx, cancel := giveUpAfter(c.ctx, within)
		defer cancel()
		for _, l := range todo {
			select {
			case l.turn <- struct{}{}:
				if ctx.Err() == nil {
					_ = c.settle(giveUp{ctx}, l)
				}
				<-l.turn
			default:
			}
			c.dropLane(l)
		}
	}()
	return done
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// giveUp is the context of the watchdog's settling: cancelled (never given a deadline, which
// would make rueidis close a connection under the other calls on it) once the pass gives up.
// The commands under it keep its cancellation (see detach): a call cut short leaves its work
// on the lane.
type giveUp struct{ context.Context }
