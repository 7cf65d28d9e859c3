package rlock

import (
	"context"
	"time"

	"github.com/rlock-go/rlock/internal/wire"
)

// release is Unlock, RUnlock, Release and Resign: it releases one hold in access acc of the
// owner in ctx (of a Semaphore or an election: the hold ctx carries), with its Redis commands
// under cmd (the observer's context; see detach). See Mutex.Unlock for its errors.
func (h *locker) release(ctx, cmd context.Context, acc access) error {
	lk, sh := &h.lock, h.sh
	if err := lk.check(ctx); err != nil {
		return err
	}
	hc := heldIn(ctx, lk)
	var owner string
	if lk.ownerless {
		if hc == nil {
			return lk.errorf("%w: the context carries no hold; pass the context that Acquire or Campaign returned", ErrNotHeld)
		}
		owner = hc.h.owner
	} else {
		var ok bool
		var err error
		if owner, ok, err = lk.callerOwner(ctx); err != nil {
			return err
		} else if !ok {
			return lk.errorf("%w: the context carries no owner; pass the context that Lock returned", ErrNotHeld)
		}
		if hc != nil && hc.h.owner != owner {
			hc = nil // a hold context of another owner, re-labelled with WithOwner
		}
	}
	sh.mu.Lock()
	if s := hc.lostRun(acc); s != nil {
		// A hold of this context in this access whose loss the library already saw: Redis is
		// not touched (the owner id may hold the lock anew, through another process or a later
		// run of holds), and the holds of the other access (and their contexts) live on.
		s.count--
		sh.mu.Unlock()
		return lk.errorf("%w", ErrLockLost)
	}
	sh.mu.Unlock()

	cmd = detach(cmd)
	l, err := sh.lanes.take(context.Background(), holdKey{lk.keys.Lock, owner})
	if err != nil {
		return err
	}
	defer sh.lanes.exit(l)
	if err := sh.settleWithin(cmd, l, releaseBudget); err != nil {
		return lk.errorf("release: %w", err)
	}

	sh.mu.Lock()
	if res, ok := l.takeOutcome(hc, acc); ok {
		sh.mu.Unlock()
		return res // this call retries a release whose request was settled meanwhile
	}
	if s := hc.lostRun(acc); s != nil {
		// Lost while this call waited for the lane (the reaper may also have removed the
		// record, which the lookup below would no longer find: ErrNotHeld): as above.
		s.count--
		sh.mu.Unlock()
		return lk.errorf("%w", ErrLockLost)
	}
	rec := sh.holds.get(holdKey{lk.keys.Lock, owner})
	p := pendingRelease{request: lk.core.requestID(), validAtSend: rec.validIn(acc)}
	if rec != nil {
		rec.releasing++
	}
	sh.mu.Unlock()

	var rel releaseReply
	err = retryTransport(releaseBudget, func() (err error) {
		rel, err = lk.releaseOnce(cmd, owner, acc, &p)
		return err
	})

	sh.mu.Lock()
	defer sh.unlockAndDeliver()
	if rec != nil {
		rec.releasing--
	}
	if err != nil {
		if p.ambiguous {
			l.keepUnlock(lk, acc, p, rec, hc)
		}
		return err
	}
	return sh.applyRelease(lk, rec, acc, p, rel)
}

// observeRelease runs a release call between the observer's Start and End. Without an
// observer its commands run under context.Background(): detaching ctx would cost two
// allocations (the hold context's done channel, made on demand, and the detached context).
func (h *locker) observeRelease(ctx context.Context, op Op, acc access) error {
	obs := h.core.obs
	if obs == nil || ctx == nil {
		return h.release(ctx, context.Background(), acc)
	}
	start := time.Now()
	info := h.info()
	octx := obs.Start(ctx, op, info)
	if octx == nil {
		octx = ctx
	}
	err := h.release(ctx, octx, acc)
	obs.End(octx, op, info, unlockOutcome(err), time.Since(start), err)
	return err
}

// forceUnlock runs the kind's force-unlock script and marks the holds it ended lost: those
// this process had when it was called. A waiter of this process that the script wakes may take
// a new hold before the reply is read; that hold lives on. It reports whether the lock existed.
func (h *locker) forceUnlock(ctx context.Context) (bool, error) {
	lk := &h.lock
	if err := lk.check(ctx); err != nil {
		return false, err
	}
	s, keys, args := lk.kind.force()
	ended := h.sh.holdsOf(lk.keys.Lock)
	n, err := lk.core.variant(s).Exec(ctx, lk.core.rc, keys, args).AsInt64()
	if err != nil {
		return false, lk.redisErr("force unlock", err)
	}
	h.sh.loseHolds(ended)
	forced, err := wire.ParseForced(n)
	if err != nil {
		return false, lk.errorf("force unlock: %w", badReply(err))
	}
	return forced, nil
}
