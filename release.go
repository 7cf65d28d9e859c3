package rlock

import (
	"context"
	"time"

	"github.com/rlock-go/rlock/internal/wire"
)

// release is Unlock, RUnlock and Release: it releases one hold in access acc of the owner in
// ctx (of a Semaphore: the hold ctx carries), with its Redis commands under cmd (the
// observer's context; see detach). See Mutex.Unlock for its errors.
func (lk *lock) release(ctx, cmd context.Context, acc access) error {
	if err := lk.check(ctx); err != nil {
		return err
	}
	c := lk.c
	hc, _ := ctx.Value(lk.ctxKey).(*holdCtx)
	var owner string
	if lk.ownerless {
		if hc == nil {
			return lk.errorf("%w: the context carries no hold; pass the context that Acquire returned", ErrNotHeld)
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
	sh := lk.sh
	sh.mu.Lock()
	if hc != nil && hc.h.acc[acc].lost && hc.h.acc[acc].count > 0 && hc.unlock[acc].request == "" {
		// A hold of this context in this access whose loss the library already saw: Redis is
		// not touched (the owner id may hold the lock anew, through another process), and the
		// holds of the other access (and the contexts) live on.
		hc.h.acc[acc].count--
		sh.mu.Unlock()
		return lk.errorf("%w", ErrLockLost)
	}
	sh.mu.Unlock()

	cmd = detach(cmd)
	l, err := lk.takeLane(context.Background(), owner)
	if err != nil {
		return err
	}
	defer lk.exitLane(l)
	if err := c.settleWithin(cmd, l, releaseBudget); err != nil {
		return lk.errorf("release: %w", err)
	}

	sh.mu.Lock()
	if res, ok := l.takeOutcome(hc, acc); ok {
		sh.mu.Unlock()
		return res // this call retries a release whose request was settled meanwhile
	}
	h := sh.holds[holdKey{lk.keys.Lock, owner}]
	p := pendingRelease{request: c.requestID(), validAtSend: h.validIn(acc)}
	if h != nil {
		h.releasing++
	}
	sh.mu.Unlock()

	var rel released
	err = retryTransport(releaseBudget, func() (err error) {
		rel, err = lk.releaseOnce(cmd, owner, acc, &p)
		return err
	})

	sh.mu.Lock()
	defer sh.unlockAndDeliver()
	if h != nil {
		h.releasing--
	}
	if err != nil {
		if p.ambiguous {
			l.keepUnlock(lk, acc, p, h, hc)
		}
		return err
	}
	return c.released(sh, lk, h, acc, p, rel)
}

// pendingRelease is one release request, kept across retries.
type pendingRelease struct {
	request     string
	validAtSend bool // the lease in its access was valid when the request was first sent
	ambiguous   bool // some attempt's reply was lost: the request may already have run
}

// released applies the outcome rel of release request p, for access acc, to h, this
// process's record of the holds it released (nil for none), and returns the error the release
// reports. Called with sh.mu held, sh being lk's shard.
func (c *Client) released(sh *shard, lk *lock, h *hold, acc access, p pendingRelease, rel released) error {
	if h != nil && sh.holds[holdKey{h.key, h.owner}] != h && !h.lost {
		h = nil // ended meanwhile; a newer record is not this request's
	}
	if rel.left < 0 && rel.total <= 0 && p.ambiguous && p.validAtSend {
		// A lost reply, and now the owner holds nothing: the lost attempt released its last
		// hold (the lease was valid when it was sent), and with it the record of the request.
		// (An owner that still holds the other access keeps the record: rw_release.lua.)
		rel.left, rel.total = 0, 0
	}
	switch {
	case rel.left < 0 && h != nil && h.acc[acc].count > 0:
		// This process held it, Redis no longer has it: its lease in this access was gone. An
		// owner that still holds the other access (an RWMutex's total) keeps those holds and
		// its contexts.
		h.acc[acc].count--
		switch {
		case h.lost:
		case rel.total <= 0:
			c.lose(sh, h)
		default:
			c.loseIn(sh, h, acc)
		}
		return lk.errorf("%w", ErrLockLost)
	case rel.left < 0:
		return lk.errorf("%w", ErrNotHeld)
	case h == nil:
	default:
		if h.acc[acc].count > 0 {
			h.acc[acc].count--
		}
		switch {
		case rel.total == 0 && h.live():
			// Redis has nothing more of the owner, but holds of the other access are still
			// counted here: their lease ran out there before the reaper came round to them.
			// They are lost, not released: their releases report ErrLockLost.
			c.lose(sh, h)
		case rel.total == 0 || !h.live():
			// The owner holds nothing more (in Redis, or here whose lease is not gone).
			c.finish(sh, h, context.Canceled)
		default:
			h.syncEnd() // an access it no longer holds does not keep its contexts
		}
	}
	return nil
}

// releaseOnce runs the release script for p once, under ctx without its cancellation and
// deadline (rueidis' connection timeout bounds the call, and a deadline passing mid-call would
// close the connection under every other call on it). A transport error marks p ambiguous.
func (lk *lock) releaseOnce(ctx context.Context, owner string, acc access, p *pendingRelease) (released, error) {
	rel, err := lk.kind.release(detach(ctx), lk, owner, acc, p.request)
	if err != nil {
		if isTransport(err) {
			p.ambiguous = true
		}
		return released{}, lk.redisErr("release", err)
	}
	return rel, nil
}

// observeRelease runs a release call between the observer's Start and End. Without an
// observer its commands run under context.Background(): detaching ctx would cost two
// allocations (the hold context's done channel, made on demand, and the detached context).
func (lk *lock) observeRelease(ctx context.Context, op Op, acc access) error {
	obs := lk.c.obs
	if obs == nil || ctx == nil {
		return lk.release(ctx, context.Background(), acc)
	}
	start := time.Now()
	info := lk.info()
	octx := obs.Start(ctx, op, info)
	if octx == nil {
		octx = ctx
	}
	err := lk.release(ctx, octx, acc)
	obs.End(octx, op, info, unlockOutcome(err), time.Since(start), err)
	return err
}

// forceUnlock runs a kind's force-unlock script and marks the holds it ended lost: those this
// process had when it was called. A waiter of this process that the script wakes may take a
// new hold before the reply is read; that hold lives on.
func (lk *lock) forceUnlock(ctx context.Context, s wire.Script, keys, args []string) (bool, error) {
	if err := lk.check(ctx); err != nil {
		return false, err
	}
	ended := lk.holds()
	n, err := lk.c.script(s).Exec(ctx, lk.c.rc, keys, args).AsInt64()
	if err != nil {
		return false, lk.redisErr("force unlock", err)
	}
	lk.loseHolds(ended)
	forced, err := wire.ParseForced(n)
	if err != nil {
		return false, lk.errorf("force unlock: %w", badReply(err))
	}
	return forced, nil
}

// holds returns this process's holds on lk.
func (lk *lock) holds() []*hold {
	lk.sh.mu.Lock()
	defer lk.sh.mu.Unlock()
	var hs []*hold
	for hk, h := range lk.sh.holds {
		if hk.key == lk.keys.Lock {
			hs = append(hs, h)
		}
	}
	return hs
}

// loseHolds marks those of hs, holds on lk, that are still this process's holds lost.
func (lk *lock) loseHolds(hs []*hold) {
	sh := lk.sh
	sh.mu.Lock()
	defer sh.unlockAndDeliver()
	for _, h := range hs {
		if sh.holds[holdKey{h.key, h.owner}] == h {
			lk.c.lose(sh, h)
		}
	}
}
