package rlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// callTimeout bounds a read made with a context that has already ended.
const callTimeout = 10 * time.Second

// releaseBudget bounds the retries of one Unlock after transport errors.
const releaseBudget = 3 * time.Second

// unlockMessage is published on a plain lock's channel when it is released.
const unlockMessage = "0"

// Client makes mutexes on one Redis deployment and owns the goroutines behind them: one
// watchdog, and one subscription per lock name that has local waiters. It is safe for
// concurrent use. Create it with [New] and release it with [Client.Close].
type Client struct {
	rc         rueidis.Client
	cluster    bool // group multi-key commands by slot
	opts       Options
	fairWaitMs string        // opts.FairWaitTimeout in milliseconds
	id         string        // random, prefixes this client's request ids
	seq        atomic.Uint64 // request id counter

	ctx    context.Context // done once Close starts
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool

	mu       sync.Mutex
	holds    map[holdKey]*hold        // this process's holds, by lock key and owner
	subs     map[string]*subscription // live subscriptions by channel
	retiring map[string]chan struct{} // channel -> closed when its old subscription is gone
	yielding map[string]time.Time     // lock key -> end of its courtesy window (see courtesy)
}

// New returns a Client that locks through client. It validates opts (negative durations and
// a KeyPrefix with braces are errors wrapping [ErrInvalid]) and starts the watchdog goroutine.
// It does not take ownership of client: [Client.Close] leaves it open.
func New(client rueidis.Client, opts Options) (*Client, error) {
	if client == nil {
		return nil, invalidf("nil rueidis client")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{
		rc:       client,
		cluster:  client.Mode() == rueidis.ClientModeCluster,
		opts:     opts,
		id:       NewOwnerID()[:12],
		ctx:      ctx,
		cancel:   cancel,
		holds:    make(map[holdKey]*hold),
		subs:     make(map[string]*subscription),
		retiring: make(map[string]chan struct{}),
		yielding: make(map[string]time.Time),
	}
	c.fairWaitMs = strconv.FormatInt(opts.FairWaitTimeout.Milliseconds(), 10)
	c.wg.Add(1)
	go c.watchdog()
	return c, nil
}

// Close stops the watchdog and every subscription and returns once all goroutines of c have
// exited. Waiting Lock and TryLock calls return [ErrClosed]; hold contexts are cancelled with
// cause ErrClosed. Locks still held are not released: without renewal they expire within
// their lease. Close is idempotent and always returns nil.
func (c *Client) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.cancel()
		c.mu.Lock()
		holds := c.holds
		c.holds = make(map[holdKey]*hold)
		c.mu.Unlock()
		for _, h := range holds {
			h.end(ErrClosed)
		}
	}
	c.wg.Wait()
	return nil
}

// requestID returns an id unique to this call among all clients.
func (c *Client) requestID() string {
	var b [32]byte
	return string(strconv.AppendUint(append(b[:0], c.id...), c.seq.Add(1), 36))
}

// Mutex is a reentrant distributed lock identified by a name. It holds only the name and
// settings, so it is safe to share between goroutines: holds belong to owners, which travel in
// contexts. Create one with [Client.NewMutex] or [Client.NewFairMutex].
type Mutex struct {
	c       *Client
	name    string
	keys    lockKeys
	lease   time.Duration // 0: watchdog
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
		lease:   cfg.lease,
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

// leaseFor is the lease a new hold of m gets in Redis.
func (m *Mutex) leaseFor() time.Duration {
	if m.lease > 0 {
		return m.lease
	}
	return m.c.opts.WatchdogTimeout
}

// Lock acquires m for the owner in ctx, or for a fresh owner if ctx carries none, blocking
// until it is acquired, ctx is done, or the Client is closed. A lock the owner already holds is
// re-entered at once (hold count + 1, lease reset). It returns the hold context: derived from
// ctx, carrying the owner, cancelled with cause [ErrLockLost] when the lease is lost and with
// [context.Canceled] once Unlock has released the owner's last hold. On error the context is
// nil and nothing is held: ctx's error, [ErrClosed], an error wrapping [ErrInvalid], or a Redis
// error reply. Transport errors while waiting are retried.
func (m *Mutex) Lock(ctx context.Context) (context.Context, error) {
	return m.lock(ctx, -1)
}

// TryLock is [Mutex.Lock] that gives up after wait with [ErrNotObtained]; wait 0 makes a single
// attempt. A wait that ends leaves nothing in Redis (no queue entry, no subscription). A fair
// mutex's TryLock never jumps the queue.
func (m *Mutex) TryLock(ctx context.Context, wait time.Duration) (context.Context, error) {
	if wait < 0 {
		if err := m.check(ctx); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("mutex %q: %w", m.name, invalidf("negative wait %v", wait))
	}
	return m.lock(ctx, wait)
}

func (m *Mutex) lock(ctx context.Context, wait time.Duration) (context.Context, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	owner, ok := Owner(ctx)
	if ok {
		if err := validateOwner(owner); err != nil {
			return nil, fmt.Errorf("mutex %q: %w", m.name, err)
		}
	} else {
		owner = m.c.requestID() // unique across clients: a random client id and a counter
	}
	w := waiter{m: m, owner: owner, ctx: ctx, bounded: wait >= 0, join: wait != 0, fresh: !ok}
	if w.bounded {
		w.deadline = time.Now().Add(wait)
	}
	a, err := w.acquire()
	if err != nil {
		return nil, err
	}
	return m.c.register(ctx, m, owner, a)
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
	adoptHold          // after a lost reply: as takeLock, but a hold the owner has is not counted again
	reenterOnly        // re-enter a hold the owner has; leave a free lock to the waiters
)

// tryAcquire runs the acquire script once, in one of the modes above; join lets a fair waiter
// join (or stay in) the queue.
func (m *Mutex) tryAcquire(ctx context.Context, owner string, mode int, join bool) (attempt, error) {
	a := attempt{sent: time.Now()}
	// The caller's cancellation does not cut the call short: its outcome must be known (a
	// hold taken for a caller who left is given back). rueidis' connection timeout bounds it.
	if ctx.Done() != nil {
		ctx = context.WithoutCancel(ctx)
	}
	var r rueidis.RedisResult
	switch {
	case m.fair:
		fence, adoptArg, queue := "0", "0", "try"
		if m.fencing {
			fence = "1"
		}
		if mode == adoptHold {
			adoptArg = "1"
		}
		if join {
			queue = "wait"
		}
		r = fairAcquireScript.Exec(ctx, m.c.rc,
			[]string{m.keys.lock, m.keys.queue, m.keys.deadlines, m.keys.fence},
			[]string{owner, m.leaseMs, fence, adoptArg, m.c.fairWaitMs, queue})
	default:
		keys, args := m.acquireKeys, []string{owner, m.leaseMs}
		switch mode {
		case adoptHold:
			args = append(args, "1")
		case reenterOnly:
			args = append(args, "2")
		}
		r = acquireScript.Exec(ctx, m.c.rc, keys, args)
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

// redisErr wraps an error from Redis with the operation and lock name; a WRONGTYPE reply
// becomes an error wrapping ErrInvalid.
func (m *Mutex) redisErr(op string, err error) error {
	if re, ok := rueidis.IsRedisErr(err); ok && strings.Contains(re.Error(), "WRONGTYPE") {
		return fmt.Errorf("mutex %q: %w", m.name,
			invalidf("key %q holds a value that is not a lock of this library", m.keys.lock))
	}
	return fmt.Errorf("rlock: %s %q: %w", op, m.name, err)
}

// isTransport reports whether err is a transport failure (the command may or may not have
// run), as opposed to a reply from Redis.
func isTransport(err error) bool {
	var reply *rueidis.RedisError
	return err != nil && !errors.As(err, &reply) && !errors.Is(err, ErrInvalid)
}

// Unlock releases one hold of the owner in ctx. It ignores ctx's cancellation for the release
// itself, retrying transport errors for a few seconds with the same request id, so a retried
// release never counts twice (also when the caller retries an Unlock that returned an error).
// Errors: [ErrNotHeld] when that owner holds nothing here (Redis untouched); [ErrLockLost] when
// this process held it but the lease was gone (a hold context whose loss the library saw, or
// a hold Redis no longer has), so the critical section may have overlapped another holder;
// [ErrClosed]; or a Redis error, after which the hold is unchanged or released (the next
// Unlock of the owner replays the same request and learns which). When the last hold is
// released, the owner's hold contexts are cancelled and waiters are woken.
func (m *Mutex) Unlock(ctx context.Context) error {
	if err := m.check(ctx); err != nil {
		return err
	}
	owner, ok := Owner(ctx)
	if !ok {
		return fmt.Errorf("mutex %q: context carries no owner: %w", m.name, ErrNotHeld)
	}
	if err := validateOwner(owner); err != nil {
		return fmt.Errorf("mutex %q: %w", m.name, err)
	}
	c := m.c
	hk := holdKey{m.keys.lock, owner}
	c.mu.Lock()
	if hc, ok := ctx.Value(holdCtxKey{c, m.keys.lock}).(*holdCtx); ok && hc.h.owner == owner && hc.h.lost && hc.h.count > 0 {
		// A hold of this context whose loss the library already saw: Redis is not touched (the
		// owner id may hold the lock anew, through another process).
		hc.h.count--
		c.mu.Unlock()
		return fmt.Errorf("mutex %q: %w", m.name, ErrLockLost)
	}
	h := c.holds[hk]
	pending := h.pending()
	if pending.request == "" {
		pending = pendingRelease{request: c.requestID(), validAtSend: h.valid()}
	}
	if h != nil {
		h.releasing++
	}
	c.mu.Unlock()

	left, err := m.release(owner, &pending)

	c.mu.Lock()
	defer c.mu.Unlock()
	if h != nil {
		h.releasing--
		h.pendingRelease = pendingRelease{}
		if c.holds[hk] != h {
			h = nil // replaced or ended meanwhile; the new record is not this call's
		}
	}
	if err != nil {
		if h != nil && pending.ambiguous {
			h.pendingRelease = pending // the next Unlock of this owner replays this request
		}
		return err
	}
	if left < 0 && pending.ambiguous && pending.validAtSend {
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

// pendingRelease is one Unlock request, kept across retries.
type pendingRelease struct {
	request     string
	validAtSend bool // the hold's lease was valid when the request was first sent
	ambiguous   bool // some attempt's reply was lost: the request may already have run
}

// release runs the release script for p, retrying transport errors within releaseBudget with
// the same request id, which the script recognises if an earlier attempt already ran.
func (m *Mutex) release(owner string, p *pendingRelease) (int64, error) {
	keys, args := []string{m.keys.lock, m.keys.channel}, []string{owner, p.request, unlockMessage}
	if m.fair {
		keys = []string{m.keys.lock, m.keys.channel, m.keys.queue, m.keys.deadlines}
		args = []string{owner, p.request, addressedPrefix, "1"}
	}
	give := time.Now().Add(releaseBudget)
	backoff := 10 * time.Millisecond
	for {
		// No context deadline: rueidis' connection timeout bounds the call, and a deadline
		// passing mid-call would close the connection under every other call on it.
		sent := time.Now()
		r, err := releaseScript.Exec(context.Background(), m.c.rc, keys, args).AsIntSlice()
		if err == nil && len(r) != 2 {
			err = errBadReply
		}
		if err == nil {
			if r[0] == 0 && r[1] > 0 && !m.fair {
				m.c.courtesy(m.keys.lock, time.Since(sent))
			}
			return r[0], nil
		}
		if !isTransport(err) {
			return 0, m.redisErr("release", err)
		}
		p.ambiguous = true
		if time.Now().Add(backoff).After(give) {
			return 0, m.redisErr("release", err)
		}
		time.Sleep(backoff)
		backoff *= 2
	}
}

// ForceUnlock deletes m whoever holds it and wakes a waiter. It reports whether the lock
// existed. This process's holds of m are cancelled with cause [ErrLockLost] at once; holders in
// other processes learn it at their next renewal. A key of another type at the lock's name is
// an error wrapping [ErrInvalid], and is left alone.
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

// inspect reads the lock's owners, the hold count of owner ("" for none), and its pttl.
func (m *Mutex) inspect(ctx context.Context, owner string) (owners, count int64, pttl time.Duration, err error) {
	if err := m.check(ctx); err != nil {
		return 0, 0, 0, err
	}
	if ctx.Err() != nil {
		// An ended hold context still names its owner: read with a timeout of our own.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		defer cancel()
	}
	r, err := inspectScript.Exec(ctx, m.c.rc, []string{m.keys.lock}, []string{owner}).AsIntSlice()
	if err != nil {
		return 0, 0, 0, m.redisErr("inspect", err)
	}
	if len(r) != 3 {
		return 0, 0, 0, fmt.Errorf("rlock: mutex %q: unexpected inspect reply %v", m.name, r)
	}
	return r[0], r[1], time.Duration(r[2]) * time.Millisecond, nil
}

// IsLocked reports whether any owner holds m. It makes one round trip, bounded by ctx.
func (m *Mutex) IsLocked(ctx context.Context) (bool, error) {
	owners, _, _, err := m.inspect(ctx, "")
	return owners > 0, err
}

// HoldCount returns the number of holds the owner in ctx has on m (0 if none, or if ctx
// carries no owner). It makes one round trip, bounded by ctx; a ctx that has already ended,
// such as a released hold context, still identifies the owner and is read with a timeout of
// its own.
func (m *Mutex) HoldCount(ctx context.Context) (int, error) {
	owner, ok := Owner(ctx)
	if !ok {
		if err := m.check(ctx); err != nil {
			return 0, err
		}
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
	owners, _, pttl, err := m.inspect(ctx, "")
	switch {
	case err != nil || owners == 0:
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
