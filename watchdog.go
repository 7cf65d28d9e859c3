package rlock

import (
	"sync/atomic"
	"time"
)

// watchdog is the Client's renewal goroutine: every third of WatchdogTimeout it renews all
// watchdog holds and wakes the settler. After a failed renewal it tries again
// soon (10ms doubling, at most a third of the lease), not a whole period later. Holds granted
// with a short claim (direct handoff) are renewed on their own before it runs out (see
// renewSoon). After a restart or failover was noticed it checks every hold (see checkNow).
type watchdog struct {
	c       *core
	shards  *shards
	renewer renewer
	checker checker
	soon    chan struct{} // wakes it: claimed holds are to be renewed at soonAt
	recheck chan struct{} // wakes it: check every hold now (see watchers.go)
	// soonAt is when it renews claimed holds (UnixNano); 0: not planned.
	soonAt atomic.Int64
	// checking: a check of the fixed-lease holds is in flight (see checkFixed).
	checking atomic.Bool
}

// init sets w up for the client of c, whose state is s.
func (w *watchdog) init(c *core, s *shards) {
	w.c, w.shards = c, s
	w.renewer, w.checker = renewer{c, s, &renewFlights{}}, checker{c, s}
	w.soon, w.recheck = make(chan struct{}, 1), make(chan struct{}, 1)
}

// run is the goroutine; it returns when the client closes.
func (w *watchdog) run() {
	c := w.c
	defer c.wg.Done()
	period := c.lease / 3
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
		case <-w.recheck:
			checkAll = true
		case <-recheck.C:
			checkAll = true
		case <-w.soon:
			soon.Reset(time.Until(time.Unix(0, w.soonAt.Load())))
			continue
		case <-soon.C:
			claimedOnly = true
		case <-t.C:
		}
		start := time.Now()
		if checkAll {
			// Each try gives up soon (see checkGiveUp): the watchdog holds are renewed, the
			// fixed-lease holds checked.
			giveUp := checkGiveUp(checks)
			ok := w.renewer.renewWithin(false, giveUp)
			ok = w.checkFixed(giveUp) && ok
			checks++
			if ok {
				checks = 0
			} else {
				recheck.Reset(recheckInterval)
			}
			continue
		}
		// The lanes' work is the settler's, beside the renewals (a safety net: whoever leaves
		// work wakes it).
		c.settleSoon()
		if claimedOnly {
			w.soonAt.Store(0)
			if !w.renewer.renew(true) {
				t.Reset(retry.next()) // the whole pass retries them soon
			}
			continue
		}
		next := period
		if w.renewer.renew(false) {
			retry = newBackoff()
		} else {
			next = min(retry.next(), period)
		}
		// A fixed cadence: the time the renewals took counts towards the next period.
		t.Reset(max(next-time.Since(start), time.Millisecond))
	}
}

// checkFixed checks the fixed-lease holds (see checker.check) on a goroutine of the client that
// gives up after giveUp, and waits for it that long at most: a node in a handshake (which
// rueidis bounds by its dial timeout alone, whatever the context) holds up no renewal. It
// reports whether every check got through; while a check is in flight, the next is skipped.
func (w *watchdog) checkFixed(giveUp time.Duration) bool {
	c := w.c
	if !w.checking.CompareAndSwap(false, true) {
		return false
	}
	if !c.startFlight() {
		w.checking.Store(false)
		return false
	}
	done := make(chan bool, 1)
	go func() {
		defer c.wg.Done()
		defer w.checking.Store(false)
		ctx, cancel := giveUpAfter(c.ctx, giveUp)
		defer cancel()
		done <- w.checker.check(ctx, false)
	}()
	t := time.NewTimer(giveUp)
	defer t.Stop()
	select {
	case ok := <-done:
		return ok
	case <-t.C:
	case <-c.ctx.Done():
	}
	return false
}

// renewSoon makes the watchdog renew the claimed holds (see hold.claimed) halfway to end, the
// local end of a claim, or sooner.
func (w *watchdog) renewSoon(end time.Time) {
	at := time.Now().Add(time.Until(end) / 2).UnixNano()
	for {
		cur := w.soonAt.Load()
		if cur != 0 && at >= cur {
			return
		}
		if w.soonAt.CompareAndSwap(cur, at) {
			break
		}
	}
	select {
	case w.soon <- struct{}{}:
	default:
	}
}

// checkNow makes the watchdog check every hold at once (renewing the watchdog holds, checking
// the fixed-lease ones), and again every recheckInterval until a check gets through.
func (w *watchdog) checkNow() {
	select {
	case w.recheck <- struct{}{}:
	default:
	}
}
