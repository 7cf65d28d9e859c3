package rlock_test

// The root package's harness: TestMain (redistest.Main) and env, a redistest.Env whose clients
// are rlock clients; the servers, deployments, fault proxy and child processes are in
// internal/redistest.

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/internal/wire"
)

func TestMain(m *testing.M) { redistest.Main(m, runHelper) }

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

// kinds are the two mutex constructors; the plain mutex's behaviour tests run for both.
var kinds = []struct {
	name string
	new  mutexMaker
}{
	{"plain", (*rlock.Client).NewMutex},
	{"fair", (*rlock.Client).NewFairMutex},
}

// eachKind runs f as a subtest per mutex kind.
func eachKind(t *testing.T, f func(t *testing.T, newMutex mutexMaker)) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) { f(t, k.new) })
	}
}

// eachKindAndStrategy runs f as a subtest per mutex kind and wait strategy.
func eachKindAndStrategy(t *testing.T, f func(t *testing.T, newMutex mutexMaker, wait rlock.WaitStrategy)) {
	eachKind(t, func(t *testing.T, newMutex mutexMaker) {
		eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) { f(t, newMutex, wait) })
	})
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
