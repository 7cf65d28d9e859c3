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
// (Mutex, fair Mutex, RWMutex, fair RWMutex, Semaphore) contributes only its scripts, its key
// layout and how its waiters wake. Everything else is written once, here and in the files
// named after it: owners and request ids (owner.go, rlock.go), acquiring and waiting
// (lock.go, wait.go, pubsub.go), the client's state per name and its locking (shards.go), the
// hold registry and hold contexts (hold.go), releasing (unlock.go), requests whose reply was
// lost (lane.go), leases, renewal and loss (watchdog.go), and Close (rlock.go).

// access is the way a hold holds its lock: exclusively (every kind but an RWMutex's read
// holds) or shared (an RWMutex's read holds). An owner's holds of each access are counted
// apart.
type access uint8

const (
	exclusive access = iota
	shared
	accesses // the number of accesses
)

// kind is what one kind of lock contributes. Each method runs its script once, under ctx.
type kind interface {
	// acquire runs the acquire script for r (see attempt).
	acquire(ctx context.Context, lk *lock, r request) (attempt, error)
	// release runs the release script for one hold of owner in access a, under request id req.
	release(ctx context.Context, lk *lock, owner string, a access, req string) (released, error)
	// leave removes the waiter of request r from the lock's queue (queued waiters only), and
	// gives back a hold a release granted it.
	leave(ctx context.Context, lk *lock, r request) error
	// renewal is the script that renews watchdog holds of this kind and the keys it takes per
	// hold (all in the lock's slot); see renew.lua.
	renewal() (wire.Script, []string)
	// style is how a waiter for access a waits.
	style(a access) waitStyle
	// name is the Kind that observers see.
	name() string
}

// waitStyle is how a waiter of a kind waits under PubSub (Spin polls instead of waking).
type waitStyle struct {
	wake wakeBy
	// queued waiters hold a place that others wait behind (a fair queue, a waiting writer, a
	// semaphore's queue): they refresh it at least every third of FairWaitTimeout and remove
	// it when they give up.
	queued bool
	// prefix makes a waiter's address (wakeAddressed): prefix + owner.
	prefix string
}

// Ways a waiter is woken by the lock's channel (see pubsub.go).
type wakeBy uint8

const (
	wakeOne       wakeBy = iota // "0" or "*": one waiter per client, barging rules (wait.go) for a plain Mutex
	wakeReaders                 // "*": every reader of the client
	wakeAddressed               // "@" + address: the waiter with that address
)

// request is one acquire attempt: who asks, under which request id, how.
type request struct {
	owner  string
	id     string // request id: the same for every attempt of one call
	mode   int    // takeLock, reenterOnly or resolveOnly
	access access
	n      int64 // permits (Semaphore)
	join   bool  // join (or stay in) the queue if the lock is not free
	// conn, if not nil, is the connection the script must run on (see Client.eval).
	conn rueidis.DedicatedClient
}

// Modes of an acquire attempt.
const (
	takeLock    = iota // take a free lock or re-enter
	reenterOnly        // re-enter a hold the owner has; leave a free lock to the waiters
	resolveOnly        // report whether request req ran (and took a hold); change nothing
)

// modeArg is the script argument of each mode.
var modeArg = [...]wire.Mode{takeLock: wire.Take, reenterOnly: wire.Reenter, resolveOnly: wire.Resolve}

// attempt is the outcome of one run of an acquire script.
type attempt struct {
	acquired bool
	count    int64         // owner's hold count in the attempt's access after acquiring
	token    int64         // fencing token of the hold
	pttl     time.Duration // when not acquired: how long the holder may keep it, -1 for no end
	head     bool          // queued, not acquired: the owner is next (it also wakes at pttl)
	// joined, queued and not acquired: this attempt put the call's entry in the queue (it was
	// not there: the first attempt, or the entry was granted or purged since the last one).
	joined bool
	sent   time.Time // when the script was sent: the lease ends no earlier than sent+lease
	// claim, for a hold a release granted this call (direct handoff), is its lease in Redis
	// from no earlier than sent (instead of the lock's lease) until the holder extends it.
	claim time.Duration
	// unreplicated, for a new hold with Options.SyncReplicas, is the error wrapping
	// ErrNotReplicated when too few replicas acknowledged it: the caller gives it back.
	unreplicated error
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

// released is the outcome of one run of a release script.
type released struct {
	left  int64 // the owner's remaining holds in that access; -1: it held none
	total int64 // its remaining holds in every access
	woken int64 // clients the release message reached
}

// lock is what every kind of lock has: a name, its keys, its settings and its kind.
type lock struct {
	c       *Client
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
	err       error  // invalid name or option: returned by every call
	sh        *shard // the client's state about this name (shardOf keys.Lock)

	leaseMs string // leaseFor() in milliseconds, as the scripts take it
	claimMs string // claimFor() in milliseconds
	// ctxKey is holdCtxKey{c, keys.Lock}, made an interface once: each conversion allocates.
	ctxKey any
}

// newLock applies opts to a lock called name, whose kind newKind makes from its keys and
// settings (kinds make the key lists of their scripts once, here).
func (c *Client) newLock(noun, name string, newKind func(lk *lock) kind, opts []MutexOption) lock {
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
	lk := lock{
		c:       c,
		noun:    noun,
		name:    name,
		keys:    wire.NewKeys(c.opts.KeyPrefix, name),
		lease:   cfg.lease.Truncate(time.Millisecond),
		wait:    cfg.wait,
		fencing: cfg.fencing,
		err:     err,
	}
	lk.sh = c.shardOf(lk.keys.Lock)
	lk.ctxKey = holdCtxKey{c, lk.keys.Lock}
	lk.leaseMs = strconv.FormatInt(lk.leaseFor().Milliseconds(), 10)
	lk.claimMs = strconv.FormatInt(lk.claimFor().Milliseconds(), 10)
	lk.kind = newKind(&lk)
	return lk
}

// errorf returns an error naming the lock.
func (lk *lock) errorf(format string, args ...any) error {
	return fmt.Errorf("%s %q: "+format, append([]any{lk.noun, lk.name}, args...)...)
}

// check returns the error every call must return before doing anything, or nil.
func (lk *lock) check(ctx context.Context) error {
	if lk.err != nil {
		return lk.err
	}
	if lk.c.closed.Load() {
		return ErrClosed
	}
	if ctx == nil {
		return lk.errorf("%w", invalidf("nil context"))
	}
	return nil
}

// leaseFor is the lease a new hold gets in Redis, in whole milliseconds.
func (lk *lock) leaseFor() time.Duration {
	if lk.lease > 0 {
		return lk.lease
	}
	return lk.c.lease
}

// claimFor is the lease a release that grants this lock to a queued waiter gives it (direct
// handoff), or 0 when the waiter must be woken to take it itself. A claim is at most
// FairWaitTimeout, so a grant to a waiter that died holds the lock no longer than a dead
// waiter's place would; the holder extends it to its lease off the critical path (the
// watchdog renews it soon). A fixed lease longer than FairWaitTimeout could not be extended to
// exactly that lease, and a hold that must reach replicas must be taken on the waiter's own
// connection: those waiters are woken instead.
func (lk *lock) claimFor() time.Duration {
	switch {
	case lk.c.opts.SyncReplicas > 0:
		return 0
	case lk.lease == 0:
		return min(lk.c.lease, lk.c.opts.FairWaitTimeout).Truncate(time.Millisecond)
	case lk.lease <= lk.c.opts.FairWaitTimeout:
		return lk.lease
	}
	return 0
}

// localEnd is the moment this process takes a lease of d sent at sent to end: early enough
// that Redis, which starts the lease when the request arrives, still has it then. The margin is
// 1ms and 0.1% of d, whatever d: Redis counts a lease from the whole millisecond the script
// runs in (a read-write mutex's or a semaphore's lapses when the server's clock reaches its
// end), up to 1ms before the request arrived; the 0.1% covers clock rate differences. (A lease
// of 1ms ends at once.)
func localEnd(sent time.Time, d time.Duration) time.Time {
	return sent.Add(d - time.Millisecond - d/1000)
}

// acquire is Lock, RLock and Acquire (bounded false) and their Try forms (bounded: give up
// after wait): it waits while ctx lives and runs its Redis commands under cmd (the observer's
// context; see detach). blocked reports that an attempt found the lock held, or that the call
// queued behind waiters.
func (lk *lock) acquire(ctx, cmd context.Context, acc access, n int64, bounded bool, wait time.Duration) (_ context.Context, blocked bool, _ error) {
	if err := lk.check(ctx); err != nil {
		return nil, false, err
	}
	if bounded && wait < 0 {
		return nil, false, lk.errorf("%w", invalidf("negative wait %v", wait))
	}
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	req := lk.c.requestID() // unique across clients: a random client id and a counter
	var owner string
	var ok bool
	if !lk.ownerless {
		var err error
		if owner, ok, err = lk.callerOwner(ctx); err != nil {
			return nil, false, err
		}
	}
	if !ok {
		// An owner made for this call is its request id: the scripts know by that that nobody
		// else can hold as it, and skip the replay record (see lib.lua).
		owner = req
	}
	w := waiter{lk: lk, style: lk.kind.style(acc), ctx: ctx, cmd: cmd, bounded: bounded, fresh: !ok,
		r: request{owner: owner, id: req, access: acc, n: n, join: !bounded || wait != 0}}
	if w.bounded {
		w.deadline = time.Now().Add(wait)
	}
	noticed := lk.c.noticed.Load()
	a, err := w.acquire()
	if err != nil {
		return nil, w.blocked, err
	}
	defer lk.exitLane(w.lane)
	held, err := lk.c.register(ctx, cmd, lk, w.lane, owner, acc, a)
	if err == nil && lk.c.noticed.Load() != noticed {
		// A watcher noticed a restart or failover while this call ran: the check it started
		// may have looked before this hold was registered (see notice).
		lk.c.verifyNow()
	}
	return held, w.blocked, err
}

// tryAcquire runs the acquire script once for r. A request that already ran returns its
// recorded outcome. The caller holds r.owner's lane.
func (lk *lock) tryAcquire(ctx context.Context, r request) (attempt, error) {
	// The caller's cancellation does not cut the call short: its outcome must be known (a
	// hold taken for a caller who left is given back). rueidis' connection timeout bounds it.
	ctx = detach(ctx)
	c := lk.c
	if c.opts.SyncReplicas == 0 || r.mode == resolveOnly {
		return lk.kind.acquire(ctx, lk, r)
	}
	return lk.tryAcquireReplicated(ctx, r)
}

// tryAcquireReplicated is tryAcquire with Options.SyncReplicas: Redis counts a replica's
// acknowledgement for the writes of the connection that asks, so the script and WAIT share a
// connection of their own. (Apart from tryAcquire, whose r would otherwise be moved to the
// heap on every call.)
func (lk *lock) tryAcquireReplicated(ctx context.Context, r request) (attempt, error) {
	c := lk.c
	var a attempt
	var err error
	_ = c.rc.Dedicated(func(d rueidis.DedicatedClient) error {
		r.conn = d
		a, err = lk.kind.acquire(ctx, lk, r)
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

// waitReplicas is the WAIT command of Options.SyncReplicas.
func (c *Client) waitReplicas(b rueidis.Builder) rueidis.Completed {
	return b.Wait().Numreplicas(int64(c.opts.SyncReplicas)).Timeout(c.opts.SyncTimeout.Milliseconds()).Build()
}

// notReplicated reads the reply of waitReplicas sent after what was written ("the hold", "the
// renewal"): nil when enough replicas acknowledged it, else an error wrapping ErrNotReplicated.
func (c *Client) notReplicated(what string, res rueidis.RedisResult) error {
	acked, err := res.AsInt64()
	switch {
	case err != nil:
		return fmt.Errorf("%w: WAIT after %s failed: %w", ErrNotReplicated, what, err)
	case acked < int64(c.opts.SyncReplicas):
		return fmt.Errorf("%w: %d of %d replicas acknowledged %s within %v", ErrNotReplicated,
			acked, c.opts.SyncReplicas, what, c.opts.SyncTimeout)
	}
	return nil
}

// eval runs script s for request r: on r's own connection if it has one, else through the
// client (EVALSHA, falling back to EVAL when the server lacks the script).
func (c *Client) eval(ctx context.Context, r *request, s wire.Script, keys, args []string) rueidis.RedisResult {
	if r == nil || r.conn == nil {
		return c.script(s).Exec(ctx, c.rc, keys, args)
	}
	return c.script(s).ExecOn(ctx, r.conn, keys, args)
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

// readCtx returns ctx for a read, or, when it has ended (an ended hold context still names
// its owner), a context with a timeout of its own.
func readCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Err() != nil {
		return context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	}
	return ctx, func() {}
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

// token returns the fencing token of the hold of lk that ctx carries (see Mutex.Token).
func (lk *lock) token(ctx context.Context) (int64, bool) {
	if lk.err != nil || !lk.fencing || ctx == nil {
		return 0, false
	}
	hc, ok := ctx.Value(lk.ctxKey).(*holdCtx)
	if !ok {
		return 0, false
	}
	return hc.token, true
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

// checkName returns nil for a valid lock name, else an error wrapping ErrInvalid.
func checkName(name string) error {
	if err := wire.CheckName(name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}
