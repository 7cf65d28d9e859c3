package rlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Mutex is a reentrant distributed lock identified by a name. It holds only the name and
// settings, so it is safe to share between goroutines: holds belong to owners, which travel in
// contexts. Create one with [Client.NewMutex] or [Client.NewFairMutex].
type Mutex struct {
	c       *Client
	name    string
	keys    lockKeys
	lease   time.Duration // fixed lease in whole milliseconds; 0: watchdog
	wait    WaitStrategy
	fencing bool
	fair    bool
	err     error // invalid name or option: returned by every call

	leaseMs     string   // leaseFor() in milliseconds, as the scripts take it
	acquireKeys []string // KEYS of acquire.lua: the lock, and the fencing counter if fencing
}

// NewMutex returns the reentrant mutex called name. It does not touch Redis. An empty name or
// an invalid option is reported by every method of the returned mutex as an error wrapping
// [ErrInvalid].
func (c *Client) NewMutex(name string, opts ...MutexOption) *Mutex {
	cfg := mutexConfig{wait: c.opts.Wait}
	for _, opt := range opts {
		if opt == nil {
			cfg.err = invalidf("nil MutexOption")
			continue
		}
		opt(&cfg)
	}
	err := validateName(name)
	if err == nil {
		err = cfg.err
	}
	if err != nil {
		err = fmt.Errorf("mutex %q: %w", name, err)
	}
	m := &Mutex{
		c:       c,
		name:    name,
		keys:    newLockKeys(c.opts.KeyPrefix, name),
		lease:   cfg.lease.Truncate(time.Millisecond),
		wait:    cfg.wait,
		fencing: cfg.fencing,
		err:     err,
	}
	m.leaseMs = strconv.FormatInt(m.leaseFor().Milliseconds(), 10)
	m.acquireKeys = []string{m.keys.lock}
	if m.fencing {
		m.acquireKeys = append(m.acquireKeys, m.keys.fence)
	}
	return m
}

// Name returns the lock name given to NewMutex or NewFairMutex.
func (m *Mutex) Name() string { return m.name }

// check returns the error every call of m must return before doing anything, or nil.
func (m *Mutex) check(ctx context.Context) error {
	if m.err != nil {
		return m.err
	}
	if m.c.closed.Load() {
		return ErrClosed
	}
	if ctx == nil {
		return fmt.Errorf("mutex %q: %w", m.name, invalidf("nil context"))
	}
	return nil
}

// leaseFor is the lease a new hold of m gets in Redis, in whole milliseconds.
func (m *Mutex) leaseFor() time.Duration {
	if m.lease > 0 {
		return m.lease
	}
	return m.c.lease
}

// localEnd is the moment this process takes a lease of d sent at sent to end: early enough
// that Redis, which starts the lease when the request arrives, still has it then. The margin
// (1ms and 0.1% of d, at most a tenth of d) covers timer lateness and clock rate differences.
func localEnd(sent time.Time, d time.Duration) time.Time {
	return sent.Add(d - min(d/10, time.Millisecond+d/1000))
}

// Lock acquires m for the owner in ctx, or for a fresh owner if ctx carries none, blocking
// until it is acquired, ctx is done, or the Client is closed. A lock the owner already holds is
// re-entered at once (hold count + 1, lease reset). It returns the hold context: derived from
// ctx, carrying the owner, cancelled with cause [ErrLockLost] when the lease is lost and with
// [context.Canceled] once Unlock has released the owner's last hold. On error the context is
// nil and nothing is held: ctx's error, [ErrClosed], an error wrapping [ErrInvalid], or a Redis
// error reply. Transport errors while waiting are retried; an attempt whose reply was lost is
// replayed under its request id, and given back if the call ends before learning its outcome.
func (m *Mutex) Lock(ctx context.Context) (context.Context, error) {
	return m.observeLock(ctx, false, 0)
}

// TryLock is [Mutex.Lock] that gives up after wait with [ErrNotObtained]; wait 0 makes a single
// attempt. If that attempt's reply was lost, the error wraps both ErrNotObtained and the
// transport error. A wait that ends leaves nothing in Redis (no queue entry, no subscription,
// no hold).
// A fair mutex's TryLock never jumps the queue.
func (m *Mutex) TryLock(ctx context.Context, wait time.Duration) (context.Context, error) {
	return m.observeLock(ctx, true, wait)
}

// lock is Lock (bounded false) and TryLock (bounded: give up after wait): it waits while ctx
// lives and runs its Redis commands under cmd (the observer's context; see detach). blocked
// reports that an attempt found the lock held, or that the call queued behind waiters.
func (m *Mutex) lock(ctx, cmd context.Context, bounded bool, wait time.Duration) (_ context.Context, blocked bool, _ error) {
	if err := m.check(ctx); err != nil {
		return nil, false, err
	}
	if bounded && wait < 0 {
		return nil, false, fmt.Errorf("mutex %q: %w", m.name, invalidf("negative wait %v", wait))
	}
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	req := m.c.requestID() // unique across clients: a random client id and a counter
	owner, ok := Owner(ctx)
	if ok {
		if err := validateOwner(owner); err != nil {
			return nil, false, fmt.Errorf("mutex %q: %w", m.name, err)
		}
	} else {
		// An owner made for this call is its request id: the scripts know by that that nobody
		// else can hold as it, and skip the replay record (see acquire.lua).
		owner = req
	}
	w := waiter{m: m, owner: owner, req: req, ctx: ctx, cmd: cmd, bounded: bounded, join: !bounded || wait != 0, fresh: !ok}
	if w.bounded {
		w.deadline = time.Now().Add(wait)
	}
	a, err := w.acquire()
	if err != nil {
		return nil, w.blocked, err
	}
	defer m.exitLane(w.lane)
	held, err := m.c.register(ctx, cmd, m, w.lane, owner, a)
	return held, w.blocked, err
}

// attempt is the outcome of one run of the acquire script.
type attempt struct {
	acquired bool
	count    int64         // owner's hold count after acquiring
	token    int64         // fencing token of the hold
	pttl     time.Duration // when not acquired: holder's remaining lease, -1 for none
	head     bool          // fair mutex, not acquired: the owner heads the queue
	sent     time.Time     // when the script was sent: the lease ends no earlier than sent+lease
}

// Modes of an acquire attempt.
const (
	takeLock    = iota // take a free lock or re-enter
	reenterOnly        // re-enter a hold the owner has; leave a free lock to the waiters
	resolveOnly        // report whether request req ran (and took a hold); change nothing
)

// modeArg is the script argument of each mode.
var modeArg = [...]string{takeLock: "take", reenterOnly: "reenter", resolveOnly: "resolve"}

// tryAcquire runs the acquire script once for request req, in one of the modes above; join
// lets a fair waiter join (or stay in) the queue. A request that already ran returns its
// recorded outcome. The caller holds owner's lane.
func (m *Mutex) tryAcquire(ctx context.Context, owner, req string, mode int, join bool) (attempt, error) {
	a := attempt{sent: time.Now()}
	// The caller's cancellation does not cut the call short: its outcome must be known (a
	// hold taken for a caller who left is given back). rueidis' connection timeout bounds it.
	ctx = detach(ctx)
	var r rueidis.RedisResult
	switch {
	case m.fair:
		queue := "try"
		if join {
			queue = "wait"
		}
		fence := "0"
		if m.fencing {
			fence = "1"
		}
		r = fairAcquireScript.Exec(ctx, m.c.rc,
			[]string{m.keys.lock, m.keys.queue, m.keys.deadlines, m.keys.fence},
			[]string{owner, m.leaseMs, req, modeArg[mode], fence, m.c.fairWaitMs, queue})
	default:
		r = acquireScript.Exec(ctx, m.c.rc, m.acquireKeys, []string{owner, m.leaseMs, req, modeArg[mode]})
	}
	reply, err := r.AsIntSlice()
	if err != nil {
		return a, m.redisErr("acquire", err)
	}
	if len(reply) == 3 && reply[0] == 1 {
		a.acquired, a.count, a.token = true, reply[1], reply[2]
		return a, nil
	}
	if len(reply) < 2 || reply[0] != 0 {
		return a, fmt.Errorf("rlock: mutex %q: unexpected acquire reply %v", m.name, reply)
	}
	a.pttl = time.Duration(reply[1]) * time.Millisecond
	switch {
	case reply[1] == -2:
		a.pttl = 0 // free, but a fair waiter is ahead (or left to the waiters)
	case reply[1] < 0:
		a.pttl = -1
	}
	a.head = len(reply) == 3 && reply[2] == 1
	return a, nil
}

// redisErr wraps an error from Redis with the operation and lock name. A key of the wrong type
// or a fencing counter that is not a number becomes an error wrapping ErrInvalid.
func (m *Mutex) redisErr(op string, err error) error {
	if re, ok := rueidis.IsRedisErr(err); ok {
		msg := re.Error()
		switch {
		case strings.Contains(msg, "WRONGTYPE"):
			return fmt.Errorf("mutex %q: %w", m.name,
				invalidf("a key of this lock (%s*) holds a value that is not a lock of this library", m.keys.lock))
		case strings.Contains(msg, "not an integer") || strings.Contains(msg, "overflow"):
			return fmt.Errorf("mutex %q: %w", m.name,
				invalidf("fencing counter %q is not a number below 2^63-1", m.keys.fence))
		}
	}
	return fmt.Errorf("mutex %q: %s: %w", m.name, op, err)
}

// ForceUnlock deletes m whoever holds it and wakes a waiter. It reports whether the lock
// existed. This process's holds of m are cancelled with cause [ErrLockLost] at once; holders in
// other processes learn it at their next renewal. A key of another type at any of the lock's
// names is an error wrapping [ErrInvalid], and nothing is deleted.
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) {
	if err := m.check(ctx); err != nil {
		return false, err
	}
	keys, args := []string{m.keys.lock, m.keys.channel}, []string{unlockMessage}
	if m.fair {
		keys, args = append(keys, m.keys.queue), []string{addressedPrefix, "1"}
	}
	n, err := forceUnlockScript.Exec(ctx, m.c.rc, keys, args).AsInt64()
	if err != nil {
		return false, m.redisErr("force unlock", err)
	}
	m.c.loseKey(m.keys.lock)
	return n == 1, nil
}

// inspect reads whether the lock is held, the hold count of owner ("" for none), and its pttl.
func (m *Mutex) inspect(ctx context.Context, owner string) (held bool, count int64, pttl time.Duration, err error) {
	if err := m.check(ctx); err != nil {
		return false, 0, 0, err
	}
	if ctx.Err() != nil {
		// An ended hold context still names its owner: read with a timeout of our own.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		defer cancel()
	}
	r, err := inspectScript.Exec(ctx, m.c.rc, []string{m.keys.lock}, []string{owner}).AsIntSlice()
	if err != nil {
		return false, 0, 0, m.redisErr("inspect", err)
	}
	if len(r) != 3 {
		return false, 0, 0, fmt.Errorf("rlock: mutex %q: unexpected inspect reply %v", m.name, r)
	}
	return r[0] > 0, r[1], time.Duration(r[2]) * time.Millisecond, nil
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
	owner, ok := Owner(ctx)
	if !ok {
		return 0, nil
	}
	if err := validateOwner(owner); err != nil {
		return 0, fmt.Errorf("mutex %q: %w", m.name, err)
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
func (m *Mutex) Token(ctx context.Context) (int64, bool) {
	if m.err != nil || !m.fencing || ctx == nil {
		return 0, false
	}
	hc, ok := ctx.Value(holdCtxKey{m.c, m.keys.lock}).(*holdCtx)
	if !ok {
		return 0, false
	}
	return hc.token, true
}
