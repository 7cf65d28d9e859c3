package rlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock/internal/wire"
)

// One machinery serves every kind of lock. A lock is a name, its keys and settings; its kind
// (see kind.go) contributes its scripts, its key layout, how its waiters wake and what its
// holds are checked and renewed as. Everything else is written once (docs/layout.md maps the
// files).

// lock is what every kind of lock has: a name, its keys, its settings and its kind.
type lock struct {
	core    *core
	kind    kind
	noun    string // the kind as State.Kind spells it ("rw_mutex"), for errors
	name    string
	keys    wire.Keys
	lease   time.Duration // fixed lease in whole milliseconds; 0: watchdog
	wait    WaitStrategy
	fencing bool
	// ownerless: every acquire is a new hold named by its request id, and hold contexts carry
	// no owner (Semaphore).
	ownerless bool
	// modes: an owner holds it in two accesses (an RWMutex), each with a fate of its own: the
	// contexts of its write holds end when their lease is lost (see accessHold.ctx).
	modes bool
	err   error // invalid name or option: returned by every call

	leaseMs string // leaseFor() in milliseconds, as the scripts take it
	claimMs string // claimFor() in milliseconds
	// ctxKey is holdCtxKey{core, keys.Lock}, made an interface once: each conversion allocates.
	ctxKey any
}

// holdCtxKey finds, in a context, the hold of one lock of one client.
type holdCtxKey struct {
	c   *core
	key string
}

// init sets lk up as the lock called name of the client of c, with opts; its kind is set by
// the caller (see Client.bind).
func (lk *lock) init(c *core, noun, name string, opts []MutexOption) {
	cfg := mutexConfig{wait: c.opts.Wait}
	for _, opt := range opts {
		if opt == nil {
			cfg.err = invalidf("nil MutexOption")
			continue
		}
		opt(&cfg)
	}
	err := checkName(name)
	if err == nil {
		err = cfg.err
	}
	if err != nil {
		err = fmt.Errorf("%s %q: %w", noun, name, err)
	}
	*lk = lock{
		core:    c,
		noun:    noun,
		name:    name,
		keys:    wire.NewKeys(c.opts.KeyPrefix, name),
		lease:   cfg.lease.Truncate(time.Millisecond),
		wait:    cfg.wait,
		fencing: cfg.fencing,
		err:     err,
	}
	lk.ctxKey = holdCtxKey{c, lk.keys.Lock}
	lk.leaseMs = strconv.FormatInt(lk.leaseFor().Milliseconds(), 10)
	lk.claimMs = strconv.FormatInt(lk.claimFor().Milliseconds(), 10)
}

// checkName returns nil for a valid lock name, else an error wrapping ErrInvalid.
func checkName(name string) error {
	if err := wire.CheckName(name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// check returns the error every call must return before doing anything, or nil.
func (lk *lock) check(ctx context.Context) error {
	if lk.err != nil {
		return lk.err
	}
	if lk.core.closed.Load() {
		return ErrClosed
	}
	if ctx == nil {
		return lk.errorf("%w", invalidf("nil context"))
	}
	return nil
}

// callerOwner returns the owner ctx carries, validated, and whether it carries one.
func (lk *lock) callerOwner(ctx context.Context) (string, bool, error) {
	owner, ok := Owner(ctx)
	if !ok {
		return "", false, nil
	}
	if err := validateOwner(owner); err != nil {
		return "", false, lk.errorf("%w", err)
	}
	return owner, true, nil
}

// leaseFor is the lease a new hold gets in Redis, in whole milliseconds.
func (lk *lock) leaseFor() time.Duration {
	if lk.lease > 0 {
		return lk.lease
	}
	return lk.core.lease
}

// claimFor is the lease a release that grants this lock to a queued waiter gives it (direct
// handoff), or 0 when the waiter must be woken to take it itself. A claim is at most
// FairWaitTimeout, so a grant to a waiter that died holds the lock no longer than a dead
// waiter's place would; the holder extends it to its lease off the critical path (the
// watchdog renews it soon). A fixed lease longer than FairWaitTimeout could not be extended to
// exactly that lease, and a hold that must reach replicas must be taken on the waiter's own
// connection: those waiters are woken instead.
func (lk *lock) claimFor() time.Duration {
	c := lk.core
	switch {
	case c.opts.SyncReplicas > 0:
		return 0
	case lk.lease == 0:
		return min(c.lease, c.opts.FairWaitTimeout).Truncate(time.Millisecond)
	case lk.lease <= c.opts.FairWaitTimeout:
		return lk.lease
	}
	return 0
}

// info describes lk for the observer.
func (lk *lock) info() LockInfo { return LockInfo{Name: lk.name, Kind: lk.kind.name()} }

// errorf returns an error naming the lock.
func (lk *lock) errorf(format string, args ...any) error {
	return fmt.Errorf("%s %q: "+format, append([]any{lk.noun, lk.name}, args...)...)
}

// redisErr wraps an error from Redis with the operation and lock name. A key of the wrong type
// or a bad fencing counter (see wire.MaxExact) becomes an error wrapping ErrInvalid.
func (lk *lock) redisErr(op string, err error) error {
	if re, ok := rueidis.IsRedisErr(err); ok {
		msg := re.Error()
		switch {
		case strings.Contains(msg, "WRONGTYPE"):
			return lk.errorf("%w", invalidf("a key of this lock (%s*) holds a value that is not a lock of this library, "+
				"or a lock of another kind than %s", lk.keys.Lock, lk.noun))
		case strings.Contains(msg, "reached 2^53"):
			return lk.errorf("%w", invalidf("fencing counter %q reached 2^53: a new token could not be kept exact",
				lk.keys.Fence))
		case strings.Contains(msg, "not an integer") || strings.Contains(msg, "overflow"):
			return lk.errorf("%w", invalidf("fencing counter %q is not an integer from -2^53 to 2^53", lk.keys.Fence))
		}
	}
	return lk.errorf("%s: %w", op, err)
}

// parseAttempt reads an acquire script's reply (see wire.ParseAttempt) into a, sent already. A
// kind whose script has sentinel replies maps them to errors before.
func (lk *lock) parseAttempt(a attempt, reply []int64) (attempt, error) {
	w, err := wire.ParseAttempt(reply)
	if err != nil {
		return a, fmt.Errorf("rlock: %s %q: unexpected acquire reply %v", lk.noun, lk.name, reply)
	}
	a.acquired, a.count, a.token, a.claim = w.Acquired, w.Count, w.Token, w.Claim
	a.pttl, a.head, a.joined = w.PTTL, w.Head, w.Joined
	return a, nil
}

// tryOnce runs the kind's acquire script once for r. A request that already ran returns its
// recorded outcome. The caller holds r.owner's lane.
func (lk *lock) tryOnce(ctx context.Context, r request) (attempt, error) {
	// The caller's cancellation does not cut the call short: its outcome must be known (a
	// hold taken for a caller who left is given back). rueidis' connection timeout bounds it.
	ctx = detach(ctx)
	if lk.core.opts.SyncReplicas == 0 || r.mode == resolveOnly {
		return lk.kind.acquire(ctx, r)
	}
	return lk.tryReplicated(ctx, r)
}

// tryReplicated is tryOnce with Options.SyncReplicas: Redis counts a replica's
// acknowledgement for the writes of the connection that asks, so the script and WAIT share a
// connection of their own. (Apart from tryOnce, whose r would otherwise be moved to the heap on
// every call.)
func (lk *lock) tryReplicated(ctx context.Context, r request) (attempt, error) {
	c := lk.core
	var a attempt
	var err error
	_ = c.rc.Dedicated(func(d rueidis.DedicatedClient) error {
		r.conn = d
		a, err = lk.kind.acquire(ctx, r)
		if err != nil || !a.acquired || a.count != 1 {
			return nil // no new hold: nothing to wait for
		}
		if err := c.notReplicated("the hold", d.Do(ctx, c.waitReplicas(d.B()))); err != nil {
			a.unreplicated = lk.errorf("%w", err)
		}
		return nil
	})
	return a, err
}

// pendingRelease is one release request, kept across retries.
type pendingRelease struct {
	request     string
	validAtSend bool // the lease in its access was valid when the request was first sent
	ambiguous   bool // some attempt's reply was lost: the request may already have run
}

// releaseOnce runs the kind's release script for p once, under ctx without its cancellation
// and deadline (rueidis' connection timeout bounds the call, and a deadline passing mid-call
// would close the connection under every other call on it). A transport error marks p
// ambiguous; a context error is not the caller's (see attemptErr).
func (lk *lock) releaseOnce(ctx context.Context, owner string, acc access, p *pendingRelease) (releaseReply, error) {
	rel, err := lk.kind.release(detach(ctx), owner, acc, p.request)
	if err != nil {
		if isTransport(err) {
			p.ambiguous = true
		}
		return releaseReply{}, lk.redisErr("release", attemptErr(err))
	}
	return rel, nil
}
