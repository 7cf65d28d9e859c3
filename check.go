package rlock

import (
	"context"
	"time"

	"github.com/rlock-go/rlock/internal/wire"
)

// checker checks this process's holds in Redis (internal/wire/lua/check.lua) after a restart or
// failover was noticed (see watchers.go), and ends those Redis no longer has.
type checker struct {
	c      *core
	shards *shards
}

// checkGiveUp is how long the checks' try number checks+1 waits for replies: 250ms for the
// first 20 tries in a row (a failover takes seconds), so that a call that rueidis retries
// while the node is away (connection refused, CLUSTERDOWN) does not hold back the next try
// once it is back; then 500ms doubling to 2s, for a server too slow to answer within that.
func checkGiveUp(checks int) time.Duration {
	giveUp := 250 * time.Millisecond
	if checks >= 20 {
		giveUp = min(giveUp<<min(checks-19, 3), 2*time.Second)
	}
	return giveUp
}

// verify checks every hold read-only (see check), giving up after checkGiveUp(checks) (checks:
// the tries before that did not get through). It returns the tries in a row that did not get
// through, this one included: 0 when it got through.
func (k checker) verify(checks int) int {
	ctx, cancel := giveUpAfter(k.c.ctx, checkGiveUp(checks))
	defer cancel()
	if k.check(ctx, true) {
		return 0
	}
	return checks + 1
}

// check checks every fixed-lease hold, and every watchdog hold too if all, and ends those
// whose owner Redis no longer has; it reports whether every check got through.
func (k checker) check(ctx context.Context, all bool) bool {
	c := k.c
	type group struct {
		kind string
		slot uint16
	}
	type held struct {
		sh *shard
		h  *hold
	}
	groups := make(map[group][]held)
	k.shards.each(func(sh *shard) {
		for h := range sh.holds.all() {
			if h.lost || !all && !h.fixed() {
				continue
			}
			g := group{h.lk.kind.checkKind(), c.slotOf(h.key)}
			groups[g] = append(groups[g], held{sh, h})
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
			for _, e := range chunk {
				_, hk := e.h.lk.kind.renewal()
				keys = append(keys, hk...)
				args.Owners = append(args.Owners, e.h.owner)
			}
			reply, err := c.variant(wire.Check).Exec(ctx, c.rc, keys, args.Strings()).AsIntSlice()
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
			for i, e := range chunk {
				if there.Held(i) {
					continue
				}
				h, sh := e.h, e.sh
				sh.mu.Lock()
				if !h.lost && h.releasing == 0 && sh.holds.current(h) && !sh.lanes.unlocking(holdKey{h.key, h.owner}) {
					c.opts.Logger.Warn("rlock: lock lost: the server no longer has it (restart or failover)",
						"lock", h.lk.name, "owner", h.owner)
					sh.lose(h)
				}
				sh.unlockAndDeliver()
			}
		}
	}
	return ok
}

// recheckInterval is how often a check after a lost connection is tried until it gets through.
const recheckInterval = 100 * time.Millisecond
