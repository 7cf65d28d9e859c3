package rlock

import (
	"context"
	"sync/atomic"
	"time"
)

// holdKey identifies the holds of one owner on one lock.
type holdKey struct{ key, owner string }

// hold is this process's record of an owner's holds on one lock. All fields are guarded by
// Client.mu.
type hold struct {
	key, owner, name string
	count            int       // holds taken in this process and not yet released
	watchdog         bool      // some hold was taken without a fixed lease: renew it
	expires          time.Time // no later than the lease end in Redis (measured from send times)
	token            int64
	lost             bool           // the lease is gone; remaining Unlocks report ErrLockLost
	releasing        int            // Unlock calls in flight: a renewal that finds no owner is theirs
	pendingRelease   pendingRelease // an Unlock whose reply was lost, replayed by the next one
	cancels          []context.CancelCauseFunc
	leaseEnds        []*leaseEnd
}

// pending returns the Unlock request the next Unlock must replay (zero if none).
func (h *hold) pending() pendingRelease {
	if h == nil {
		return pendingRelease{}
	}
	return h.pendingRelease
}

// valid reports whether h's lease has not run out as far as this process knows.
func (h *hold) valid() bool {
	return h != nil && !h.lost && time.Now().Before(h.expires)
}

// end cancels every hold context of h with cause.
func (h *hold) end(cause error) {
	for _, cancel := range h.cancels {
		cancel(cause)
	}
	h.cancels, h.leaseEnds = nil, nil
}

// holdCtxKey finds, in a context, the hold of one lock of one client.
type holdCtxKey struct {
	c   *Client
	key string
}

// holdCtx is the value a hold context carries under its holdCtxKey.
type holdCtx struct {
	h     *hold
	token int64
}

// leaseEnd is the deadline cause of a hold context with a fixed lease. It unwraps to
// ErrLockLost, or to context.DeadlineExceeded once a later hold pushed the lease past the
// context's deadline (the lock is still held, only this context ended).
type leaseEnd struct {
	deadline   time.Time
	superseded atomic.Bool
}

func (e *leaseEnd) Error() string {
	if e.superseded.Load() {
		return "rlock: hold context deadline passed; the lock is still held by a later hold"
	}
	return "rlock: lease ended: " + ErrLockLost.Error()
}

func (e *leaseEnd) Unwrap() error {
	if e.superseded.Load() {
		return context.DeadlineExceeded
	}
	return ErrLockLost
}

// register records a successful attempt of m for owner and returns its hold context. If the
// caller's context ended or the client closed while the script ran, the hold is given back.
func (c *Client) register(parent context.Context, m *Mutex, owner string, a attempt) (context.Context, error) {
	c.mu.Lock()
	err := parent.Err()
	if c.closed.Load() {
		err = ErrClosed
	}
	if err != nil {
		c.mu.Unlock()
		m.giveBack(owner)
		return nil, err
	}
	hk := holdKey{m.keys.lock, owner}
	h := c.holds[hk]
	if h != nil && a.count == 1 {
		// Redis started a fresh hold, so the holds recorded here had already ended.
		if h.releasing > 0 {
			c.finish(h, context.Canceled)
		} else {
			c.lose(h)
		}
		h = nil
	}
	if h == nil {
		h = &hold{key: m.keys.lock, owner: owner, name: m.name, token: a.token}
		c.holds[hk] = h
	}
	h.count++
	h.watchdog = h.watchdog || m.lease == 0
	end := a.sent.Add(m.leaseFor())
	for _, le := range h.leaseEnds {
		if le.deadline.Before(end) {
			le.superseded.Store(true)
		}
	}
	h.expires = end
	ctx := c.holdContext(parent, m, h, end)
	c.mu.Unlock()
	return ctx, nil
}

// holdContext derives the hold context of h from parent. Called with c.mu held.
func (c *Client) holdContext(parent context.Context, m *Mutex, h *hold, end time.Time) context.Context {
	ctx := parent
	if owner, ok := Owner(parent); !ok || owner != h.owner {
		ctx = WithOwner(ctx, h.owner)
	}
	key := holdCtxKey{c, h.key}
	prev, _ := parent.Value(key).(*holdCtx)
	ctx = context.WithValue(ctx, key, &holdCtx{h: h, token: h.token})
	if prev == nil || prev.h != h {
		// Not nested in a live hold context of h, whose cancellation would reach this one.
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		h.cancels = append(h.cancels, cancel)
	}
	if m.lease > 0 {
		le := &leaseEnd{deadline: end}
		var stop context.CancelFunc
		ctx, stop = context.WithDeadlineCause(ctx, end, le)
		h.cancels = append(h.cancels, func(error) { stop() })
		h.leaseEnds = append(h.leaseEnds, le)
	}
	return ctx
}

// giveBack releases the hold an attempt just took, for a caller that will not get it.
func (m *Mutex) giveBack(owner string) {
	_, _ = m.release(owner, &pendingRelease{request: m.c.requestID()})
}

// finish removes h and cancels its contexts with cause. Called with c.mu held.
func (c *Client) finish(h *hold, cause error) {
	hk := holdKey{h.key, h.owner}
	if c.holds[hk] == h {
		delete(c.holds, hk)
	}
	h.end(cause)
}

// lose marks h lost, removes it and cancels its contexts with ErrLockLost. Its hold contexts
// still reach it, so that Unlocks through them report ErrLockLost; nothing else keeps it
// alive (holds that lapse and are never unlocked cost nothing). Called with c.mu held.
func (c *Client) lose(h *hold) {
	h.lost = true
	c.finish(h, ErrLockLost)
}

// loseKey marks every hold of this process on the lock key lost (after ForceUnlock).
func (c *Client) loseKey(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for hk, h := range c.holds {
		if hk.key == key {
			c.lose(h)
		}
	}
}
