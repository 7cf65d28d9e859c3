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

	// The whole call, waiting for the lane included, keeps its bound (see bound.go): a request
	// Redis does not answer in time stays pending on the lane, for the settler.
	b := within(releaseWait)
	l, err := sh.lanes.take(b, holdKey{lk.keys.Lock, owner})
	if err != nil {
		return lk.errorf("release: %w", err)
	}
	held, err := sh.settleWithin(b, cmd, l)
	if err != nil {
		if held {
			sh.lanes.exit(l)
		}
		return lk.errorf("release: %w", err)
	}

	sh.mu.Lock()
	if res, ok := l.takeOutcome(hc, acc); ok {
		sh.mu.Unlock()
		sh.lanes.exit(l)
		return res // this call retries a release whose request was settled meanwhile
	}
	if s := hc.lostRun(acc); s != nil {
		// Lost while this call waited for the lane (the reaper may also have removed the
		// record, which the lookup below would no longer find: ErrNotHeld): as above.
		s.count--
		sh.mu.Unlock()
		sh.lanes.exit(l)
		return lk.errorf("%w", ErrLockLost)
	}
	rec := sh.holds.get(holdKey{lk.keys.Lock, owner})
	p := pendingRelease{request: lk.core.requestID(), validAtSend: rec.validIn(acc)}
	if rec != nil {
		rec.releasing++
	}
	sh.mu.Unlock()

	// keep leaves p, whose outcome is unknown, on the lane for the owner's retry or the
	// settler: here if Redis answered with a transport error, or on the flight's goroutine
	// once it returns, if this call left it (before the flight gives the lane's turn back, so
	// that nobody finds the lane without it).
	keep := func(p pendingRelease) {
		sh.mu.Lock()
		if rec != nil {
			rec.releasing--
		}
		l.keepUnlock(lk, acc, p, rec, hc)
		sh.unlockAndDeliver()
		sh.c.settleSoon()
	}
	rel, err := h.releaseWithin(b, cmd, l, owner, acc, &p, keep)
	if err == errNoReply || err == ErrClosed {
		return lk.errorf("release: %w", err) // the flight has the lane, and keeps p on it
	}
	if err != nil && p.ambiguous {
		keep(p)
		sh.lanes.exit(l)
		return err
	}

	sh.mu.Lock()
	if rec != nil {
		rec.releasing--
	}
	if err == nil {
		err = sh.applyRelease(lk, rec, acc, p, rel)
	}
	sh.unlockAndDeliver()
	sh.lanes.exit(l)
	return err
}

// releaseWithin runs the release script for p (owner's hold in access acc), whose lane l's turn
// the caller holds, retrying transport errors with back-off while b's end is ahead, each try a
// flight bounded by b (see bound.go). If Redis does not answer in time it returns errNoReply (or
// ErrClosed): the flight has the lane's turn, and once it returns it calls keep with its
// request, which may have run, then gives the turn back.
func (h *locker) releaseWithin(b bound, cmd context.Context, l *lane, owner string, acc access, p *pendingRelease,
	keep func(pendingRelease)) (releaseReply, error) {
	lk, sh, c := &h.lock, h.sh, h.core
	backoff := newBackoff()
	for {
		var rel releaseReply
		var err error
		try := *p
		if ferr := c.fly(b, cmd, func(ctx context.Context) { rel, err = lk.releaseOnce(ctx, owner, acc, &try) }, func() {
			try.ambiguous = true // it may have run
			keep(try)
			sh.lanes.exit(l)
		}); ferr != nil {
			return releaseReply{}, ferr
		}
		*p = try
		if d := backoff.next(); isTransport(err) && c.ctx.Err() == nil && time.Now().Add(d).Before(b.end) {
			time.Sleep(d)
			continue
		}
		return rel, err
	}
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
	var n int64
	err := lk.core.read(ctx, func(ctx context.Context) (err error) {
		n, err = lk.core.variant(s).Exec(ctx, lk.core.rc, keys, args).AsInt64()
		return err
	})
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
