package rlock

import (
	"context"
	"time"

	"github.com/rlock-go/rlock/internal/wire"
)

// Mutex is a reentrant distributed lock identified by a name. It holds only the name and
// settings, so it is safe to share between goroutines: holds belong to owners, which travel in
// contexts. Create one with [Client.NewMutex] or [Client.NewFairMutex].
type Mutex struct{ locker }

// NewMutex returns the reentrant mutex called name. It does not touch Redis. An empty name or
// an invalid option is reported by every method of the returned mutex as an error wrapping
// [ErrInvalid].
func (c *Client) NewMutex(name string, opts ...MutexOption) *Mutex {
	m := new(Mutex)
	c.bind(&m.locker, KindMutex, name, newMutexKind, opts)
	return m
}

// A plain Mutex keeps its holds in one hash, owner -> hold count, whose expiry is the lease;
// a release publishes "0" on the lock's channel, which wakes one waiter per client. Its new Lock
// calls follow the barging rules (see courtesy.go), whose window a release opens.
type mutexKind struct {
	lk                                  *lock
	windows                             *courtesy // the courtesy windows of the lock's shard
	acquireKeys, releaseKeys, renewKeys []string  // each script's KEYS
}

func newMutexKind(h *locker) kind {
	k := h.keys
	return &mutexKind{lk: &h.lock, windows: &h.sh.courtesy, acquireKeys: k.Acquire(h.fencing),
		releaseKeys: k.Release(), renewKeys: k.Renew(false)}
}

func (*mutexKind) name() string { return KindMutex }

func (*mutexKind) style(access) waitStyle { return waitStyle{wake: wakeOne} }

func (k *mutexKind) acquire(ctx context.Context, r request) (attempt, error) {
	lk := k.lk
	a := attempt{sent: time.Now()}
	mode := modeArg[r.mode]
	if r.mode == takeLock && r.answered && r.owner == r.id {
		mode = wire.TakeNew // a retry of an owner made for the call: nobody holds as it
	}
	reply, err := wire.Acquire.Ints(lk.core.eval(ctx, r.conn, wire.Acquire, k.acquireKeys,
		wire.AcquireArgs{Owner: r.owner, LeaseMs: lk.leaseMs, Request: r.id, Mode: mode,
			Label: r.label}.Strings()))
	if err != nil {
		return a, lk.redisErr("acquire", err)
	}
	return lk.parseAttempt(a, reply)
}

func (k *mutexKind) release(ctx context.Context, owner string, _ access, req string) (releaseReply, error) {
	c := k.lk.core
	sent := time.Now()
	r, err := wire.Release.Ints(c.variant(wire.Release).Exec(ctx, c.rc, k.releaseKeys,
		wire.ReleaseArgs{Owner: owner, Request: req, Message: wire.UnlockMessage}.Strings()))
	if err != nil {
		return releaseReply{}, err
	}
	rel, err := parseReleased(wire.ParseRelease(r))
	if err == nil && rel.left == 0 {
		k.windows.open(k.lk, rel.woken, time.Since(sent))
	}
	return rel, err
}

func (*mutexKind) dequeue(context.Context, request) error { return nil }

func (k *mutexKind) renewal() (wire.Script, []string) { return wire.Renew, k.renewKeys }

func (*mutexKind) renewOwner(owner string, _ access) string { return owner }

func (*mutexKind) checkKind() string { return wire.CheckMutex }

func (k *mutexKind) force() (wire.Script, []string, []string) {
	return wire.ForceUnlock, k.lk.keys.ForceUnlock(false), wire.ForceUnlockArgs{Message: wire.UnlockMessage}.Strings()
}

// Name returns the lock name given to NewMutex or NewFairMutex.
func (m *Mutex) Name() string { return m.name }

// Lock acquires m for the owner in ctx, or for a fresh owner if ctx carries none, blocking
// until it is acquired, ctx is done, or the Client is closed. A lock the owner already holds is
// re-entered at once (hold count + 1, and the lease reset to at least this Mutex's: a lease in
// Redis is never shortened, so a re-entry with a shorter lease leaves the longer one). It
// returns the hold context: derived from ctx, carrying the owner, cancelled with cause
// [ErrLockLost] when the lease is lost and with [context.Canceled] once Unlock has released the
// owner's last hold. Check the hold context itself before each step of work that must not
// overlap another holder: its Err looks at the clock, while a context derived from it (with
// [context.WithCancel], [context.WithTimeout], ...) is the standard library's and, after a
// pause of the process, looks live until a timer of the library has run (checking the hold
// context ends it at once). On error the context is
// nil and nothing is held: ctx's error, [ErrClosed], an error wrapping [ErrInvalid], or a Redis
// error reply. Transport errors while waiting are retried; an attempt whose reply was lost is
// replayed under its request id, and given back if the call ends before learning its outcome
// (in the background, owned by the Client, if Redis does not answer in time). When Redis does
// not answer, a ctx with a deadline still ends the call within 500ms of it, and its error wraps
// ctx's error and the transport error.
func (m *Mutex) Lock(ctx context.Context) (context.Context, error) {
	return m.observeAcquire(ctx, OpLock, exclusive, 0, false, 0)
}

// TryLock is [Mutex.Lock] that gives up after wait with [ErrNotObtained]; wait 0 makes a single
// attempt. It returns within wait plus 500ms even when Redis does not answer; if its last
// attempt could not reach Redis, the error wraps both ErrNotObtained and the transport error. A wait that ends leaves nothing in Redis (no queue entry, no subscription,
// no hold).
// A fair mutex's TryLock never jumps the queue.
func (m *Mutex) TryLock(ctx context.Context, wait time.Duration) (context.Context, error) {
	return m.observeAcquire(ctx, OpLock, exclusive, 0, true, wait)
}

// Unlock releases one hold of the owner in ctx. It ignores ctx's cancellation for the release
// itself, retrying transport errors for up to 500ms with the same request id (it returns within
// 1s when Redis does not answer), so a retried
// release never counts twice (also when the caller retries an Unlock that returned an error).
// Errors: [ErrNotHeld] when that owner holds nothing here (Redis untouched); [ErrLockLost] when
// this process held it but the lease was gone (a hold context whose loss the library saw, or
// a hold Redis no longer has), so the critical section may have overlapped another holder;
// [ErrClosed]; or a transport or Redis error, after which the hold is unchanged or released:
// the request stays pending, is settled before the owner's next request (or in the
// background), and only its retry gets its outcome: an Unlock given the same hold context, or,
// for an Unlock given a context that carries only an owner ([WithOwner]), the owner's next such
// Unlock while it still holds the lock in this process (once it holds nothing here, a retry
// returns [ErrNotHeld]). When the last hold is released, the owner's hold contexts are
// cancelled and waiters are woken.
func (m *Mutex) Unlock(ctx context.Context) error {
	return m.observeRelease(ctx, OpUnlock, exclusive)
}

// ForceUnlock deletes m whoever holds it and wakes a waiter. It reports whether the lock
// existed. This process's holds of m are cancelled with cause [ErrLockLost] at once; holders in
// other processes learn it at their next renewal. A key of another type at any of the lock's
// names is an error wrapping [ErrInvalid], and nothing is deleted.
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) { return m.forceUnlock(ctx) }

// inspect reads whether the lock is held, the hold count of owner ("" for none), and its pttl.
func (m *Mutex) inspect(ctx context.Context, owner string) (held bool, count int64, pttl time.Duration, err error) {
	if err := m.check(ctx); err != nil {
		return false, 0, 0, err
	}
	var in wire.Inspection
	err = m.core.read(ctx, func(ctx context.Context) error {
		r, err := m.core.variant(wire.Inspect).Exec(ctx, m.core.rc, m.keys.Inspect(), wire.InspectArgs{Owner: owner}.Strings()).AsIntSlice()
		if err == nil {
			in, err = wire.ParseInspect(r)
		}
		return err
	})
	if err != nil {
		return false, 0, 0, m.redisErr("inspect", badReply(err))
	}
	return in.Held, in.Count, in.PTTL, nil
}

// IsLocked reports whether any owner holds m. It makes one round trip, bounded by ctx.
func (m *Mutex) IsLocked(ctx context.Context) (bool, error) {
	held, _, _, err := m.inspect(ctx, "")
	return held, err
}

// HoldCount returns the number of holds the owner in ctx has on m (0 if none, or if ctx
// carries no owner). It makes one round trip, bounded by ctx; a ctx that has already ended,
// such as a released hold context, still identifies the owner and is read with a timeout of
// its own.
func (m *Mutex) HoldCount(ctx context.Context) (int, error) {
	if err := m.check(ctx); err != nil {
		return 0, err
	}
	owner, ok, err := m.callerOwner(ctx)
	if !ok {
		return 0, err
	}
	_, count, _, err := m.inspect(ctx, owner)
	return int(count), err
}

// TTL returns the remaining lease of m, 0 when it is unlocked, and -1 for a lock key that
// has no expiry (never made by this library). It makes one round trip, bounded by ctx.
func (m *Mutex) TTL(ctx context.Context) (time.Duration, error) {
	held, _, pttl, err := m.inspect(ctx, "")
	switch {
	case err != nil || !held:
		return 0, err
	case pttl < 0:
		return -1, nil
	}
	return pttl, nil
}

// Token returns the fencing token of the hold of m that ctx carries, and true; or (0, false)
// for a mutex without [WithFencing] or a context that carries no hold of m. It does not block.
func (m *Mutex) Token(ctx context.Context) (int64, bool) { return tokenOf(ctx, &m.lock) }
