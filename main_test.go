package rlock_test

// The root package's harness: TestMain (redistest.Main) and env, a redistest.Env whose clients
// are rlock clients; the servers, deployments, fault proxy and child processes are in
// internal/redistest.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/internal/wire"
)

func TestMain(m *testing.M) { redistest.Main(m, runHelper) }

var bg = context.Background()

// node is a data node of a deployment, reached directly.
type node = redistest.Node

// env is one test's namespace on a deployment (redistest.Env) with the library's clients.
type env struct{ *redistest.Env }

// newEnv returns an env on the suite's deployment; it skips t under -short.
func newEnv(t testing.TB) *env { return &env{redistest.NewEnv(t)} }

// newEnvAt returns an env on the standalone server at addr (one the test started).
func newEnvAt(t testing.TB, addr string) *env { return &env{redistest.NewEnvAt(t, addr)} }

// newProxy returns a fault proxy in front of targets, data nodes of e's deployment (none given:
// all of them; see through). It loads every script on every master first: a fault armed on a
// script must meet the call that runs it, not a NOSCRIPT reply (an earlier test may have
// flushed the scripts).
func (e *env) newProxy(targets ...string) *redistest.Proxy {
	e.T.Helper()
	for _, m := range e.Dep.Masters {
		var load rueidis.Commands
		for _, f := range wire.Files() {
			for _, src := range []string{wire.Source(f), wire.ShardedSource(f)} {
				load = append(load, m.RC.B().ScriptLoad().Script(src).Build())
			}
		}
		for _, r := range m.RC.DoMulti(context.Background(), load...) {
			require.NoError(e.T, r.Error())
		}
	}
	if len(targets) == 0 {
		targets = e.Dep.Data
	}
	return redistest.NewProxy(e.T, targets...)
}

// through returns an env whose clients reach the data nodes through p; keys are checked by e.
func (e *env) through(p *redistest.Proxy) *env { return &env{e.Through(p)} }

// client returns an rlock client with this env's prefix on its own rueidis client; it is
// closed when the test ends.
func (e *env) client(opts rlock.Options) *rlock.Client {
	e.T.Helper()
	opts.KeyPrefix = e.Prefix
	c, err := rlock.New(e.Rueidis(), opts)
	require.NoError(e.T, err)
	e.T.Cleanup(func() { require.NoError(e.T, c.Close()) })
	return c
}

// keptFor bounds how long a client keeps a subscription after its last waiter left: the
// linger (1s, see linger.go) and the UNSUBSCRIBE's round trip, with room for a loaded machine.
const keptFor = 3 * time.Second

// strategies are the wait strategies every waiting behaviour is tested under.
var strategies = []struct {
	name string
	wait rlock.WaitStrategy
}{
	{"pubsub", rlock.PubSub()},
	{"spin", rlock.Spin(5 * time.Millisecond)},
}

// eachStrategy runs f as a subtest per wait strategy.
func eachStrategy(t *testing.T, f func(t *testing.T, wait rlock.WaitStrategy)) {
	for _, s := range strategies {
		t.Run(s.name, func(t *testing.T) { f(t, s.wait) })
	}
}

// mutexMaker makes a mutex of one kind: (*rlock.Client).NewMutex or NewFairMutex.
type mutexMaker = func(c *rlock.Client, name string, opts ...rlock.MutexOption) *rlock.Mutex

// rwMaker makes a read-write mutex of one kind: (*rlock.Client).NewRWMutex or NewFairRWMutex.
type rwMaker = func(c *rlock.Client, name string, opts ...rlock.MutexOption) *rlock.RWMutex

// lockKind is one kind of lock held in one mode, with what the per-kind tests need of it.
// kinds lists every one; each per-kind test iterates kinds, all of them or the rows it is
// about (see each and its forms).
type lockKind struct {
	name   string // its subtests' name (and a child process's KIND)
	kind   string // the Kind that observers and State see
	fair   bool   // a fair Mutex or RWMutex: waiters are served in arrival order
	queued bool   // a release grants the lock to the queue's head (direct handoff)
	read   bool   // an RWMutex's read holds, which share; every other row excludes
	// mutex and rw are the row's constructor, if it is a Mutex or an RWMutex; a Semaphore's
	// row has neither (its semaphores have semPermits permits, and a hold takes semUnit).
	mutex mutexMaker
	rw    rwMaker
	// acquireScript and releaseScript are its scripts' files (see matchScript).
	acquireScript, releaseScript string
	// keys are the suffixes of the keys besides the hash (P:{name}) whose type its acquire
	// script checks before it writes (listed for the RWMutex and Semaphore rows).
	keys []string
}

// The permits of the semaphores of kinds, and what one hold takes: two holds do not fit, one
// hold and a hold of 1 permit do.
const (
	semPermits = 3
	semUnit    = 2
)

// kinds is every kind of lock in every mode.
var kinds = []lockKind{
	{name: "mutex", kind: rlock.KindMutex, mutex: (*rlock.Client).NewMutex,
		acquireScript: "acquire.lua", releaseScript: "release.lua"},
	{name: "fair", kind: rlock.KindFairMutex, fair: true, queued: true, mutex: (*rlock.Client).NewFairMutex,
		acquireScript: "fair_acquire.lua", releaseScript: "fair_release.lua"},
	{name: "rw-read", kind: rlock.KindRWMutex, read: true, rw: (*rlock.Client).NewRWMutex,
		acquireScript: "rw_acquire.lua", releaseScript: "rw_release.lua", keys: []string{":leases", ":writers"}},
	{name: "rw-write", kind: rlock.KindRWMutex, rw: (*rlock.Client).NewRWMutex,
		acquireScript: "rw_acquire.lua", releaseScript: "rw_release.lua", keys: []string{":leases", ":writers"}},
	{name: "fairrw-read", kind: rlock.KindFairRWMutex, fair: true, queued: true, read: true,
		rw: (*rlock.Client).NewFairRWMutex, acquireScript: "rw_acquire.lua", releaseScript: "rw_release.lua",
		keys: []string{":leases", ":queue", ":deadlines"}},
	{name: "fairrw-write", kind: rlock.KindFairRWMutex, fair: true, queued: true, rw: (*rlock.Client).NewFairRWMutex,
		acquireScript: "rw_acquire.lua", releaseScript: "rw_release.lua", keys: []string{":leases", ":queue", ":deadlines"}},
	{name: "semaphore", kind: rlock.KindSemaphore, queued: true,
		acquireScript: "sem_acquire.lua", releaseScript: "sem_release.lua", keys: []string{":leases", ":queue", ":deadlines"}},
}

// kindNamed returns the row of kinds called name.
func kindNamed(name string) lockKind {
	for _, k := range kinds {
		if k.name == name {
			return k
		}
	}
	panic("no kind " + name)
}

// semaphore reports whether k is the Semaphore's row.
func (k lockKind) semaphore() bool { return k.mutex == nil && k.rw == nil }

// fenced reports whether k's holds can carry fencing tokens of their own (WithFencing: not a
// Semaphore; a read hold carries the last writer's).
func (k lockKind) fenced() bool { return !k.semaphore() && !k.read }

// family names k's kind without its mode ("rw" for "rw-read" and "rw-write").
func (k lockKind) family() string {
	return strings.TrimSuffix(strings.TrimSuffix(k.name, "-read"), "-write")
}

// Forms of the rows that tests iterate besides every row.
var (
	mutexKinds  = func(k lockKind) bool { return k.mutex != nil }         // Mutex, fair Mutex
	rwKinds     = func(k lockKind) bool { return k.rw != nil && !k.read } // one row per RWMutex kind
	queuedKinds = func(k lockKind) bool { return k.queued && !k.read }    // one row per queued kind
	allKinds    = func(lockKind) bool { return true }
	// perKind is one row per kind: a Mutex's, an RWMutex's writes, a Semaphore's.
	perKind = func(k lockKind) bool { return !k.read }
	// exclusiveKinds are the kinds and modes that one owner at a time holds, re-entrantly.
	exclusiveKinds = func(k lockKind) bool { return !k.read && !k.semaphore() }
)

// each runs f as a subtest per row of kinds that form takes.
func each(t *testing.T, form func(lockKind) bool, f func(t *testing.T, k lockKind)) {
	for _, k := range kinds {
		if form(k) {
			t.Run(k.name, func(t *testing.T) { f(t, k) })
		}
	}
}

// eachKind runs f as a subtest per kind and mode.
func eachKind(t *testing.T, f func(t *testing.T, k lockKind)) { each(t, allKinds, f) }

// eachMutexKind runs f as a subtest per Mutex kind (plain and fair): the Mutex's behaviour tests
// run for both.
func eachMutexKind(t *testing.T, f func(t *testing.T, newMutex mutexMaker)) {
	each(t, mutexKinds, func(t *testing.T, k lockKind) { f(t, k.mutex) })
}

// eachMutexKindAndStrategy runs f as a subtest per Mutex kind and wait strategy.
func eachMutexKindAndStrategy(t *testing.T, f func(t *testing.T, newMutex mutexMaker, wait rlock.WaitStrategy)) {
	eachMutexKind(t, func(t *testing.T, newMutex mutexMaker) {
		eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) { f(t, newMutex, wait) })
	})
}

// lockOps is a lock of one kind on one client, held in the kind's mode.
type lockOps struct {
	lock    func(ctx context.Context) (context.Context, error) // Lock, RLock, or Acquire of semUnit
	try     func(ctx context.Context, wait time.Duration) (context.Context, error)
	release func(ctx context.Context) error
	// lockOne is lock, but a semaphore's takes 1 permit: a second hold of it fits.
	lockOne func(ctx context.Context) (context.Context, error)
	force   func(ctx context.Context) (bool, error) // ForceUnlock, ForceRelease
	state   func(ctx context.Context) (rlock.State, error)
	token   func(ctx context.Context) (int64, bool) // (0, false) for a semaphore
	// count returns what Redis counts for the owner of context h: its holds in this mode, or the
	// semaphore's permits in use.
	count func(h context.Context) (int64, error)
	// conflict is a Try by a new owner that a hold of this row keeps out (an RWMutex's: Lock),
	// and conflictRelease its release.
	conflict        func(wait time.Duration) (context.Context, error)
	conflictRelease func(ctx context.Context) error
}

// on returns the lock of kind k called name on c, with opts.
func (k lockKind) on(c *rlock.Client, name string, opts ...rlock.MutexOption) lockOps {
	fresh := func() context.Context { return rlock.WithOwner(bg, rlock.NewOwnerID()) }
	ownerOf := func(h context.Context) (context.Context, error) {
		owner, ok := rlock.Owner(h)
		if !ok {
			return nil, errors.New("the context carries no owner")
		}
		return rlock.WithOwner(bg, owner), nil
	}
	switch {
	case k.mutex != nil:
		m := k.mutex(c, name, opts...)
		return lockOps{lock: m.Lock, try: m.TryLock, release: m.Unlock, lockOne: m.Lock, force: m.ForceUnlock,
			state: m.State, token: m.Token,
			count: func(h context.Context) (int64, error) {
				o, err := ownerOf(h)
				if err != nil {
					return 0, err
				}
				n, err := m.HoldCount(o)
				return int64(n), err
			},
			conflict:        func(wait time.Duration) (context.Context, error) { return m.TryLock(fresh(), wait) },
			conflictRelease: m.Unlock}
	case k.rw != nil:
		rw := k.rw(c, name, opts...)
		ops := lockOps{lock: rw.Lock, try: rw.TryLock, release: rw.Unlock, force: rw.ForceUnlock, state: rw.State,
			token:           rw.Token,
			conflict:        func(wait time.Duration) (context.Context, error) { return rw.TryLock(fresh(), wait) },
			conflictRelease: rw.Unlock}
		if k.read {
			ops.lock, ops.try, ops.release = rw.RLock, rw.TryRLock, rw.RUnlock
		}
		ops.lockOne = ops.lock
		ops.count = func(h context.Context) (int64, error) {
			o, err := ownerOf(h)
			if err != nil {
				return 0, err
			}
			r, w, err := rw.HoldCount(o)
			if k.read {
				return int64(r), err
			}
			return int64(w), err
		}
		return ops
	}
	s := c.NewSemaphore(name, semPermits, opts...)
	return lockOps{
		lock: func(ctx context.Context) (context.Context, error) { return s.Acquire(ctx, semUnit) },
		try: func(ctx context.Context, wait time.Duration) (context.Context, error) {
			return s.TryAcquire(ctx, semUnit, wait)
		},
		release: s.Release,
		lockOne: func(ctx context.Context) (context.Context, error) { return s.Acquire(ctx, 1) },
		force:   s.ForceRelease, state: s.State,
		token: func(context.Context) (int64, bool) { return 0, false },
		count: func(context.Context) (int64, error) {
			free, err := s.Available(bg)
			return semPermits - free, err
		},
		conflict: func(wait time.Duration) (context.Context, error) {
			return s.TryAcquire(bg, semPermits-semUnit+1, wait)
		},
		conflictRelease: s.Release,
	}
}

// acquireResult is what a call that may wait returned, and when.
type acquireResult struct {
	h   context.Context
	err error
	at  time.Time
}

// goAcquire runs f in a new goroutine; its outcome arrives on the returned channel.
func goAcquire(f func() (context.Context, error)) <-chan acquireResult {
	ch := make(chan acquireResult, 1)
	go func() {
		h, err := f()
		ch <- acquireResult{h, err, time.Now()}
	}()
	return ch
}

// awaitResult requires an outcome on ch within d.
func awaitResult(t *testing.T, ch <-chan acquireResult, d time.Duration, what string) acquireResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("%s: still waiting after %v", what, d)
		return acquireResult{}
	}
}

// requireGranted requires ch to deliver a hold within d and returns its hold context.
func requireGranted(t *testing.T, ch <-chan acquireResult, d time.Duration, what string) context.Context {
	t.Helper()
	r := awaitResult(t, ch, d, what)
	require.NoError(t, r.err, what)
	return r.h
}

// requireNone requires none of chans to deliver anything within d: those calls still wait.
func requireNone(t *testing.T, d time.Duration, what string, chans ...<-chan acquireResult) {
	t.Helper()
	time.Sleep(d)
	for i, ch := range chans {
		select {
		case r := <-ch:
			t.Fatalf("%s: call %d returned while it should wait (err %v)", what, i, r.err)
		default:
		}
	}
}

// expired requires the deadline of ctx (a hold context with a fixed lease) to have passed, and
// waits for ctx to end: the library guarantees the deadline, but its timer fires when the
// scheduler gets to it, which under load can be after another owner got the lock.
func expired(t *testing.T, ctx context.Context) {
	t.Helper()
	dl, ok := ctx.Deadline()
	require.True(t, ok, "the context has a deadline")
	require.False(t, dl.After(time.Now()), "its deadline has passed")
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
		t.Fatal("the context did not end within 1s of its deadline")
	}
}

// causeOf waits up to d for ctx to end and returns its cause, or nil if it did not end.
func causeOf(ctx context.Context, d time.Duration) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(d):
		return nil
	}
}
