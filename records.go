package rlock

import (
	"context"
	"time"
)

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

// holdStarted queues the start of hold record h for the observer and stamps its start.
// Called with sh.mu held, sh being h's shard.
func (sh *shard) holdStarted(h *hold) {
	if sh.obs == nil {
		return
	}
	h.start = time.Now()
	sh.events = append(sh.events, Event{Type: EventHoldStarted, Lock: h.lk.info(), Owner: h.owner})
}

// holdEnded queues the end of hold record h, with cause, for the observer, once per record.
// Called with sh.mu held, sh being h's shard.
func (sh *shard) holdEnded(h *hold, cause error) {
	if sh.obs == nil || h.reported {
		return
	}
	h.reported = true
	sh.events = append(sh.events, Event{Type: EventHoldEnded, Lock: h.lk.info(), Owner: h.owner,
		Outcome: holdOutcome(cause), Held: time.Since(h.start), Cause: cause})
}
