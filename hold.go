package rlock

import (
	"context"
	"sync/atomic"
	"time"
)

// holdKey identifies the holds of one owner on one lock.
type holdKey struct{ key, owner string }

// hold is this process's record of an owner's holds on one lock. Its fields are guarded by
// its shard's mutex (see shards.go), but for furthest and endNano.
type hold struct {
	key, owner string
	lk         *lock                // the lock that took it, to give it back
	acc        [accesses]accessHold // its holds by access, each with a lease of its own
	watchdog   bool                 // some access renews (see accessHold.watchdog)
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
	furthest atomic.Int64 // latest lease end (UnixNano) any hold of this record was given

	// endNano is the latest local lease end of its live accesses (see live), as UnixNano: the
	// end of its hold contexts without a fixed lease, which compare it with the clock without
	// the shard's mutex (see clocked).
	endNano atomic.Int64
}

// accessHold is the part of a hold record in one access. An owner's read and write holds of an
// RWMutex each have a lease of their own in Redis, so each access keeps its own count, lease
// end and loss: one that lapses leaves the other's holds (and the record's contexts) alone.
type accessHold struct {
	count    int       // holds taken in this process and not yet released
	watchdog bool      // some hold was taken without a fixed lease: renew it
	expires  time.Time // local end of the lease, no later than Redis' (see localEnd); only moves later
	lost     bool      // the lease is gone; remaining releases in this access report ErrLockLost
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
		if a.count > 0 && !a.lost && !a.watchdog {
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

// holdCtxKey finds, in a context, the hold of one lock of one client.
type holdCtxKey struct {
	c   *Client
	key string
}

// holdCtx is the value a hold context carries under its holdCtxKey. Its unlock field is
// guarded by the mutex of h's shard.
type holdCtx struct {
	h     *hold
	token int64
	trip  context.CancelCauseFunc // ends this context and those nested in it (see clocked)

	// unlock, per access: a release given this context whose outcome was unknown when it
	// returned, until a retry of it (a release in that access with this context) takes it.
	unlock [accesses]ctxUnlock
}

// ctxUnlock is a release given a hold context whose reply was lost (see lane.keepUnlock).
type ctxUnlock struct {
	request string // its request id; "": none
	settled bool   // the lane settled it: outcome is what its retry returns
	outcome error
}

// leaseEnd is the deadline cause of a hold context with a fixed lease. It unwraps to
// ErrLockLost, or to context.DeadlineExceeded when a later hold pushed the lease past the
// context's deadline (the lock is still held, only this context ended).
type leaseEnd struct {
	h        *hold
	deadline time.Time
}

func (e *leaseEnd) superseded() bool { return e.h.furthest.Load() > e.deadline.UnixNano() }

func (e *leaseEnd) Error() string {
	if e.superseded() {
		return "hold context deadline passed; the lock is still held by a later hold"
	}
	return "lease ended: " + ErrLockLost.Error()
}

func (e *leaseEnd) Unwrap() error {
	if e.superseded() {
		return context.DeadlineExceeded
	}
	return ErrLockLost
}

// joined is a hold context whose parent can never be cancelled: values come from the parent,
// cancellation (and its cause) from the hold.
type joined struct {
	context.Context // the parent
	hold            context.Context
}

func (j joined) Done() <-chan struct{} { return j.hold.Done() }
func (j joined) Err() error            { return j.hold.Err() }

// Value looks in the parent first, then in the hold's context, which is what makes
// context.Cause find the hold's cause.
func (j joined) Value(key any) any {
	if v := j.Context.Value(key); v != nil {
		return v
	}
	return j.hold.Value(key)
}

// register records a successful attempt on lk for owner in access acc, whose lane l the caller
// holds, and returns its hold context. If the caller's context ended or the client closed
// while the script ran, the hold is given back, with commands under cmd.
func (c *Client) register(parent, cmd context.Context, lk *lock, l *lane, owner string, acc access, a attempt) (context.Context, error) {
	sh := lk.sh
	sh.mu.Lock()
	err := parent.Err()
	if c.closed.Load() {
		err = ErrClosed
	}
	if err != nil {
		sh.mu.Unlock()
		lk.owe(cmd, l, acc)
		return nil, err
	}
	hk := holdKey{lk.keys.Lock, owner}
	h := sh.holds[hk]
	if h != nil && (h.acc[acc].count > 0 && (a.count == 1 || h.acc[acc].lost) || h.ctx.Err() != nil) {
		// Redis started a fresh hold in this access (or re-entered one this process saw lost),
		// so the holds recorded here in it had already ended; or a hold context of h found the
		// clock past h's end and ended them all (see clocked) before the reaper came round to
		// it: this hold starts a new record.
		if h.releasing > 0 {
			c.finish(sh, h, context.Canceled)
		} else {
			c.lose(sh, h)
		}
		h = nil
	}
	if h == nil {
		h = &hold{key: lk.keys.Lock, owner: owner, lk: lk, token: a.token, pruneAt: 8}
		h.ctx, h.cancel = context.WithCancelCause(context.Background())
		if sh.holds == nil {
			sh.holds = make(map[holdKey]*hold)
		}
		sh.holds[hk] = h
		sh.holdStarted(h)
		if c.nholds.Add(1) == 1 && !c.watching.Load() {
			c.kickWatch() // the manager keeps no watchers, or is about to stop them
		}
	}
	s := &h.acc[acc]
	if s.count == 0 {
		*s = accessHold{} // its earlier holds were all released
	}
	s.count++
	s.watchdog = s.watchdog || lk.lease == 0
	h.watchdog = h.watchdog || s.watchdog
	lease := lk.leaseFor()
	if a.claim > 0 {
		lease = a.claim
	}
	end := localEnd(a.sent, lease)
	if a.claim > 0 && lk.lease == 0 {
		h.claimed = true
		c.renewSoon(end)
	}
	// Redis never shortens a lease (a re-entry sets it to at least its own), so neither does
	// the local end: a re-entry with a shorter lease leaves it where it was.
	if end.After(s.expires) {
		s.expires = end
		h.syncEnd()
		if at := c.reapAt.Load(); at == 0 || end.UnixNano() < at {
			c.kickReaper()
		}
	}
	if e := end.UnixNano(); e > h.furthest.Load() {
		h.furthest.Store(e)
	}
	ctx := c.holdContext(parent, lk, h, a.token, end)
	sh.unlockAndDeliver()
	return ctx, nil
}

// holdContext derives the hold context of h, whose new hold has fencing token token and (with
// a fixed lease) ends at end, from parent. Called with h's shard's mutex held.
func (c *Client) holdContext(parent context.Context, lk *lock, h *hold, token int64, end time.Time) context.Context {
	key := lk.ctxKey // holdCtxKey{c, h.key}
	prev, _ := parent.Value(key).(*holdCtx)
	ctx := parent
	var trip context.CancelCauseFunc
	switch {
	case prev != nil && prev.h == h:
		// Nested in a live hold context of h, whose cancellation reaches this one.
		trip = prev.trip
	case parent.Done() == nil:
		ctx = joined{Context: parent, hold: h.ctx}
		trip = h.cancel
	default:
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(parent)
		h.addSub(sub{ctx, cancel})
		trip = cancel
	}
	var owner any // the clocked layer carries h's owner unless ctx does
	if o, ok := Owner(ctx); !lk.ownerless && (!ok || o != h.owner) {
		owner = h.owner
	}
	var cause error = ErrLockLost
	if lk.lease > 0 {
		var stop context.CancelFunc
		cause = &leaseEnd{h: h, deadline: end}
		ctx, stop = context.WithDeadlineCause(ctx, end, cause)
		_ = stop // its timer goes when the deadline passes or the hold ends, whichever is first
	}
	c2 := clock(ctx, h, trip, lk.lease > 0, end, cause)
	c2.key, c2.hc, c2.owner = key, holdCtx{h: h, token: token, trip: trip}, owner
	return c2
}

// finish removes h and cancels its contexts with cause. Called with sh.mu held, sh being h's
// shard; the caller releases it with sh.unlock, which reports the end to the observer.
func (c *Client) finish(sh *shard, h *hold, cause error) {
	c.retire(sh, h, cause)
	h.end(cause)
}

// retire removes h from this process's holds and reports its end with cause, leaving its
// contexts alone. Called with sh.mu held, sh being h's shard.
func (c *Client) retire(sh *shard, h *hold, cause error) {
	hk := holdKey{h.key, h.owner}
	if sh.holds[hk] == h {
		delete(sh.holds, hk)
		c.nholds.Add(-1) // the watchers' manager notices none are left within a second
		if l := sh.lanes[hk]; l != nil {
			l.dropOutcomes() // the owner holds nothing here that a retried Unlock could release
		}
	}
	sh.holdEnded(h, cause)
}

// lose marks h lost in every access, removes it and cancels its contexts with ErrLockLost. Its
// hold contexts still reach it, so that Unlocks through them report ErrLockLost; nothing else
// keeps it alive (holds that lapse and are never unlocked cost nothing). Called with sh.mu
// held, sh being h's shard.
func (c *Client) lose(sh *shard, h *hold) {
	h.lost = true
	for i := range h.acc {
		h.acc[i].lost = true
	}
	c.finish(sh, h, ErrLockLost)
}

// loseIn marks h's holds in access a lost: their releases report ErrLockLost. The record and its
// contexts live on while another access is live; otherwise h is lost. Called with sh.mu held,
// sh being h's shard.
func (c *Client) loseIn(sh *shard, h *hold, a access) {
	h.acc[a].lost = true
	if !h.live() {
		c.lose(sh, h)
		return
	}
	h.syncEnd()
}
