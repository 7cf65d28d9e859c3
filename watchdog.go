package rlock

import (
	"time"
)

// watchdog is the Client's renewal goroutine: every third of WatchdogTimeout it renews all
// watchdog holds and has lanes with work left settled. After a failed renewal it tries again soon
// (10ms doubling, at most a third of the lease), not a whole period later. Holds granted with
// a short claim (direct handoff) are renewed on their own before it runs out (see renewSoon).
func (c *Client) watchdog() {
	defer c.wg.Done()
	period := c.lease / 3
	settleFor := max(period/2, 50*time.Millisecond) // how long a pass's settling may take
	var settling <-chan struct{}                    // closed when the last settling ended
	t := time.NewTimer(period)
	defer t.Stop()
	soon := time.NewTimer(time.Hour)
	soon.Stop()
	defer soon.Stop()
	retry := newBackoff()
	recheck := time.NewTimer(time.Hour) // retries a check after a lost connection (see watchers.go)
	recheck.Stop()
	defer recheck.Stop()
	checks := 0 // checks in a row that did not get through
	for {
		claimedOnly, checkAll := false, false
		select {
		case <-c.ctx.Done():
			return
		case <-c.recheck:
			checkAll = true
		case <-recheck.C:
			checkAll = true
		case <-c.soon:
			soon.Reset(time.Until(time.Unix(0, c.soonAt.Load())))
			continue
		case <-soon.C:
			claimedOnly = true
		case <-t.C:
		}
		start := time.Now()
		if checkAll {
			// Each try gives up soon, so that a call that rueidis retries while the node is away
			// (connection refused, CLUSTERDOWN) does not hold back the next try once it is
			// back: 250ms for the first 20 tries (a failover takes seconds), then doubling to
			// 2s, for a server too slow to answer within that.
			giveUp := 250 * time.Millisecond
			if checks >= 20 {
				giveUp = min(giveUp<<min(checks-19, 3), 2*time.Second)
			}
			ok := c.renewHoldsWithin(false, giveUp)
			ctx, cancel := giveUpAfter(c.ctx, giveUp)
			ok = c.checkFixed(ctx) && ok
			cancel()
			checks++
			if ok {
				checks = 0
			} else {
				recheck.Reset(recheckInterval)
			}
			continue
		}
		// The lanes' work is settled beside the renewals, on a goroutine of its own that gives
		// up after settleFor: a node that does not answer holds up no renewal (see settleLanes).
		if settling == nil || isClosed(settling) {
			settling = c.settleLanes(settleFor) // (also holds the reaper ended but Redis still has)
		}
		if claimedOnly {
			c.soonAt.Store(0)
			if !c.renewHolds(true) {
				t.Reset(retry.next()) // the whole pass retries them soon
			}
			continue
		}
		next := period
		if c.renewHolds(false) {
			retry = newBackoff()
		} else {
			next = min(retry.next(), period)
		}
		// A fixed cadence: the time the renewals took counts towards the next period.
		t.Reset(max(next-time.Since(start), time.Millisecond))
	}
}

// renewSoon makes the watchdog renew the claimed holds (see hold.claimed) halfway to end, the
// local end of a claim, or sooner.
func (c *Client) renewSoon(end time.Time) {
	at := time.Now().Add(time.Until(end) / 2).UnixNano()
	for {
		cur := c.soonAt.Load()
		if cur != 0 && at >= cur {
			return
		}
		if c.soonAt.CompareAndSwap(cur, at) {
			break
		}
	}
	select {
	case c.soon <- struct{}{}:
	default:
	}
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
