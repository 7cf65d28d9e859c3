package rlock

import (
	"context"
	"strings"
	"time"
)

// renewBatch is the most holds one renewal script extends (Redisson's lockWatchdogBatchSize).
const renewBatch = 100

// watchdog is the Client's renewal goroutine: every third of WatchdogTimeout it settles lanes
// with work left and renews all watchdog holds. After a failed renewal it tries again soon
// (10ms doubling, at most a third of the lease), not a whole period later.
func (c *Client) watchdog() {
	defer c.wg.Done()
	period := c.lease / 3
	t := time.NewTimer(period)
	defer t.Stop()
	retry := newBackoff()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		c.settleLanes()
		next := period
		if c.renewHolds() {
			retry = newBackoff()
		} else {
			next = min(retry.next(), period)
		}
		// A fixed cadence: the time the renewals took counts towards the next period.
		t.Reset(max(next-time.Since(start), time.Millisecond))
	}
}

// reaper is the Client's expiry goroutine: it ends each hold whose local lease end (see
// localEnd) passes before a renewal or re-entry moved it, so that no hold context outlives
// the lease Redis has, whatever the renewals are doing. A hold with only fixed leases is
// marked lost at once, but its contexts are left to their own deadlines (whose cause says
// more) for reapGrace before the rest are cancelled.
func (c *Client) reaper() {
	defer c.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	type ending struct {
		h  *hold
		at time.Time
	}
	var endings []ending
	for {
		c.mu.Lock()
		now := time.Now()
		var next time.Time
		soonest := func(at time.Time) {
			if next.IsZero() || at.Before(next) {
				next = at
			}
		}
		kept := endings[:0]
		for _, e := range endings {
			if now.Before(e.at) {
				kept = append(kept, e)
				soonest(e.at)
				continue
			}
			e.h.end(ErrLockLost)
		}
		clear(endings[len(kept):])
		endings = kept
		for _, h := range c.holds {
			switch {
			case now.Before(h.expires):
				soonest(h.expires)
			case h.watchdog:
				c.opts.Logger.Warn("rlock: lock lost: lease ran out before a renewal succeeded",
					"lock", h.lk.name, "owner", h.owner)
				c.lose(h)
			default:
				h.lost = true
				c.retire(h, ErrLockLost)
				endings = append(endings, ending{h, now.Add(reapGrace)})
				soonest(now.Add(reapGrace))
			}
		}
		c.reapAt = next
		c.unlock()
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		if !next.IsZero() {
			t.Reset(time.Until(next))
		}
		select {
		case <-c.ctx.Done():
			c.mu.Lock()
			for _, e := range endings {
				e.h.end(ErrClosed)
			}
			c.mu.Unlock()
			return
		case <-t.C:
		case <-c.reap:
		}
	}
}

// reapGrace is how long the reaper leaves the contexts of a fixed-lease hold to their
// deadlines before it cancels what remains.
const reapGrace = 100 * time.Millisecond

// kickReaper makes the reaper look again. Called with c.mu held.
func (c *Client) kickReaper() {
	c.reapAt = time.Time{}
	select {
	case c.reap <- struct{}{}:
	default:
	}
}

// renewHolds extends the lease of every watchdog hold, in scripts of at most renewBatch keys
// grouped by hash slot (on a cluster). A hold is lost (its contexts cancelled with
// ErrLockLost) when Redis says its owner is gone. It reports whether every script ran; a
// failed one is logged, and the watchdog retries soon.
func (c *Client) renewHolds() bool {
	type group struct {
		script luaScript
		slot   uint16
	}
	bySlot := make(map[group][]*hold)
	c.mu.Lock()
	now := time.Now()
	for key, until := range c.yielding {
		if now.After(until) {
			delete(c.yielding, key)
		}
	}
	for _, h := range c.holds {
		if h.watchdog {
			script, _ := h.lk.kind.renewal(h.lk)
			g := group{script, c.slotOf(h.key)}
			bySlot[g] = append(bySlot[g], h)
		}
	}
	c.mu.Unlock()

	ok := true
	for _, holds := range bySlot {
		for len(holds) > 0 {
			n := min(len(holds), renewBatch)
			ok = c.renewChunk(holds[:n]) && ok
			holds = holds[n:]
		}
	}
	return ok
}

// slotOf groups keys for multi-key commands: by hash slot on a cluster, all in one group
// otherwise.
func (c *Client) slotOf(key string) uint16 {
	if c.cluster {
		return slot(key)
	}
	return 0
}

// renewChunk runs one renewal script for holds, which share a kind's renewal script and a
// slot, and reports whether it ran.
func (c *Client) renewChunk(holds []*hold) bool {
	script, _ := holds[0].lk.kind.renewal(holds[0].lk)
	keys := make([]string, 0, 2*len(holds))
	args := make([]string, 1, len(holds)+1)
	args[0] = c.leaseMs
	for _, h := range holds {
		_, hk := h.lk.kind.renewal(h.lk)
		keys = append(keys, hk...)
		args = append(args, h.owner)
	}
	sent := time.Now()
	ctx, cancel := giveUpAfter(c.ctx, c.lease/3)
	renewed, err := script.on(c).Exec(ctx, c.rc, keys, args).AsIntSlice()
	cancel()
	if err == nil && len(renewed) != len(holds) {
		err = errBadReply
	}
	c.mu.Lock()
	defer c.unlock()
	if err != nil {
		if c.ctx.Err() == nil {
			c.opts.Logger.Warn("rlock: lease renewal failed; retrying soon",
				"locks", len(holds), "first", holds[0].lk.name, "error", err)
			if c.obs != nil {
				c.events = append(c.events, Event{Type: EventRenewalFailed, Lock: holds[0].lk.info(),
					Cause: err, Locks: len(holds)})
			}
		}
		return false
	}
	end := localEnd(sent, c.lease)
	for i, h := range holds {
		hk := holdKey{h.key, h.owner}
		if h.lost && renewed[i] == 1 && strings.HasPrefix(h.owner, c.id) {
			// The reaper ended it while this renewal was in flight, which extended it after
			// all: give its holds back rather than leave a lock held by nobody. (An owner
			// from a context may also hold through another process: its lease bounds it.)
			c.oweHolds(h)
			continue
		}
		if h.lost || c.holds[hk] != h {
			continue // released, lost or replaced meanwhile
		}
		switch {
		case renewed[i] == 1:
			h.expires = end
		case h.releasing > 0:
			// An Unlock in flight released it.
		case c.lanes[hk] != nil && c.lanes[hk].unlock.request != "":
			// An Unlock whose reply was lost released it, or it lapsed: settling that Unlock
			// tells which.
		default:
			c.opts.Logger.Warn("rlock: lock lost: owner no longer holds it", "lock", h.lk.name, "owner", h.owner)
			c.lose(h)
		}
	}
	return true
}

// giveUpAfter returns a context for one renewal that stops waiting for the reply after d. It
// is cancelled rather than given a deadline: rueidis closes a connection whose deadline passes
// mid-call, failing every other call multiplexed on it, while a cancelled call is merely
// abandoned (it may or may not have been sent; either way the watchdog renews again).
func giveUpAfter(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	t := time.AfterFunc(d, cancel)
	return ctx, func() {
		t.Stop()
		cancel()
	}
}
