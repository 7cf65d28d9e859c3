package rlock

import (
	"context"
	"sync"
	"time"
)

// Requests whose reply is lost. A script whose reply never arrived may or may not have run, so
// every acquire and release carries a request id, and the script records the id (and the hold
// count it left) of the last request of each client and owner in the lock hash, in the field
// NUL + client id + owner: sending the same id again returns the recorded outcome instead of
// counting again. The record names only the last request, so this client sends one request at
// a time per owner and lock: the lane. A request whose outcome is still unknown when its call
// returns stays on the lane and is settled before the lane's next request, or by the settler
// (see settle.go): a lost acquire is resolved and its hold given back, a lost Unlock is
// replayed.

// lanes is a shard's request lanes: those in use, or with work left or an outcome kept. Its
// fields, and those of its lanes but turn, are guarded by mu, the shard's mutex.
type laneTable struct {
	mu    *sync.Mutex
	c     *core      // closing ends a wait for a turn
	holds *holdTable // the shard's hold records: a lane keeps outcomes while its owner has one
	m     map[holdKey]*lane
	spare *lane // a forgotten lane that of reuses (saves two allocations)
}

// lane serialises this client's requests for one owner on one lock. turn holds a token while
// a request is in flight; every other field is guarded by the shard's mutex.
type lane struct {
	hk   holdKey
	t    *laneTable // the lanes of hk.key's shard
	turn chan struct{}
	refs int   // calls using or waiting for the lane
	lk   *lock // the lock that left work on the lane, to settle it

	lostAcquire request                  // an acquire whose reply was lost and whose caller left; id "": none
	leaves      []leaving                // queue places of calls that gave up, to leave
	owed        [accesses]int            // holds taken for callers who left, to give back
	giveBack    [accesses]pendingRelease // the give-back in flight (replayed after a lost reply)

	// spreads: losses of this hold that reach holds taken with it in one call (a MultiLock's
	// set), whose other holds are to be given back (see spreader)
	spreads []spreader

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

// leaving is the queue place of a call that gave up: its request, on its lock (whose options
// made its queue entry).
type leaving struct {
	lk *lock
	r  request
}

// of returns the lane of hk, making it if there is none. Called with t.mu held.
func (t *laneTable) of(hk holdKey) *lane {
	l := t.m[hk]
	if l == nil {
		if l = t.spare; l != nil {
			t.spare = nil
			l.hk = hk
		} else {
			l = &lane{hk: hk, t: t, turn: make(chan struct{}, 1)}
		}
		if t.m == nil {
			t.m = make(map[holdKey]*lane)
		}
		t.m[hk] = l
	}
	return l
}

// unlocking reports whether the lane of hk carries an Unlock whose outcome is unknown: it may
// have released the hold, or the hold lapsed; settling it tells which. Called with t.mu held.
func (t *laneTable) unlocking(hk holdKey) bool {
	l := t.m[hk]
	return l != nil && l.unlock.request != ""
}

// recordEnded forgets the outcomes the lane of hk keeps for retries: the owner's hold record
// on the lock ended, so a retried Unlock has nothing here to release. Called with t.mu held.
func (t *laneTable) recordEnded(hk holdKey) {
	if l := t.m[hk]; l != nil {
		l.dropOutcomes()
	}
}

// idle takes a reference to every lane that has work left and that nobody is using, and
// returns them, and whether other lanes have work left (see settler). Called with t.mu held.
func (t *laneTable) idle(ls []*lane) (_ []*lane, busy bool) {
	for _, l := range t.m {
		switch {
		case !l.work():
		case l.refs == 0:
			l.refs++
			ls = append(ls, l)
		default:
			busy = true
		}
	}
	return ls, busy
}

// take waits for the turn of the lane of hk within b, settling nothing: until b's context ends
// (its error), b's end plus replyGrace passes (errNoReply: a request of the owner is still in
// flight) or the client closes (ErrClosed); it then holds nothing.
func (t *laneTable) take(b bound, hk holdKey) (*lane, error) {
	t.mu.Lock()
	l := t.of(hk)
	l.refs++
	t.mu.Unlock()
	select {
	case l.turn <- struct{}{}:
		return l, nil
	default:
	}
	var limit <-chan time.Time
	if !b.end.IsZero() {
		tm := time.NewTimer(time.Until(b.end) + replyGrace)
		defer tm.Stop()
		limit = tm.C
	}
	var err error
	select {
	case l.turn <- struct{}{}:
		return l, nil
	case <-b.ctx.Done():
		err = b.ctx.Err()
	case <-limit:
		err = errNoReply
	case <-t.c.ctx.Done():
		err = ErrClosed
	}
	t.drop(l)
	return nil, err
}

// exit gives up the turn of l.
func (t *laneTable) exit(l *lane) {
	<-l.turn
	t.drop(l)
}

// drop drops one reference to l, forgetting it once unused and settled. The caller must not
// use l afterwards: a forgotten lane may be reused for another owner or lock (see spare).
func (t *laneTable) drop(l *lane) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l.refs--; l.refs == 0 && !l.unsettled() && t.m[l.hk] == l {
		delete(t.m, l.hk)
		if t.spare == nil {
			// Nobody holds its turn (a turn is taken and given back under a reference).
			*l = lane{t: t, turn: l.turn}
			t.spare = l
		}
	}
}

// work reports whether l carries work to settle (see settle). Called with the shard's mutex
// held.
func (l *lane) work() bool {
	return l.lostAcquire.id != "" || len(l.leaves) > 0 || l.owed != [accesses]int{} || l.unlock.request != "" ||
		len(l.spreads) > 0
}

// spreader is a loss that reaches other holds than the lost one: those taken with it in one
// call, which are then given back too. It is left on the lost hold's lane (see spreadLoss), as
// its shard's mutex is held where a loss is seen, and the other holds are in other shards.
type spreader interface {
	// spread gives back the other holds, taking their shards' mutexes one at a time, and
	// settles their lanes where it can with commands under cmd (see trySettle).
	spread(cmd context.Context)
}

// spreadLoss leaves loss s on the lane of hk, for the settler (or the lane's next request) to
// spread. Called with t.mu held.
func (t *laneTable) spreadLoss(hk holdKey, s spreader) {
	l := t.of(hk)
	l.spreads = append(l.spreads, s)
}

// kept reports whether l keeps a settled outcome for a retry (see lane.settled). Called with
// the shard's mutex held.
func (l *lane) kept() bool {
	return l.settled != [accesses]bool{} && l.t.holds.get(l.hk) != nil
}

// unsettled reports whether l must outlive its calls: work left, or an outcome kept. Called
// with the shard's mutex held.
func (l *lane) unsettled() bool { return l.work() || l.kept() }

// keepUnlock leaves Unlock request p, whose outcome is unknown, on l. Called with the shard's
// mutex held.
func (l *lane) keepUnlock(lk *lock, acc access, p pendingRelease, h *hold, hc *holdCtx) {
	l.lk, l.unlock, l.unlockAcc, l.unlockHold, l.unlockCtx = lk, p, acc, h, hc
	if hc != nil {
		hc.unlock[acc] = ctxUnlock{request: p.request}
	}
}

// takeOutcome returns the outcome of a settled Unlock that a release in access acc with hold
// context hc (nil for none) retries, and true; or false. Only a release of the same access
// takes it: through the same hold context, or, for an Unlock given none, the owner's next one
// given none. Called with the shard's mutex held.
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
// the owner's hold record on the lock ended. Called with the shard's mutex held.
func (l *lane) dropOutcomes() {
	l.settled, l.outcome = [accesses]bool{}, [accesses]error{}
	if t := l.t; l.refs == 0 && !l.work() && t.m[l.hk] == l {
		delete(t.m, l.hk)
	}
}
