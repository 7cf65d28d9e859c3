package rlock

import (
	"context"
	"time"

	"github.com/rlock-go/rlock/internal/wire"
)

// RWMutex is a reentrant distributed read-write lock identified by a name: any number of
// owners may hold it for reading, or one owner for writing. Like [Mutex] it holds only the
// name and settings, and holds belong to owners, which travel in contexts; every [Mutex]
// promise about owners, hold contexts, leases, the watchdog, loss, Close and errors holds for
// both of its modes. Create one with [Client.NewRWMutex] or [Client.NewFairRWMutex].
//
// Each owner's read holds and its write holds have a lease of their own in Redis (server
// time), so a reader that dies loses only its own read holds, when their lease ends; the
// watchdog renews each mode's lease apart (a mode held only with [WithLease] is not renewed).
// One mode's loss is its own: the other mode's holds and their releases go on, and taking a
// lost mode again starts it anew (the lost holds' releases report [ErrLockLost]). An owner's
// hold contexts end when it holds nothing of the lock any more, in either mode, or when the
// modes it still holds are all lost; and no context outlives the lease of the mode it was
// taken in: a context taken in write mode ends with [ErrLockLost] once the owner's write lease
// is lost, though its read holds live on, and so does every context derived from it (a read
// hold's taken through it too). A write context whose write hold was released (a downgrade)
// lives on while the owner is a reader; a read context lives while the owner holds either
// mode (the write hold keeps other writers out too).
type RWMutex struct{ locker }

// NewRWMutex returns the read-write mutex called name, which prefers writers: once a writer
// waits, an RLock by an owner that holds nothing waits behind it, so a stream of readers
// cannot starve a writer (re-entrant RLocks never wait). It does not touch Redis; an empty
// name or an invalid option is reported by every method as an error wrapping [ErrInvalid].
// All locks of one name must be of one kind.
func (c *Client) NewRWMutex(name string, opts ...MutexOption) *RWMutex {
	rw := new(RWMutex)
	c.bind(&rw.locker, KindRWMutex, name, newRWKind(false), opts)
	return rw
}

// NewFairRWMutex returns the read-write mutex called name that serves readers and writers in
// arrival order: readers that arrive together, with no writer between them, hold together.
// Otherwise it is [Client.NewRWMutex].
func (c *Client) NewFairRWMutex(name string, opts ...MutexOption) *RWMutex {
	rw := new(RWMutex)
	c.bind(&rw.locker, KindFairRWMutex, name, newRWKind(true), opts)
	return rw
}

// rwKind is the read-write lock (see internal/wire/lua/rw_acquire.lua for its keys). The plain
// one prefers writers: a waiting writer holds back new readers. The fair one serves a queue in
// arrival order, readers that arrive together with no writer between them holding together.
type rwKind struct {
	lk      *lock
	fair    bool
	windows *courtesy // the courtesy windows of the lock's shard (plain writers: see courtesy.go)
	// each script's KEYS (releaseKeys: also rw_leave.lua's)
	acquireKeys, releaseKeys, renewKeys, forceKeys []string
}

func newRWKind(fair bool) func(h *locker) kind {
	return func(h *locker) kind {
		h.modes = true
		k := h.keys
		return &rwKind{lk: &h.lock, fair: fair, windows: &h.sh.courtesy, acquireKeys: k.RWAcquire(), releaseKeys: k.RWRelease(),
			renewKeys: k.Renew(true), forceKeys: k.RWForceUnlock()}
	}
}

// rwAccessArg is the scripts' name of each access, and rwAddressPrefix what starts the address
// of a fair waiter for it (its hash field, "<r|w>:<owner>").
var (
	rwAccessArg     = [accesses]wire.Access{exclusive: wire.Write, shared: wire.Read}
	rwAddressPrefix = [accesses]string{exclusive: "w:", shared: "r:"}
)

func (k *rwKind) name() string {
	if k.fair {
		return KindFairRWMutex
	}
	return KindRWMutex
}

func (k *rwKind) style(a access) waitStyle {
	switch {
	case k.fair:
		// Queued, and granted the lock by the release that lets them in (direct handoff).
		return waitStyle{wake: wakeAddressed, queued: true, prefix: rwAddressPrefix[a]}
	case a == shared:
		// Readers wake together.
		return waitStyle{wake: wakeReaders}
	}
	// A waiting writer is queued: it holds back new readers while it refreshes its place.
	return waitStyle{wake: wakeOne, queued: true}
}

func (k *rwKind) acquire(ctx context.Context, r request) (attempt, error) {
	lk := k.lk
	a := attempt{sent: time.Now()}
	reply, err := wire.RWAcquire.Ints(lk.core.eval(ctx, r.conn, wire.RWAcquire, k.acquireKeys, wire.RWAcquireArgs{
		Owner: r.owner, LeaseMs: lk.leaseMs, Request: r.id, Mode: modeArg[r.mode], Access: rwAccessArg[r.access],
		Fencing: lk.fencing, FairWaitMs: lk.core.fairWaitMs, Join: r.join, Fair: k.fair, ClaimMs: lk.claimMs,
		Label: r.label}.Strings()))
	if err != nil {
		return a, lk.redisErr("acquire", err)
	}
	if _, err := wire.ParseAttempt(reply); err == wire.ErrReadHoldsOnly {
		return a, lk.errorf("%w", invalidf("owner %q holds it only for reading: Lock would wait for itself "+
			"(release the read holds first)", r.owner))
	}
	return lk.parseAttempt(a, reply)
}

func (k *rwKind) release(ctx context.Context, owner string, a access, req string) (releaseReply, error) {
	c := k.lk.core
	sent := time.Now()
	r, err := wire.RWRelease.Ints(c.variant(wire.RWRelease).Exec(ctx, c.rc, k.releaseKeys,
		wire.RWReleaseArgs{Owner: owner, Request: req, Access: rwAccessArg[a], Fair: k.fair}.Strings()))
	if err != nil {
		return releaseReply{}, err
	}
	rel, err := parseReleased(wire.ParseRWRelease(r))
	if err == nil && !k.fair && a == exclusive && rel.left == 0 {
		k.windows.open(k.lk, rel.woken, time.Since(sent))
	}
	return rel, err
}

func (k *rwKind) dequeue(ctx context.Context, r request) error {
	lk := k.lk
	return lk.core.variant(wire.RWLeave).Exec(ctx, lk.core.rc, k.releaseKeys,
		wire.RWLeaveArgs{Owner: r.owner, Access: rwAccessArg[r.access], Fair: k.fair, Request: r.id, ClaimMs: lk.claimMs,
			Fencing: lk.fencing, Label: r.label}.Strings()).Error()
}

func (k *rwKind) renewal() (wire.Script, []string) { return wire.RWRenew, k.renewKeys }

// renewOwner is the field of the holds of owner in access a (see rw_renew.lua).
func (*rwKind) renewOwner(owner string, a access) string { return rwAddressPrefix[a] + owner }

func (*rwKind) checkKind() string { return wire.CheckRW }

func (k *rwKind) force() (wire.Script, []string, []string) {
	return wire.RWForceUnlock, k.forceKeys, wire.RWForceUnlockArgs{Fair: k.fair}.Strings()
}

// Name returns the lock name given to NewRWMutex or NewFairRWMutex.
func (rw *RWMutex) Name() string { return rw.name }

// RLock acquires rw for reading for the owner in ctx (a fresh owner if ctx carries none),
// blocking until it is acquired, ctx is done, or the Client is closed. An owner that holds rw
// in either mode re-enters at once (read count + 1, and the read lease reset to at least this
// RWMutex's: a lease in Redis is never shortened). It returns the hold
// context, as [Mutex.Lock] does; on error it is nil and nothing is held.
func (rw *RWMutex) RLock(ctx context.Context) (context.Context, error) {
	return rw.observeAcquire(ctx, OpRLock, shared, 0, false, 0)
}

// TryRLock is [RWMutex.RLock] that gives up after wait with [ErrNotObtained]; wait 0 makes a
// single attempt, which never jumps a waiting writer (or, fair, the queue). A wait that ends
// leaves nothing in Redis.
func (rw *RWMutex) TryRLock(ctx context.Context, wait time.Duration) (context.Context, error) {
	return rw.observeAcquire(ctx, OpRLock, shared, 0, true, wait)
}

// RUnlock releases one read hold of the owner in ctx, as [Mutex.Unlock] releases a hold:
// [ErrNotHeld] when the owner holds no read hold (a write hold is not released), [ErrLockLost]
// when the lease was gone. When the owner holds nothing more, its hold contexts are cancelled;
// when no reader is left, a waiting writer is woken.
func (rw *RWMutex) RUnlock(ctx context.Context) error {
	return rw.observeRelease(ctx, OpRUnlock, shared)
}

// Lock acquires rw for writing for the owner in ctx (a fresh owner if ctx carries none),
// blocking until no other owner holds it in either mode, ctx is done, or the Client is closed.
// The writer re-enters at once. An owner that holds only read holds gets an error wrapping
// [ErrInvalid] at once, and nothing changes: it would wait for itself. It returns the hold
// context, as [Mutex.Lock] does; on error it is nil and nothing is held.
func (rw *RWMutex) Lock(ctx context.Context) (context.Context, error) {
	return rw.observeAcquire(ctx, OpLock, exclusive, 0, false, 0)
}

// TryLock is [RWMutex.Lock] that gives up after wait with [ErrNotObtained]; wait 0 makes a
// single attempt, which never jumps another waiting writer (or, fair, the queue). A wait that
// ends leaves nothing in Redis.
func (rw *RWMutex) TryLock(ctx context.Context, wait time.Duration) (context.Context, error) {
	return rw.observeAcquire(ctx, OpLock, exclusive, 0, true, wait)
}

// Unlock releases one write hold of the owner in ctx, as [Mutex.Unlock] releases a hold:
// [ErrNotHeld] when it holds no write hold (a read hold is not released). Releasing the last
// write hold while read holds remain leaves the owner a reader (a downgrade) and lets other
// readers in; its hold contexts live on until it holds nothing.
func (rw *RWMutex) Unlock(ctx context.Context) error {
	return rw.observeRelease(ctx, OpUnlock, exclusive)
}

// ForceUnlock deletes every hold of rw, whoever holds it, and wakes the waiters. It reports
// whether anyone held it. This process's holds are cancelled with [ErrLockLost] at once; holders
// in other processes learn it at their next renewal. A key of another type is an error
// wrapping [ErrInvalid], and nothing is deleted.
func (rw *RWMutex) ForceUnlock(ctx context.Context) (bool, error) { return rw.forceUnlock(ctx) }

// inspect reads whether a writer holds rw, how many owners read, and owner's holds.
func (rw *RWMutex) inspect(ctx context.Context, owner string) (wire.RWInspection, error) {
	if err := rw.check(ctx); err != nil {
		return wire.RWInspection{}, err
	}
	var in wire.RWInspection
	err := rw.core.read(ctx, func(ctx context.Context) error {
		r, err := rw.core.variant(wire.RWInspect).Exec(ctx, rw.core.rc, rw.keys.RWInspect(), wire.InspectArgs{Owner: owner}.Strings()).AsIntSlice()
		if err == nil {
			in, err = wire.ParseRWInspect(r)
		}
		return err
	})
	if err != nil {
		return wire.RWInspection{}, rw.redisErr("inspect", badReply(err))
	}
	return in, nil
}

// IsLocked reports whether an owner holds rw for writing. It makes one round trip, bounded by
// ctx.
func (rw *RWMutex) IsLocked(ctx context.Context) (bool, error) {
	r, err := rw.inspect(ctx, "")
	return err == nil && r.Writer, err
}

// Readers returns the number of owners holding rw for reading (a writer that also reads
// counts). It makes one round trip, bounded by ctx.
func (rw *RWMutex) Readers(ctx context.Context) (int, error) {
	r, err := rw.inspect(ctx, "")
	if err != nil {
		return 0, err
	}
	return int(r.Readers), nil
}

// HoldCount returns the read and write holds the owner in ctx has on rw (0, 0 if none, or if
// ctx carries no owner). It makes one round trip, bounded by ctx; an ended ctx still names
// its owner and is read with a timeout of its own.
func (rw *RWMutex) HoldCount(ctx context.Context) (read, write int, err error) {
	if err := rw.check(ctx); err != nil {
		return 0, 0, err
	}
	owner, ok, err := rw.callerOwner(ctx)
	if !ok {
		return 0, 0, err
	}
	r, err := rw.inspect(ctx, owner)
	if err != nil {
		return 0, 0, err
	}
	return int(r.Read), int(r.Write), nil
}

// Token returns the fencing token of the hold of rw that ctx carries, and true: a write
// hold's own token, or for a read hold the counter when it was taken (the last writer's token,
// 0 before any writer). It returns (0, false) without [WithFencing] or for a context that
// carries no hold of rw. It does not block.
func (rw *RWMutex) Token(ctx context.Context) (int64, bool) { return tokenOf(ctx, &rw.lock) }
