package rlock

import (
	"context"
	"iter"
	"sync/atomic"
	"time"
)

// holdKey identifies the holds of one owner on one lock.
type holdKey struct{ key, owner string }

// holds is a shard's hold records: this process's holds, by lock key and owner. It is guarded
// by the shard's mutex.
type holdTable struct{ m map[holdKey]*hold }

// get returns the record of hk, or nil.
func (t *holdTable) get(hk holdKey) *hold { return t.m[hk] }

// current reports whether h is the record of its lock and owner (not ended, nor replaced).
func (t *holdTable) current(h *hold) bool { return t.m[holdKey{h.key, h.owner}] == h }

// add records h, the first record of its lock and owner or one replacing an ended record.
func (t *holdTable) add(h *hold) {
	if t.m == nil {
		t.m = make(map[holdKey]*hold)
	}
	t.m[holdKey{h.key, h.owner}] = h
}

// remove forgets h and reports whether it was current.
func (t *holdTable) remove(h *hold) bool {
	if !t.current(h) {
		return false
	}
	delete(t.m, holdKey{h.key, h.owner})
	return true
}

// all yields every record (one may be removed meanwhile).
func (t *holdTable) all() iter.Seq[*hold] {
	return func(yield func(*hold) bool) {
		for _, h := range t.m {
			if !yield(h) {
				return
			}
		}
	}
}

// clear forgets every record and returns how many there were.
func (t *holdTable) clear() int {
	n := len(t.m)
	t.m = nil
	return n
}

// hold is this process's record of an owner's holds on one lock. Its fields are guarded by
// its shard's mutex (see shards.go), but for furthest and endNano.
type hold struct {
	key, owner string
	lk         *lock                // the lock that took it, to give it back
	acc        [accesses]accessHold // its holds by access, each with a lease of its own
	renews     bool                 // some access is renewed by the watchdog (see accessHold.renews)
	claimed    bool                 // a watchdog hold granted with a claim, not renewed yet
	token      int64
	lost       bool      // the record ended lost: remaining Unlocks report ErrLockLost
	releasing  int       // Unlock calls in flight: a renewal that finds no owner is theirs
	start      time.Time // when the record was made (only with an observer)
	reported   bool      // its end was reported to the observer

	// ctx is done when the hold ends, with its cause; hold contexts whose parent cannot be
	// cancelled derive their cancellation from it alone and cost the hold nothing.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// subs cancels the hold contexts derived from parents that can be cancelled: each is kept
	// while its context lives, and those that ended are pruned as new ones are added.
	subs     []sub
	pruneAt  int
	// furthest is, per access, the latest lease end (UnixNano) any hold of this record in it
	// was given: a fixed-lease context whose deadline passed before it is superseded by a later
	// hold of its own access (the other access's lease does not hold this one).
	furthest [accesses]atomic.Int64

	// endNano is the latest local lease end of its live accesses (see live), as UnixNano: the
	// end of its hold contexts without a fixed lease, which compare it with the clock without
	// the shard's mutex (see clocked).
	endNano atomic.Int64
}

// accessHold is the part of a hold record in one access. An owner's read and write holds of an
// RWMutex each have a lease of their own in Redis, so each access keeps its own count, lease
// end and loss: one that lapses leaves the other's holds (and the record's contexts) alone.
type accessHold struct {
	count   int       // holds taken in this process and not yet released
	renews  bool      // some hold was taken without a fixed lease: the watchdog renews it
	expires time.Time // local end of the lease, no later than Redis' (see localEnd); only moves later
	lost    bool      // the lease is gone; remaining releases in this access report ErrLockLost
	// unacked: a renewal extended it in Redis but too few replicas acknowledged it (see
	// Options.SyncReplicas), so Redis' lease outlasts expires; if it is lost so, it is given
	// back in Redis.
	unacked bool
}

// live reports whether h has holds in some access whose lease is not known to be gone. The
// record's hold contexts live while it does (and the clock has not passed endNano).
func (h *hold) live() bool {
	for _, a := range h.acc {
		if a.count > 0 && !a.lost {
			return true
		}
	}
	return false
}

// counted reports whether h counts holds in some access, lost or not.
func (h *hold) counted() bool {
	for _, a := range h.acc {
		if a.count > 0 {
			return true
		}
	}
	return false
}

// fixed reports whether h has live holds in an access that nothing renews (only fixed
// leases): the watchdog's renewals do not check them.
func (h *hold) fixed() bool {
	for _, a := range h.acc {
		if a.count > 0 && !a.lost && !a.renews {
			return true
		}
	}
	return false
}

// syncEnd sets endNano to the latest local lease end of h's live accesses, if it has any.
// Called with its shard's mutex held, whenever one of them moves or ends.
func (h *hold) syncEnd() {
	var end time.Time
	for _, a := range h.acc {
		if a.count > 0 && !a.lost && a.expires.After(end) {
			end = a.expires
		}
	}
	if !end.IsZero() {
		h.endNano.Store(end.UnixNano())
	}
}

// sub is a hold context with a cancellable parent.
type sub struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// validIn reports whether h's lease in access a has not run out as far as this process knows.
func (h *hold) validIn(a access) bool {
	return h != nil && !h.lost && !h.acc[a].lost && time.Now().Before(h.acc[a].expires)
}

// end cancels every hold context of h with cause.
func (h *hold) end(cause error) {
	h.cancel(cause)
	for _, s := range h.subs {
		s.cancel(cause)
	}
	h.subs = nil
}

// addSub records a hold context with a cancellable parent, pruning ended ones first when the
// list has doubled since the last pruning, so it stays proportional to the live ones.
func (h *hold) addSub(s sub) {
	if len(h.subs) >= h.pruneAt {
		live := h.subs[:0]
		for _, s := range h.subs {
			if s.ctx.Err() == nil {
				live = append(live, s)
			}
		}
		clear(h.subs[len(live):])
		h.subs = live
		h.pruneAt = max(2*len(live), 8)
	}
	h.subs = append(h.subs, s)
}

// localEnd is the moment this process takes a lease of d sent at sent to end: early enough
// that Redis, which starts the lease when the request arrives, still has it then. The margin is
// 1ms and 0.1% of d, whatever d: Redis counts a lease from the whole millisecond the script
// runs in (a read-write mutex's or a semaphore's lapses when the server's clock reaches its
// end), up to 1ms before the request arrived; the 0.1% covers clock rate differences. (A lease
// of 1ms ends at once.)
func localEnd(sent time.Time, d time.Duration) time.Time {
	return sent.Add(d - time.Millisecond - d/1000)
}
