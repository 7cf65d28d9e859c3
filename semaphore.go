package rlock

import (
	"context"
	"strconv"
	"time"

	"github.com/rlock-go/rlock/internal/wire"
)

// Semaphore is a distributed counting semaphore identified by a name: at most Permits
// permits are out at any time, across all processes. Each Acquire takes n permits as one hold,
// with a lease of its own (renewed by the watchdog, or fixed with [WithLease]) measured by the
// Redis server's clock, so a holder that dies gives its permits back when its lease ends.
// Waiters are served in arrival order: a release grants the freed permits to the waiters first
// in line whose requests fit and tells them so (direct handoff, as the fair Mutex does), so they
// return without another round trip. Create one with [Client.NewSemaphore].
type Semaphore struct {
	locker
	sem     *semKind
	permits int64
}

// NewSemaphore returns the semaphore called name with permits permits. It does not touch
// Redis. permits < 1 or above 2^53 (the largest count the Redis scripts keep exact: Lua's
// numbers are doubles), [WithFencing], an empty name or an invalid option are reported by
// every method as an error wrapping [ErrInvalid]. All semaphores of one name must agree on
// permits: while one is in use (held or waited for), the count stored in Redis is checked.
func (c *Client) NewSemaphore(name string, permits int64, opts ...MutexOption) *Semaphore {
	s := &Semaphore{permits: permits}
	c.bind(&s.locker, KindSemaphore, name, func(h *locker) kind {
		s.sem = &semKind{lk: &h.lock, permits: strconv.FormatInt(permits, 10), keys: h.keys.Sem(),
			renewKeys: h.keys.Renew(true)}
		return s.sem
	}, opts)
	s.ownerless = true
	switch {
	case s.err != nil:
	case permits < 1:
		s.err = s.errorf("%w", invalidf("permits %d is below 1", permits))
	case permits > wire.MaxExact:
		s.err = s.errorf("%w", invalidf("permits %d is above 2^53, the most the scripts keep exact", permits))
	case s.fencing:
		s.err = s.errorf("%w", invalidf("WithFencing is for mutexes, not semaphores"))
	}
	return s
}

// semKind is the semaphore of permits permits (see internal/wire/lua/sem_acquire.lua for its keys).
type semKind struct {
	lk        *lock
	permits   string
	keys      []string // the hash, leases, queue, deadlines and channel: every script's KEYS
	renewKeys []string // the hash and the leases
}

func (*semKind) name() string { return KindSemaphore }

func (*semKind) style(access) waitStyle {
	return waitStyle{wake: wakeAddressed, queued: true, checks: true}
}

func (k *semKind) acquire(ctx context.Context, r request) (attempt, error) {
	lk := k.lk
	a := attempt{sent: time.Now()}
	reply, err := wire.SemAcquire.Ints(lk.core.eval(ctx, r.conn, wire.SemAcquire, k.keys, wire.SemAcquireArgs{
		Hold: r.owner, LeaseMs: lk.leaseMs, Request: r.id, Mode: modeArg[r.mode], Permits: k.permits,
		N: strconv.FormatInt(r.n, 10), FairWaitMs: lk.core.fairWaitMs, Join: r.join, ClaimMs: lk.claimMs,
		Label: r.label}.Strings()))
	if err != nil {
		return a, lk.redisErr("acquire", err)
	}
	if _, err := wire.ParseAttempt(reply); err != nil {
		if pe, ok := err.(wire.PermitsError); ok {
			return a, k.permitsErr(pe.Stored)
		}
	}
	return lk.parseAttempt(a, reply)
}

// permitsErr is the error for a semaphore in use with stored permits, not k's.
func (k *semKind) permitsErr(stored int64) error {
	return k.lk.errorf("%w", invalidf("the semaphore is in use with %d permits, not %s", stored, k.permits))
}

func (k *semKind) release(ctx context.Context, owner string, _ access, _ string) (releaseReply, error) {
	c := k.lk.core
	r, err := wire.SemRelease.Ints(c.variant(wire.SemRelease).Exec(ctx, c.rc, k.keys,
		wire.SemReleaseArgs{Hold: owner}.Strings()))
	if err != nil {
		return releaseReply{}, err
	}
	return parseReleased(wire.ParseRelease(r))
}

func (k *semKind) dequeue(ctx context.Context, r request) error {
	lk := k.lk
	return lk.core.variant(wire.SemLeave).Exec(ctx, lk.core.rc, k.keys,
		wire.SemLeaveArgs{Hold: r.owner, ClaimMs: lk.claimMs, N: strconv.FormatInt(r.n, 10),
			Label: r.label}.Strings()).Error()
}

func (k *semKind) renewal() (wire.Script, []string) { return wire.SemRenew, k.renewKeys }

func (*semKind) renewOwner(hold string, _ access) string { return hold }

func (*semKind) checkKind() string { return wire.CheckSem }

func (k *semKind) force() (wire.Script, []string, []string) {
	return wire.SemForceRelease, k.keys, wire.SemForceReleaseArgs{}.Strings()
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Permits returns the permit count given to NewSemaphore.
func (s *Semaphore) Permits() int64 { return s.permits }

// Acquire takes n permits (1..Permits) as one new hold, whatever owner ctx carries, blocking
// in arrival order until they are free, ctx is done, or the Client is closed. It returns the
// hold context: derived from ctx (the owner it carries is left alone), cancelled with cause
// [ErrLockLost] when the hold's lease is lost and with [context.Canceled] once Release has
// given the permits back. On error the context is nil and nothing is held: ctx's error,
// [ErrClosed], an error wrapping [ErrInvalid] (n out of range, another permit count in
// Redis), or a Redis error reply.
func (s *Semaphore) Acquire(ctx context.Context, n int64) (context.Context, error) {
	if err := s.checkN(n); err != nil {
		return nil, err
	}
	return s.observeAcquire(ctx, OpAcquire, exclusive, n, false, 0)
}

// TryAcquire is [Semaphore.Acquire] that gives up after wait with [ErrNotObtained]; wait 0
// makes a single attempt, which never jumps the queue. A wait that ends leaves nothing in
// Redis.
func (s *Semaphore) TryAcquire(ctx context.Context, n int64, wait time.Duration) (context.Context, error) {
	if err := s.checkN(n); err != nil {
		return nil, err
	}
	return s.observeAcquire(ctx, OpAcquire, exclusive, n, true, wait)
}

// checkN validates the permits of one Acquire.
func (s *Semaphore) checkN(n int64) error {
	if s.err == nil && (n < 1 || n > s.permits) {
		return s.errorf("%w", invalidf("cannot acquire %d of %d permits", n, s.permits))
	}
	return nil
}

// Release gives back the permits of the hold that ctx carries (the context Acquire returned,
// or one derived from it), once: a retried Release never returns them twice, and a second one
// returns [ErrNotHeld], as does a context that carries no hold. [ErrLockLost]: the lease had
// ended, its permits were already back. It ignores ctx's cancellation, and after a transport
// error the release stays pending as for [Mutex.Unlock]. The hold context is then cancelled
// and the next waiter woken.
func (s *Semaphore) Release(ctx context.Context) error {
	return s.observeRelease(ctx, OpRelease, exclusive)
}

// ForceRelease deletes every hold of s, whoever holds it, and wakes the first waiter; waiters
// keep their places. It reports whether any hold was live. This process's holds of s are
// cancelled with cause [ErrLockLost] at once; holders in other processes learn it at their next
// renewal. A key of another type or kind is an error wrapping [ErrInvalid], and nothing is
// deleted.
func (s *Semaphore) ForceRelease(ctx context.Context) (bool, error) {
	return s.forceUnlock(ctx)
}

// Available returns how many permits are not held right now. It makes one round trip,
// bounded by ctx; a semaphore in use with another permit count is an error wrapping
// [ErrInvalid].
func (s *Semaphore) Available(ctx context.Context) (int64, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	var free int64
	err := s.core.read(ctx, func(ctx context.Context) error {
		r, err := s.core.variant(wire.SemInspect).Exec(ctx, s.core.rc, s.keys.SemInspect(),
			wire.SemInspectArgs{Permits: s.sem.permits}.Strings()).AsIntSlice()
		if err == nil {
			free, err = wire.ParseSemInspect(r)
		}
		return err
	})
	if pe, ok := err.(wire.PermitsError); ok {
		return 0, s.sem.permitsErr(pe.Stored)
	}
	if err != nil {
		return 0, s.redisErr("available", badReply(err))
	}
	return free, nil
}
