package rlock

import (
	"context"
	"fmt"
	"time"
)

// enterLane waits for the turn of owner's lane on lk while ctx lives, then settles work left on
// it once with commands under cmd. It returns ctx's error, ErrClosed, or the transport error
// that kept the left work unsettled; the lane is then not held.
func (sh *shard) enterLane(ctx, cmd context.Context, lk *lock, owner string) (*lane, error) {
	l, err := sh.lanes.take(ctx, holdKey{lk.keys.Lock, owner})
	if err != nil {
		return nil, err
	}
	if err := sh.settle(cmd, l); err != nil {
		sh.lanes.exit(l)
		return nil, err
	}
	return l, nil
}

// abandon records that the caller holding l's turn leaves an acquire on lk (request r) whose
// outcome is unknown, and tries to settle it within releaseBudget, with commands under cmd.
// Whatever is left is settled later (see settle). The turn is still held on return.
func (sh *shard) abandon(cmd context.Context, l *lane, lk *lock, r request) {
	sh.mu.Lock()
	r.mode, r.join = resolveOnly, false
	l.lostAcquire, l.lk = r, lk
	sh.mu.Unlock()
	_ = sh.settleWithin(cmd, l, releaseBudget)
}

// owe records a hold on lk in access acc taken for a caller who left (its context ended while the
// script ran), and gives it back within releaseBudget, or later, with commands under cmd. The
// turn of l is held.
func (sh *shard) owe(cmd context.Context, l *lane, lk *lock, acc access) {
	sh.mu.Lock()
	l.owed[acc]++
	l.lk = lk
	sh.mu.Unlock()
	_ = sh.settleWithin(cmd, l, releaseBudget)
}

// oweHolds queues the give-back of n holds of h in access a (a run lost here, still held in
// Redis) on its lane, for the watchdog to settle. Called with sh.mu held.
func (sh *shard) oweHolds(h *hold, a access, n int) {
	if n <= 0 {
		return
	}
	l := sh.lanes.of(holdKey{h.key, h.owner})
	l.owed[a] += n
	l.lk = h.lk
}

// settleWithin settles l with commands under cmd, retrying transport errors with back-off
// until budget has passed. It returns the last transport error if work is left (the watchdog
// retries it).
func (sh *shard) settleWithin(cmd context.Context, l *lane, budget time.Duration) error {
	c := sh.c
	err := retryTransport(budget, func() error {
		err := sh.settle(cmd, l)
		if err != nil && c.ctx.Err() != nil {
			return fmt.Errorf("%w: %w", ErrClosed, err) // no retries once the client closes
		}
		return err
	})
	if err != nil {
		c.opts.Logger.Warn("rlock: could not settle a request with a lost reply; the watchdog retries",
			"lock", l.hk.key, "owner", l.hk.owner, "error", err)
	}
	return err
}

// settle does the work left on l, whose turn the caller holds, with commands under cmd: it
// spreads losses to the holds taken with the lost one (see spreader), resolves a lost acquire
// (giving its hold back if it ran), gives back owed holds, and replays a lost Unlock, keeping
// its outcome for that Unlock's retry (see takeOutcome). It stops at the first transport error,
// which it returns; errors from Redis are logged and drop the work (the lease bounds the
// damage).
func (sh *shard) settle(cmd context.Context, l *lane) error {
	c := sh.c
	sh.mu.Lock()
	lk, lost, owed, unlock, spreads := l.lk, l.lostAcquire, l.owed, l.unlock, l.spreads
	l.spreads = nil
	sh.mu.Unlock()
	for _, s := range spreads {
		s.spread(cmd)
	}
	if lost.id != "" {
		a, err := lk.tryOnce(cmd, lost)
		if isTransport(err) {
			return err
		}
		if err != nil {
			c.opts.Logger.Warn("rlock: resolving a lost acquire failed", "lock", lk.name, "error", err)
		}
		sh.mu.Lock()
		l.lostAcquire = request{}
		if err == nil && a.acquired {
			l.owed[lost.access]++
			owed[lost.access]++
		}
		sh.mu.Unlock()
	}
	for acc := range owed {
		for ; owed[acc] > 0; owed[acc]-- {
			sh.mu.Lock()
			if l.giveBack[acc].request == "" {
				l.giveBack[acc] = pendingRelease{request: c.requestID()}
			}
			p := l.giveBack[acc]
			sh.mu.Unlock()
			_, err := lk.releaseOnce(cmd, l.hk.owner, access(acc), &p)
			if isTransport(err) {
				return err
			}
			if err != nil {
				c.opts.Logger.Warn("rlock: giving back a hold failed", "lock", lk.name, "error", err)
			}
			sh.mu.Lock()
			l.owed[acc]--
			l.giveBack[acc] = pendingRelease{}
			sh.mu.Unlock()
		}
	}
	if unlock.request != "" {
		p := unlock
		rel, err := lk.releaseOnce(cmd, l.hk.owner, l.unlockAcc, &p)
		if isTransport(err) {
			return err
		}
		sh.mu.Lock()
		if err == nil {
			err = sh.applyRelease(lk, l.unlockHold, l.unlockAcc, p, rel)
		}
		if hc := l.unlockCtx; hc != nil {
			if u := &hc.unlock[l.unlockAcc]; u.request == p.request {
				u.settled, u.outcome = true, err
			}
		} else if sh.holds.get(l.hk) != nil {
			// Kept for the owner's retry while it holds the lock here (see lane.settled).
			l.settled[l.unlockAcc], l.outcome[l.unlockAcc] = true, err
		}
		l.unlock, l.unlockHold, l.unlockCtx = pendingRelease{}, nil, nil
		sh.unlockAndDeliver()
	}
	return nil
}

// trySettle settles the lane of hk with commands under cmd if it has work and nobody holds its
// turn; otherwise the work is left to the turn's holder's next request, or to the watchdog.
func (sh *shard) trySettle(cmd context.Context, hk holdKey) {
	sh.mu.Lock()
	l := sh.lanes.m[hk]
	if l == nil || !l.work() {
		sh.mu.Unlock()
		return
	}
	l.refs++
	sh.mu.Unlock()
	select {
	case l.turn <- struct{}{}:
		_ = sh.settle(cmd, l)
		<-l.turn
	default:
	}
	sh.lanes.drop(l)
}

// settleLanes settles, for the watchdog, every lane with work left that nobody is using, on a
// goroutine of its own (joined on Close), and returns a channel closed when it is done (nil if
// there was nothing to do). It gives up after within: a node that does not answer (stalled, or
// dialled and silent: rueidis bounds a connection's handshake by its dial timeout alone) holds
// up neither the watchdog's renewals nor, past that, the other lanes. What it gave up on stays
// on its lane (a request whose outcome is unknown is replayed under its id) for the next pass.
// Called by the watchdog goroutine only.
func (s *shards) settleLanes(within time.Duration) <-chan struct{} {
	c := s.c
	type work struct {
		sh *shard
		l  *lane
	}
	var todo []work
	s.each(func(sh *shard) {
		for _, l := range sh.lanes.idle() {
			todo = append(todo, work{sh, l})
		}
	})
	if len(todo) == 0 {
		return nil
	}
	done := make(chan struct{})
	c.wg.Add(1) // the watchdog is in c.wg itself: Close is not waiting on a zero count
	go func() {
		defer c.wg.Done()
		defer close(done)
		ctx, cancel := giveUpAfter(c.ctx, within)
		defer cancel()
		for _, w := range todo {
			select {
			case w.l.turn <- struct{}{}:
				if ctx.Err() == nil {
					_ = w.sh.settle(giveUp{ctx}, w.l)
				}
				<-w.l.turn
			default:
			}
			w.sh.lanes.drop(w.l)
		}
	}()
	return done
}
