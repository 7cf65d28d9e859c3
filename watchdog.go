package rlock

import (
	"context"
	"strconv"
	"time"
)

// renewBatch is the most holds one renewal script extends (Redisson's lockWatchdogBatchSize).
const renewBatch = 100

// watchdog is the Client's one renewal goroutine: every third of WatchdogTimeout it renews
// all watchdog holds and ends holds whose lease has run out.
func (c *Client) watchdog() {
	defer c.wg.Done()
	tick := time.NewTicker(c.opts.WatchdogTimeout / 3)
	defer tick.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-tick.C:
			c.renewHolds()
		}
	}
}

// renewHolds extends the lease of every watchdog hold, in scripts of at most renewBatch keys
// grouped by hash slot (on a cluster). A hold is lost (its contexts cancelled with
// ErrLockLost) when Redis says its owner is gone, when its fixed lease ran out, or when
// renewals have failed for a whole lease. A failed script is logged and retried next tick.
func (c *Client) renewHolds() {
	now := time.Now()
	bySlot := make(map[uint16][]*hold)
	c.mu.Lock()
	for key, until := range c.yielding {
		if now.After(until) {
			delete(c.yielding, key)
		}
	}
	for _, h := range c.holds {
		switch {
		case h.watchdog: // renewed even past its local expiry: Redis knows whether it lapsed
			s := c.slotOf(h.key)
			bySlot[s] = append(bySlot[s], h)
		case now.After(h.expires): // a fixed lease ran out
			c.lose(h)
		}
	}
	c.mu.Unlock()

	lease := strconv.FormatInt(c.opts.WatchdogTimeout.Milliseconds(), 10)
	for _, holds := range bySlot {
		for len(holds) > 0 {
			n := min(len(holds), renewBatch)
			c.renewChunk(holds[:n], lease)
			holds = holds[n:]
		}
	}
}

// slotOf groups keys for multi-key commands: by hash slot on a cluster, all in one group
// otherwise.
func (c *Client) slotOf(key string) uint16 {
	if c.cluster {
		return slot(key)
	}
	return 0
}

// renewChunk runs one renewal script for holds, which share a slot.
func (c *Client) renewChunk(holds []*hold, lease string) {
	keys := make([]string, len(holds))
	args := make([]string, 1, len(holds)+1)
	args[0] = lease
	for i, h := range holds {
		keys[i] = h.key
		args = append(args, h.owner)
	}
	sent := time.Now()
	ctx, cancel := giveUpAfter(c.ctx, c.opts.WatchdogTimeout/3)
	renewed, err := renewScript.Exec(ctx, c.rc, keys, args).AsIntSlice()
	cancel()
	if err == nil && len(renewed) != len(holds) {
		err = errBadReply
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if c.ctx.Err() != nil {
			return
		}
		c.opts.Logger.Warn("rlock: lease renewal failed; retrying next tick",
			"locks", len(holds), "first", holds[0].name, "error", err)
		for _, h := range holds {
			// Renewals have failed for a whole lease: as far as anyone can tell it lapsed.
			if !h.lost && c.holds[holdKey{h.key, h.owner}] == h && time.Now().After(h.expires) {
				c.opts.Logger.Warn("rlock: lock lost: lease ran out while renewals failed", "lock", h.name, "owner", h.owner)
				c.lose(h)
			}
		}
		return
	}
	for i, h := range holds {
		if h.lost || c.holds[holdKey{h.key, h.owner}] != h {
			continue // released, lost or replaced meanwhile
		}
		switch {
		case renewed[i] == 1:
			h.expires = sent.Add(c.opts.WatchdogTimeout)
		case h.releasing == 0:
			c.opts.Logger.Warn("rlock: lock lost: owner no longer holds it", "lock", h.name, "owner", h.owner)
			c.lose(h)
		}
	}
}

// giveUpAfter returns a context for one renewal that stops waiting for the reply after d. It
// is cancelled rather than given a deadline: rueidis closes a connection whose deadline passes
// mid-call, failing every other call multiplexed on it, while a cancelled call is merely
// abandoned (it may or may not have run; either way the next tick renews again).
func giveUpAfter(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	t := time.AfterFunc(d, cancel)
	return ctx, func() {
		t.Stop()
		cancel()
	}
}
