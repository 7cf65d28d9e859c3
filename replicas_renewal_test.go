package rlock_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/stretchr/testify/require"
)

// startReplicated starts a primary and one replica of it, in sync and acknowledging writes,
// and returns an env on the primary and the replica's server.
func startReplicated(t *testing.T) (*env, *redisServer) {
	t.Helper()
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
	return e, replica
}

// TestSyncReplicas_renewal: with Options.SyncReplicas, a renewal counts only once the replicas
// acknowledged it. While the replica is stopped (SIGSTOP) the primary still extends the lease,
// but the holder is told it lost the lock (ErrLockLost) at its local lease end, instead of
// holding on to a lease that a failover would lose. With the replica running, holds live on.
func TestSyncReplicas_renewal(t *testing.T) {
	e, replica := startReplicated(t)
	const lease = time.Second
	c := e.client(rlock.Options{SyncReplicas: 1, SyncTimeout: 100 * time.Millisecond, WatchdogTimeout: lease})
	for _, k := range []struct {
		name string
		lock func(ctx context.Context) (context.Context, error)
	}{
		{"mutex", c.NewMutex("m").Lock},
		{"fair mutex", c.NewFairMutex("f").Lock},
		{"read", c.NewRWMutex("rw").RLock},
		{"semaphore", func(ctx context.Context) (context.Context, error) { return c.NewSemaphore("s", 2).Acquire(ctx, 1) }},
	} {
		t.Run(k.name, func(t *testing.T) {
			e.dirty = true // holds lost on purpose lapse by themselves
			h, err := k.lock(context.Background())
			require.NoError(t, err)
			require.NoError(t, causeOf(h, 2*lease), "renewals acknowledged: the hold lives on")

			require.NoError(t, replica.cmd.Process.Signal(syscall.SIGSTOP))
			stopped := time.Now()
			cause := causeOf(h, 3*lease)
			took := time.Since(stopped)
			require.NoError(t, replica.cmd.Process.Signal(syscall.SIGCONT))
			require.ErrorIs(t, cause, rlock.ErrLockLost, "unacknowledged renewals do not keep the hold")
			require.Less(t, took, lease+300*time.Millisecond, "lost by its local lease end")
			t.Logf("hold lost %v after the replica stopped", took)
		})
	}
}
