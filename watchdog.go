package rlock

import (
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

// renewHolds extends the lease of every live watchdog hold, in scripts of at most renewBatch
// keys grouped by hash slot (on a cluster). A hold whose owner is gone from Redis, or whose lease ran out
// locally (a fixed lease, or renewals failing for a whole lease), is lost: its contexts are
// cancelled with ErrLockLost. A failed script is logged and its holds are retried next tick.
func (c *Client) renewHolds() {
	now := time.Now()
	bySlot := make(map[uint16][]*hold)
	c.mu.Lock()
	for _, h := range c.holds {
		switch {
		case now.After(h.expires):
			c.lose(h)
		case h.watchdog:
			s := c.slotOf(h.key)
			bySlot[s] = append(bySlot[s], h)
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
	if err != nil {
		if c.ctx.Err() == nil {
			c.opts.Logger.Warn("rlock: lease renewal failed; retrying next tick",
				"locks", len(holds), "first", holds[0].name, "error", err)
		}
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
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
