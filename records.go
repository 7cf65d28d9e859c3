package rlock

import (
	"context"
	"time"
)

// The life of hold records: an acquisition registers its hold (starting a record, or adding to
// the owner's), a release's outcome takes one off, a loss ends the holds of one access or all,
// and Close ends every record. These change several parts of a shard at once (its records, its
// lanes, its observer events), so they are the shard's; each is called with sh.mu held but
// register.

// registered is what registering a hold asks of the client's goroutines.
type registered struct {
	first bool      // the first record of the client: the node watchers start
	claim time.Time // a watchdog hold granted with a claim ending then: renew it soon; zero: none
	end   time.Time // the hold's local lease end, if it moved later: the reaper ends it then
	moved bool
}

// register records a successful attempt on lk for owner in access acc and returns its hold
// context, and what the goroutines must do (see registered). If the caller's context parent
// ended or the client closed while the script ran, it records nothing and returns that error:
// the caller gives the hold back.
func (sh *shard) register(parent context.Context, lk *lock, owner string, acc access, a attempt) (context.Context, registered, error) {
	sh.mu.Lock()
	h, s, end, r, err := sh.record(parent, lk, owner, acc, a)
	if err != nil {
		sh.mu.Unlock()
		return nil, r, err
	}
	ctx := newHoldContext(parent, lk, h, s, acc, a.token, end)
	sh.unlockAndDeliver()
	return ctx, r, nil
}

// record is register without the hold context: it returns the record that counts the new hold,
// the run of acc it joined and the hold's local lease end. Called with sh.mu held.
func (sh *shard) record(parent context.Context, lk *lock, owner string, acc access, a attempt) (*hold, *accessHold, time.Time, registered, error) {
	var r registered
	err := parent.Err()
	if sh.c.closed.Load() {
		err = ErrClosed
	}
	if err != nil {
		return nil, nil, time.Time{}, r, err
	}
	h := sh.holds.get(holdKey{lk.keys.Lock, owner})
	if s := h.liveIn(acc); s != nil && (a.count == 1 || s.lost || h.ended(acc)) {
		// Redis started a fresh hold in this access (or re-entered one this process saw lost,
		// or whose contexts found the clock past their end before the reaper came round to
		// them), so the holds of the run recorded here in it had ended: that run is lost (the
		// owner's lane is this call's, so no release of it is in flight) and this hold starts
		// a new one. The owner's holds in the other access, and their contexts, live on; a
		// record with nothing else live ends lost, and this hold starts a new record.
		sh.loseIn(h, acc)
		if !sh.holds.current(h) {
			h = nil
		}
	}
	if h == nil {
		h = newHold(lk, owner, a.token)
		sh.holds.add(h)
		sh.holdStarted(h)
		r.first = sh.records.Add(1) == 1
	}
	s := h.run(acc)
	s.count++
	s.renews = s.renews || lk.lease == 0
	h.renews = h.renews || s.renews
	lease := lk.leaseFor()
	if a.claim > 0 {
		lease = a.claim
	}
	end := localEnd(a.sent, lease)
	if a.claim > 0 && lk.lease == 0 {
		h.claimed = true
		r.claim = end
	}
	// Redis never shortens a lease (a re-entry sets it to at least its own), so neither does
	// the local end: a re-entry with a shorter lease leaves it where it was.
	if end.After(s.expires) {
		s.expires = end
		h.syncEnd()
		r.end, r.moved = end, true
	}
	if e := end.UnixNano(); e > s.furthest.Load() {
		s.furthest.Store(e)
	}
	return h, s, end, r, nil
}

// applyRelease applies the outcome rel of release request p, for access acc, to h, this
// process's record of the holds it released (nil for none), and returns the error the release
// reports.
func (sh *shard) applyRelease(lk *lock, h *hold, acc access, p pendingRelease, rel releaseReply) error {
	if h != nil && !sh.holds.current(h) && !h.lost {
		h = nil // ended meanwhile; a newer record is not this request's
	}
	if rel.left < 0 && rel.total <= 0 && p.ambiguous && p.validAtSend {
		// A lost reply, and now the owner holds nothing: the lost attempt released its last
		// hold (the lease was valid when it was sent), and with it the record of the request.
		// (An owner that still holds the other access keeps the record: rw_release.lua.)
		rel.left, rel.total = 0, 0
	}
	switch {
	case rel.left < 0 && h != nil && h.acc[acc].count > 0:
		// This process held it, Redis no longer has it: its lease in this access was gone. An
		// owner that still holds the other access (an RWMutex's total) keeps those holds and
		// its contexts.
		h.acc[acc].count--
		switch {
		case h.lost:
		case rel.total <= 0:
			sh.lose(h)
		default:
			sh.loseIn(h, acc)
		}
		return lk.errorf("%w", ErrLockLost)
	case rel.left < 0:
		return lk.errorf("%w", ErrNotHeld)
	case h == nil:
	default:
		if h.acc[acc].count > 0 {
			h.acc[acc].count--
		}
		switch {
		case h.counted() && (rel.total == 0 || !h.live()):
			// Holds of the other access are still counted here, and Redis has nothing more of
			// the owner (their lease ran out there before the reaper came round to them), or
			// the reaper found their lease gone already. They are lost, not released: the
			// contexts end with ErrLockLost (those of a fixed lease whose timer has not fired
			// yet too), and their releases report it.
			sh.lose(h)
		case rel.total == 0 || !h.live():
			// The owner holds nothing more (in Redis, or here whose lease is not gone).
			sh.finish(h, context.Canceled)
		default:
			h.syncEnd() // an access it no longer holds does not keep its contexts
		}
	}
	return nil
}

// finish removes h and cancels its contexts with cause; the caller's unlockAndDeliver reports
// the end to the observer.
func (sh *shard) finish(h *hold, cause error) {
	sh.retire(h, cause)
	h.end(cause)
}

// retire removes h from this process's holds and reports its end with cause, leaving its
// contexts alone.
func (sh *shard) retire(h *hold, cause error) {
	if sh.holds.remove(h) {
		sh.records.Add(-1) // the watchers' manager notices none are left within a second
		// The owner holds nothing here that a retried Unlock could release.
		sh.lanes.recordEnded(holdKey{h.key, h.owner})
	}
	sh.holdEnded(h, cause)
}

// lose marks h lost in every access, removes it and cancels its contexts with ErrLockLost. Its
// hold contexts still reach it, so that Unlocks through them report ErrLockLost; nothing else
// keeps it alive (holds that lapse and are never unlocked cost nothing).
func (sh *shard) lose(h *hold) {
	h.lost = true
	for _, s := range h.acc {
		s.lost = true
	}
	sh.finish(h, ErrLockLost)
}

// loseIn marks h's current run of holds in access a lost: their releases report ErrLockLost.
// The record lives on while another access is live (otherwise h is lost), and so do its
// contexts but, for an RWMutex's write holds, those taken in write mode (see hold.bases).
func (sh *shard) loseIn(h *hold, a access) {
	h.acc[a].lost = true
	if !h.live() {
		sh.lose(h)
		return
	}
	if a == exclusive && h.lk.modes {
		h.endWrites()
	}
	h.syncEnd()
}

// holdsOf returns the records of the lock whose key is key. It takes sh.mu.
func (sh *shard) holdsOf(key string) []*hold {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var hs []*hold
	for h := range sh.holds.all() {
		if h.key == key {
			hs = append(hs, h)
		}
	}
	return hs
}

// loseHolds marks those of hs that are still current lost. It takes sh.mu.
func (sh *shard) loseHolds(hs []*hold) {
	sh.mu.Lock()
	defer sh.unlockAndDeliver()
	for _, h := range hs {
		if sh.holds.current(h) {
			sh.lose(h)
		}
	}
}

// endAll ends every record with cause (the client closes), leaving Redis alone.
func (sh *shard) endAll(cause error) {
	for h := range sh.holds.all() {
		sh.holdEnded(h, cause)
		h.end(cause)
	}
	sh.records.Add(-int64(sh.holds.clear()))
}

// holdStarted queues the start of hold record h for the observer and stamps its start.
func (sh *shard) holdStarted(h *hold) {
	if sh.obs == nil {
		return
	}
	h.start = time.Now()
	sh.report(Event{Type: EventHoldStarted, Lock: h.lk.info(), Owner: h.owner})
}

// holdEnded queues the end of hold record h, with cause, for the observer, once per record.
func (sh *shard) holdEnded(h *hold, cause error) {
	if sh.obs == nil || h.reported {
		return
	}
	h.reported = true
	sh.report(Event{Type: EventHoldEnded, Lock: h.lk.info(), Owner: h.owner,
		Outcome: holdOutcome(cause), Held: time.Since(h.start), Cause: cause})
}
