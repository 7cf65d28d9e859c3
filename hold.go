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
// its shard's mutex (see shards.go), but for its atomics (endNano, and its runs').
type hold struct {
	key, owner string
	lk         *lock // the lock that took it, to give it back
	// acc is its current run of holds in each access (see accessHold), each with a lease of its
	// own; runs keeps the first run of each, so that most records need no other.
	acc       [accesses]*accessHold
	runs      [accesses]accessHold
	renews    bool // some access is renewed by the watchdog (see accessHold.renews)
	claimed   bool // a watchdog hold granted with a claim, not renewed yet
	token     int64
	lost      bool      // the record ended lost: remaining Unlocks report ErrLockLost
	releasing int       // Unlock calls in flight: a renewal that finds no owner is theirs
	start     time.Time // when the record was made (only with an observer)
	reported  bool      // its end was reported to the observer

	// bases are done when the record ends, with its cause, each for the hold contexts taken in
	// one access: those whose parent cannot be cancelled derive their cancellation from it
	// alone and cost the hold nothing. An RWMutex's write base also ends when the write lease is
	// lost (see loseIn), though the owner's read holds live on: a context taken in write mode
	// never outlives the write lease Redis has. Each is made when the first hold of its access
	// joins the record (see base), so a record held in one access has one.
	bases [accesses]base
	// subs cancels the hold contexts derived from parents that can be cancelled: each is kept
	// while its context lives, and those that ended are pruned as new ones are added.
	subs    []sub
	pruneAt int

	// endNano is the latest local lease end of its live accesses (see live), as UnixNano: the
	// end of its hold contexts without a fixed lease, which compare it with the clock without
	// the shard's mutex (see clocked).
	endNano atomic.Int64
}

// newHold returns a record of owner's holds on lk, holding nothing yet, with fencing token
// token.
func newHold(lk *lock, owner string, token int64) *hold {
	h := &hold{key: lk.keys.Lock, owner: owner, lk: lk, token: token, pruneAt: 8}
	for i := range h.acc {
		h.acc[i] = &h.runs[i]
	}
	return h
}

// base is what ends the hold contexts of one access of a record (see hold.bases).
type base struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// base returns h's base in access a for a new hold context, making one if there is none or it
// ended (the write lease was lost, or a hold context found the clock past its end: see
// clocked).
func (h *hold) base(a access) base {
	if b := h.bases[a]; b.ctx != nil && b.ctx.Err() == nil {
		return b
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	h.bases[a] = base{ctx, cancel}
	return h.bases[a]
}

// ended reports whether the hold contexts of h's holds in access a ended before the reaper
// came round to them: a hold context found the clock past their end (see clocked).
func (h *hold) ended(a access) bool {
	b := h.bases[a]
	return b.ctx != nil && b.ctx.Err() != nil
}

// accessHold is one run of an owner's holds in one access: from the hold that finds none of it
// here to the release of its last, or its loss. An owner's read and write holds of an RWMutex
// each have a lease of their own in Redis, so each access keeps its own count, lease end and
// loss: one that lapses leaves the other's holds alone. A record keeps the current run of each
// access; a hold context and a renewal keep the run they were made for, so that what comes
// for a run that ended (a renewal's late reply, a lost hold's release) never touches the next.
type accessHold struct {
	count   int       // holds taken in this process and not yet released
	renews  bool      // some hold was taken without a fixed lease: the watchdog renews it
	expires time.Time // local end of the lease, no later than Redis' (see localEnd); only moves later
	lost    bool      // the lease is gone; remaining releases in this run report ErrLockLost
	// unacked: a renewal extended it in Redis but too few replicas acknowledged it (see
	// Options.SyncReplicas), so Redis' lease outlasts expires; if it is lost so, it is given
	// back in Redis.
	unacked bool

	// furthest is the latest lease end (UnixNano) any hold of the run was given: a fixed-lease
	// context whose deadline passed before it was superseded by a later hold (see leaseEnd).
	furthest atomic.Int64
	// endNano, for a run of an RWMutex's write holds, is expires (UnixNano) while it has holds
	// and its lease is not known to be gone, and 0 once they are all released (a downgrade):
	// the end of the hold contexts taken in it without a fixed lease (the record's, h.endNano,
	// when 0; see clocked).
	endNano atomic.Int64
}

// fresh reports whether s is a first run that no hold has joined yet.
func (s *accessHold) fresh() bool { return s.count == 0 && s.expires.IsZero() }

// run returns the run of h in access a that a new hold joins, making a new run if the current
// one ended (released or lost).
func (h *hold) run(a access) *accessHold {
	s := h.acc[a]
	if s.count > 0 && !s.lost || s.fresh() {
		return s
	}
	s = new(accessHold)
	h.acc[a] = s
	return s
}

// liveIn returns the current run of h (nil: none) in access a if it counts holds, lost or not;
// or nil.
func (h *hold) liveIn(a access) *accessHold {
	if h == nil || h.acc[a].count == 0 {
		return nil
	}
	return h.acc[a]
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

// syncEnd sets endNano to the latest local lease end of h's live accesses, if it has any, and
// that of an RWMutex's write run (see accessHold.endNano). Called with its shard's mutex held,
// whenever one of them moves or ends.
func (h *hold) syncEnd() {
	var end time.Time
	for _, a := range h.acc {
		if a.count > 0 && !a.lost && a.expires.After(end) {
			end = a.expires
		}
	}
	if w := h.acc[exclusive]; h.lk.modes {
		switch {
		case w.count == 0:
			w.endNano.Store(0)
		case !w.lost:
			w.endNano.Store(w.expires.UnixNano())
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
	acc    access // the access it was taken in
}

// validIn reports whether h's lease in access a has not run out as far as this process knows.
func (h *hold) validIn(a access) bool {
	return h != nil && !h.lost && !h.acc[a].lost && time.Now().Before(h.acc[a].expires)
}

// end cancels every hold context of h with cause.
func (h *hold) end(cause error) {
	for _, b := range h.bases {
		if b.cancel != nil {
			b.cancel(cause)
		}
	}
	for _, s := range h.subs {
		s.cancel(cause)
	}
	h.subs = nil
}

// endWrites cancels the hold contexts taken in write mode of h, an RWMutex's record, with
// ErrLockLost: the owner's write lease is lost, though its read holds live on.
func (h *hold) endWrites() {
	if b := h.bases[exclusive]; b.cancel != nil {
		b.cancel(ErrLockLost)
	}
	left := h.subs[:0]
	for _, s := range h.subs {
		if s.acc == exclusive {
			s.cancel(ErrLockLost)
			continue
		}
		left = append(left, s)
	}
	clear(h.subs[len(left):])
	h.subs = left
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
// that Redis, which starts the lease when the request arrives, still has it then. Redis is sent
// d cut to whole milliseconds, so the end counts from that. The margin is 1ms and 0.1% of d,
// whatever d: Redis counts a lease from the whole millisecond the script runs in (a read-write
// mutex's or a semaphore's lapses when the server's clock reaches its end), up to 1ms before
// the request arrived; the 0.1% covers clock rate differences. (A lease of 1ms ends at once.)
func localEnd(sent time.Time, d time.Duration) time.Time {
	return sent.Add(d.Truncate(time.Millisecond) - time.Millisecond - d/1000)
}
