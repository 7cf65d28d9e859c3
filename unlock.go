package rlock

import (
	"context"
	"fmt"
	"time"
)

// unlockMessage is published on a plain lock's channel when it is released.
const unlockMessage = "0"

// Unlock releases one hold of the owner in ctx. It ignores ctx's cancellation for the release
// itself, retrying transport errors for a few seconds with the same request id, so a retried
// release never counts twice (also when the caller retries an Unlock that returned an error).
// Errors: [ErrNotHeld] when that owner holds nothing here (Redis untouched); [ErrLockLost] when
// this process held it but the lease was gone (a hold context whose loss the library saw, or
// a hold Redis no longer has), so the critical section may have overlapped another holder;
// [ErrClosed]; or a transport or Redis error, after which the hold is unchanged or released:
// the request stays pending, is settled before the owner's next request, and an Unlock
// retried with the same context returns its outcome. When the last hold is released, the
// owner's hold contexts are cancelled and waiters are woken.
func (m *Mutex) Unlock(ctx context.Context) error {
	return m.observeUnlock(ctx)
}

// unlock is Unlock, with its Redis commands under cmd (the observer's context; see detach).
func (m *Mutex) unlock(ctx, cmd context.Context) error {
	if err := m.check(ctx); err != nil {
		return err
	}
	owner, ok := Owner(ctx)
	if !ok {
		return fmt.Errorf("mutex %q: %w: the context carries no owner; pass the context that Lock returned", m.name, ErrNotHeld)
	}
	if err := validateOwner(owner); err != nil {
		return fmt.Errorf("mutex %q: %w", m.name, err)
	}
	c := m.c
	hc, _ := ctx.Value(holdCtxKey{c, m.keys.lock}).(*holdCtx)
	if hc != nil && hc.h.owner != owner {
		hc = nil // a hold context of another owner, re-labelled with WithOwner
	}
	c.mu.Lock()
	if hc != nil && hc.h.lost && hc.h.count > 0 && !hc.pending {
		// A hold of this context whose loss the library already saw: Redis is not touched (the
		// owner id may hold the lock anew, through another process).
		hc.h.count--
		c.mu.Unlock()
		return fmt.Errorf("mutex %q: %w", m.name, ErrLockLost)
	}
	c.mu.Unlock()

	cmd = detach(cmd)
	l, err := m.takeLane(context.Background(), owner)
	if err != nil {
		return err
	}
	defer m.exitLane(l)
	if err := c.settleWithin(cmd, l, releaseBudget); err != nil {
		return fmt.Errorf("mutex %q: unlock: %w", m.name, err)
	}

	c.mu.Lock()
	if res, ok := l.takeOutcome(hc); ok {
		c.mu.Unlock()
		return res // this call retries an Unlock whose request was settled meanwhile
	}
	h := c.holds[holdKey{m.keys.lock, owner}]
	p := pendingRelease{request: c.requestID(), validAtSend: h.valid()}
	if h != nil {
		h.releasing++
	}
	c.mu.Unlock()

	left, err := m.release(cmd, owner, &p)

	c.mu.Lock()
	defer c.unlock()
	if h != nil {
		h.releasing--
	}
	if err != nil {
		if p.ambiguous {
			l.keepUnlock(m, p, h, hc)
		}
		return err
	}
	return c.released(m, h, p, left)
}

// pendingRelease is one release request, kept across retries.
type pendingRelease struct {
	request     string
	validAtSend bool // the hold's lease was valid when the request was first sent
	ambiguous   bool // some attempt's reply was lost: the request may already have run
}

// released applies the outcome of release request p (left: the owner's remaining hold count,
// -1 for none) to h, this process's record of the holds it released (nil for none), and
// returns the error Unlock reports. Called with c.mu held.
func (c *Client) released(m *Mutex, h *hold, p pendingRelease, left int64) error {
	if h != nil && c.holds[holdKey{h.key, h.owner}] != h && !h.lost {
		h = nil // ended meanwhile; a newer record is not this request's
	}
	if left < 0 && p.ambiguous && p.validAtSend {
		// A lost reply, and now the owner holds nothing: the lost attempt released the last
		// hold (the lease was valid when it was sent).
		left = 0
	}
	switch {
	case left < 0 && h != nil && h.count > 0:
		h.count--
		c.lose(h)
		return fmt.Errorf("mutex %q: %w", m.name, ErrLockLost)
	case left < 0:
		return fmt.Errorf("mutex %q: %w", m.name, ErrNotHeld)
	case h == nil:
	case left == 0:
		c.finish(h, context.Canceled)
	default:
		if h.count--; h.count <= 0 {
			c.finish(h, context.Canceled)
		}
	}
	return nil
}

// release runs the release script for p under ctx, retrying transport errors within
// releaseBudget with the same request id, which the script recognises if an earlier attempt
// already ran.
func (m *Mutex) release(ctx context.Context, owner string, p *pendingRelease) (int64, error) {
	var left int64
	err := retryTransport(releaseBudget, func() (err error) {
		left, err = m.releaseOnce(ctx, owner, p)
		return err
	})
	return left, err
}

// releaseOnce runs the release script for p once, under ctx without its cancellation and
// deadline. A transport error marks p ambiguous.
func (m *Mutex) releaseOnce(ctx context.Context, owner string, p *pendingRelease) (int64, error) {
	keys, args := []string{m.keys.lock, m.keys.channel}, []string{owner, p.request, unlockMessage}
	if m.fair {
		keys = []string{m.keys.lock, m.keys.channel, m.keys.queue, m.keys.deadlines}
		args = []string{owner, p.request, addressedPrefix, "1"}
	}
	// No context deadline: rueidis' connection timeout bounds the call, and a deadline
	// passing mid-call would close the connection under every other call on it.
	sent := time.Now()
	r, err := releaseScript.Exec(detach(ctx), m.c.rc, keys, args).AsIntSlice()
	if err == nil && len(r) != 2 {
		err = errBadReply
	}
	if err != nil {
		if isTransport(err) {
			p.ambiguous = true
		}
		return 0, m.redisErr("release", err)
	}
	if r[0] == 0 && !m.fair {
		m.c.courtesy(m.keys.channel, m.keys.lock, r[1], time.Since(sent))
	}
	return r[0], nil
}
