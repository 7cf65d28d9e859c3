package rlock_test

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/stretchr/testify/require"
)

// TestSyncReplicas: with Options.SyncReplicas a new hold of every kind counts only once that
// many replicas acknowledged it. A replica that cannot acknowledge (stopped with SIGSTOP), or
// too few replicas, give ErrNotReplicated, and the hold is given back: nothing is held, no key
// is left. Re-entries are not waited for.
func TestSyncReplicas(t *testing.T) {
	primary, err := startRedis("")
	require.NoError(t, err)
	t.Cleanup(primary.stop)
	replica, err := startRedis("")
	require.NoError(t, err)
	t.Cleanup(replica.stop)
	e := newEnvAt(t, primary.addr)
	rrc := newRueidis(t, replica.addr)
	ctx := context.Background()
	require.NoError(t, e.do("CONFIG", "SET", "repl-diskless-sync-delay", "0").Error())
	require.NoError(t, rrc.Do(ctx, rrc.B().Replicaof().Host("127.0.0.1").Port(mustAtoi(t, primary.port)).Build()).Error())
	require.Eventually(t, func() bool {
		info, err := e.admin.Do(ctx, e.admin.B().Info().Section("replication").Build()).ToString()
		return err == nil && strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online")
	}, 10*time.Second, 10*time.Millisecond, "the replica did not sync")
	require.Eventually(t, func() bool { // online, and loaded: it acknowledges writes
		r := e.admin.DoMulti(ctx, e.admin.B().Set().Key(e.prefix+"-probe").Value("1").Build(),
			e.admin.B().Wait().Numreplicas(1).Timeout(100).Build())
		n, err := r[1].AsInt64()
		return err == nil && n == 1
	}, 10*time.Second, 10*time.Millisecond, "the replica does not acknowledge writes")
	require.NoError(t, e.do("DEL", e.prefix+"-probe").Error())

	one := e.client(rlock.Options{SyncReplicas: 1, SyncTimeout: 200 * time.Millisecond})
	two := e.client(rlock.Options{SyncReplicas: 2, SyncTimeout: 50 * time.Millisecond})

	type kind struct {
		name    string
		acquire func(c *rlock.Client, ctx context.Context) (context.Context, error)
		release func(c *rlock.Client, held context.Context) error
	}
	kinds := []kind{
		{"mutex", func(c *rlock.Client, ctx context.Context) (context.Context, error) { return c.NewMutex("m").Lock(ctx) },
			func(c *rlock.Client, h context.Context) error { return c.NewMutex("m").Unlock(h) }},
		{"fair mutex", func(c *rlock.Client, ctx context.Context) (context.Context, error) {
			return c.NewFairMutex("f").TryLock(ctx, 0)
		}, func(c *rlock.Client, h context.Context) error { return c.NewFairMutex("f").Unlock(h) }},
		{"read", func(c *rlock.Client, ctx context.Context) (context.Context, error) {
			return c.NewRWMutex("rw").RLock(ctx)
		},
			func(c *rlock.Client, h context.Context) error { return c.NewRWMutex("rw").RUnlock(h) }},
		{"semaphore", func(c *rlock.Client, ctx context.Context) (context.Context, error) {
			return c.NewSemaphore("s", 2).Acquire(ctx, 1)
		}, func(c *rlock.Client, h context.Context) error { return c.NewSemaphore("s", 2).Release(h) }},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			h, err := k.acquire(one, ctx)
			require.NoError(t, err, "one replica, in sync")
			if k.name != "semaphore" {
				inner, err := k.acquire(one, h)
				require.NoError(t, err, "re-entry")
				require.NoError(t, k.release(one, inner))
			}
			require.NoError(t, k.release(one, h))

			_, err = k.acquire(two, ctx)
			require.ErrorIs(t, err, rlock.ErrNotReplicated, "two replicas asked, one exists")
			require.Empty(t, e.keys(), "the hold was given back")

			require.NoError(t, replica.cmd.Process.Signal(syscall.SIGSTOP))
			start := time.Now()
			_, err = k.acquire(one, ctx)
			took := time.Since(start)
			require.NoError(t, replica.cmd.Process.Signal(syscall.SIGCONT))
			require.ErrorIs(t, err, rlock.ErrNotReplicated, "the replica is stopped")
			require.GreaterOrEqual(t, took, 200*time.Millisecond, "waited SyncTimeout")
			require.Empty(t, e.keys(), "the hold was given back")
		})
	}
	_, err = rlock.New(e.admin, rlock.Options{SyncReplicas: -1})
	require.ErrorIs(t, err, rlock.ErrInvalid)
	_, err = rlock.New(e.admin, rlock.Options{SyncTimeout: -time.Second})
	require.ErrorIs(t, err, rlock.ErrInvalid)
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return n
}
