package rlock_test

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
)

// TestSyncReplicas: with Options.SyncReplicas a new hold of every kind counts only once that
// many replicas acknowledged it. Replicas that cannot acknowledge (stopped with SIGSTOP), or
// too few replicas, give ErrNotReplicated, and the hold is given back: nothing is held, no key
// is left. Re-entries are not waited for. Standalone, the test makes a primary and a replica of
// its own; on a cluster or Sentinel it uses the replicas of each lock's master.
func TestSyncReplicas(t *testing.T) {
	e, replicaPIDs := withReplicas(t)
	ctx := context.Background()
	// acquire takes a new hold of k called k.name on c (a single attempt for the fair kinds).
	acquire := func(k lockKind, c *rlock.Client, ctx context.Context) (context.Context, error) {
		if k.fair {
			return k.on(c, k.name).try(ctx, 0)
		}
		return k.on(c, k.name).lock(ctx)
	}
	clients := map[int]*rlock.Client{}
	client := func(replicas int, timeout time.Duration) *rlock.Client {
		if clients[replicas] == nil {
			clients[replicas] = e.client(rlock.Options{SyncReplicas: replicas, SyncTimeout: timeout})
		}
		return clients[replicas]
	}
	eachKind(t, func(t *testing.T, k lockKind) {
		pids := replicaPIDs(k.name)
		require.NotEmpty(t, pids)
		all := client(len(pids), 200*time.Millisecond)
		h, err := acquire(k, all, ctx)
		require.NoError(t, err, "%d replicas, in sync", len(pids))
		if !k.semaphore() {
			inner, err := acquire(k, all, h)
			require.NoError(t, err, "re-entry")
			require.NoError(t, k.on(all, k.name).release(inner))
		}
		require.NoError(t, k.on(all, k.name).release(h))

		_, err = acquire(k, client(len(pids)+1, 50*time.Millisecond), ctx)
		require.ErrorIs(t, err, rlock.ErrNotReplicated, "%d replicas asked, %d exist", len(pids)+1, len(pids))
		require.Empty(t, e.Keys(), "the hold was given back")

		for _, pid := range pids {
			require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
		}
		start := time.Now()
		_, err = acquire(k, all, ctx)
		took := time.Since(start)
		for _, pid := range pids {
			require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
		}
		require.ErrorIs(t, err, rlock.ErrNotReplicated, "the replicas are stopped")
		require.GreaterOrEqual(t, took, 200*time.Millisecond, "waited SyncTimeout")
		require.Empty(t, e.Keys(), "the hold was given back")
	})
	_, err := rlock.New(e.Admin(), rlock.Options{SyncReplicas: -1})
	require.ErrorIs(t, err, rlock.ErrInvalid)
	_, err = rlock.New(e.Admin(), rlock.Options{SyncTimeout: -time.Second})
	require.ErrorIs(t, err, rlock.ErrInvalid)
}

// ownReplica starts a primary and a replica of it, both the test's own, and returns an env on
// the primary and the replica's PID.
// withReplicas returns an env whose locks' masters have replicas, and the PIDs of the replicas
// of the lock called name: standalone, a primary and a replica of the test's own (ownReplica);
// on a cluster or Sentinel, the replicas of each lock's master (the test stops them: it needs
// a throwaway deployment).
func withReplicas(t *testing.T) (*env, func(name string) []int) {
	redistest.NeedsRedis(t)
	if redistest.Suite().Topology == "standalone" {
		return ownReplica(t)
	}
	redistest.NeedsThrowaway(t)
	e := newEnv(t)
	return e, func(name string) []int {
		var pids []int
		for _, r := range e.ReplicasOf(e.Master(name)) {
			pids = append(pids, r.PID(t))
		}
		return pids
	}
}

func ownReplica(t *testing.T) (*env, func(string) []int) {
	redistest.NeedsRedis(t)
	primary, err := redistest.StartServer(redistest.ServerOptions{})
	require.NoError(t, err)
	t.Cleanup(primary.Stop)
	replica, err := redistest.StartServer(redistest.ServerOptions{})
	require.NoError(t, err)
	t.Cleanup(replica.Stop)
	e := newEnvAt(t, primary.Addr)
	rrc := redistest.NewRueidis(t, replica.Addr)
	ctx := context.Background()
	admin := e.Admin()
	require.NoError(t, e.Do("CONFIG", "SET", "repl-diskless-sync-delay", "0").Error())
	require.NoError(t, rrc.Do(ctx, rrc.B().Replicaof().Host("127.0.0.1").Port(mustAtoi(t, primary.Port)).Build()).Error())
	require.Eventually(t, func() bool {
		info, err := admin.Do(ctx, admin.B().Info().Section("replication").Build()).ToString()
		return err == nil && strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online")
	}, 10*time.Second, 10*time.Millisecond, "the replica did not sync")
	require.Eventually(t, func() bool { // online, and loaded: it acknowledges writes
		r := admin.DoMulti(ctx, admin.B().Set().Key(e.Prefix+"-probe").Value("1").Build(),
			admin.B().Wait().Numreplicas(1).Timeout(100).Build())
		n, err := r[1].AsInt64()
		return err == nil && n == 1
	}, 10*time.Second, 10*time.Millisecond, "the replica does not acknowledge writes")
	require.NoError(t, e.Do("DEL", e.Prefix+"-probe").Error())
	return e, func(string) []int { return []int{replica.PID()} }
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return n
}

// TestSyncReplicas_renewal: with Options.SyncReplicas, a renewal counts only once the replicas
// acknowledged it. While the lock's replicas are stopped (SIGSTOP) the primary still extends
// the lease, but the holder is told it lost the lock (ErrLockLost) at its local lease end,
// instead of holding on to a lease that a failover would lose. With the replicas running,
// holds live on. Standalone it makes a primary and a replica of its own, as TestSyncReplicas.
func TestSyncReplicas_renewal(t *testing.T) {
	e, replicaPIDs := withReplicas(t)
	signal := func(pids []int, sig syscall.Signal) {
		for _, pid := range pids {
			require.NoError(t, syscall.Kill(pid, sig))
		}
	}
	const lease = time.Second
	c := e.client(rlock.Options{SyncReplicas: 1, SyncTimeout: 100 * time.Millisecond, WatchdogTimeout: lease})
	eachKind(t, func(t *testing.T, k lockKind) {
		e.Dirty = true // holds lost on purpose lapse by themselves
		h, err := k.on(c, k.name).lock(context.Background())
		require.NoError(t, err)
		require.NoError(t, causeOf(h, 2*lease), "renewals acknowledged: the hold lives on")

		pids := replicaPIDs(k.name) // asked before they stop
		signal(pids, syscall.SIGSTOP)
		stopped := time.Now()
		cause := causeOf(h, 3*lease)
		took := time.Since(stopped)
		signal(pids, syscall.SIGCONT)
		require.ErrorIs(t, cause, rlock.ErrLockLost, "unacknowledged renewals do not keep the hold")
		require.Less(t, took, lease+300*time.Millisecond, "lost by its local lease end")
		t.Logf("hold lost %v after the replicas stopped", took)
	})
}

// TestSyncReplicas_renewalLossGivesBack: a hold that ends because too few replicas acknowledged
// its renewals (the replicas are stopped, SIGSTOP) is given back in Redis too (issue 16, defect
// 5): the primary, which extended its lease, does not keep the name held by nobody until that
// lease runs out.
func TestSyncReplicas_renewalLossGivesBack(t *testing.T) {
	e, replicaPIDs := withReplicas(t)
	const lease = 2 * time.Second
	c := e.client(rlock.Options{SyncReplicas: 1, SyncTimeout: 100 * time.Millisecond, WatchdogTimeout: lease})
	eachKind(t, func(t *testing.T, k lockKind) {
		h, err := k.on(c, k.name).lock(context.Background())
		require.NoError(t, err)
		pids := replicaPIDs(k.name) // asked before they stop
		for _, pid := range pids {
			require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
		}
		defer func() {
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGCONT)
			}
		}()
		require.ErrorIs(t, causeOf(h, 2*lease), rlock.ErrLockLost, "unacknowledged renewals do not keep the hold")
		lost := time.Now()
		gone := func() bool {
			n, err := e.Do("EXISTS", e.LockKey(k.name)).AsInt64()
			require.NoError(t, err)
			return n == 0
		}
		// The primary's lease, extended by the last unacknowledged renewal, would end at
		// least 2/3 of the lease after the loss.
		for !gone() && time.Since(lost) < lease/2 {
			time.Sleep(5 * time.Millisecond)
		}
		took := time.Since(lost)
		require.True(t, gone(), "the lost hold is still held in Redis %v after it ended here", took)
		t.Logf("given back %v after the hold ended", took)
	})
}
