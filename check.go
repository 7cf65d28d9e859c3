package rlock

import (
	"context"
	"time"

	"github.com/rlock-go/rlock/internal/wire"
)

// verifyHolds checks every hold read-only (checkHolds), giving up after 250ms for the first 20
// tries in a row (checks: the tries before that did not get through), then 500ms doubling to
// 2s for a server too slow to answer within that. It returns the tries in a row that did not
// get through, this one included: 0 when it got through.
func (c *Client) verifyHolds(checks int) int {
	giveUp := 250 * time.Millisecond
	if checks >= 20 {
		giveUp = min(giveUp<<min(checks-19, 3), 2*time.Second)
	}
	ctx, cancel := giveUpAfter(c.ctx, giveUp)
	defer cancel()
	if c.checkHolds(ctx, true) {
		return 0
	}
	return checks + 1
}

// checkFixed checks every fixed-lease hold (the watchdog's renewal checks the others) and ends
// those whose owner Redis no longer has; it reports whether every check got through.
func (c *Client) checkFixed(ctx context.Context) bool { return c.checkHolds(ctx, false) }

// checkHolds checks every fixed-lease hold, and every watchdog hold too if all, and ends those
// whose owner Redis no longer has; it reports whether every check got through.
func (c *Client) checkHolds(ctx context.Context, all bool) bool {
	type group struct {
		kind string
		slot uint16
	}
	groups := make(map[group][]*hold)
	c.each(func(sh *shard) {
		for _, h := range sh.holds {
			if h.lost || !all && !h.fixed() {
				continue
			}
			k := wire.CheckMutex
			switch h.lk.kind.(type) {
			case rwKind:
				k = wire.CheckRW
			case semKind:
				k = wire.CheckSem
			}
			g := group{k, c.slotOf(h.key)}
			groups[g] = append(groups[g], h)
		}
	})
	ok := true
	for g, holds := range groups {
		for len(holds) > 0 {
			n := min(len(holds), renewBatch)
			chunk := holds[:n]
			holds = holds[n:]
			keys := make([]string, 0, 2*n)
			args := wire.CheckArgs{Kind: g.kind, Owners: make([]string, 0, n)}
			for _, h := range chunk {
				_, hk := h.lk.kind.renewal()
				keys = append(keys, hk...)
				args.Owners = append(args.Owners, h.owner)
			}
			reply, err := c.script(wire.Check).Exec(ctx, c.rc, keys, args.Strings()).AsIntSlice()
			var there wire.PerHold
			if err == nil {
				if there, err = wire.ParsePerHold(reply, len(chunk)); err != nil {
					err = errBadReply
				}
			}
			if err != nil {
				ok = false
				continue
			}
			for i, h := range chunk {
				if there.Held(i) {
					continue
				}
				hk := holdKey{h.key, h.owner}
				sh := h.lk.sh
				sh.mu.Lock()
				if !h.lost && h.releasing == 0 && sh.holds[hk] == h &&
					(sh.lanes[hk] == nil || sh.lanes[hk].unlock.request == "") {
					c.opts.Logger.Warn("rlock: lock lost: the server no longer has it (restart or failover)",
						"lock", h.lk.name, "owner", h.owner)
					c.lose(sh, h)
				}
				sh.unlockAndDeliver()
			}
		}
	}
	return ok
}
