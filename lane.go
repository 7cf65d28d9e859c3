package rlock

import (
	"context"
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
