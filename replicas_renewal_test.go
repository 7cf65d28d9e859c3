package rlock_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/stretchr/testify/require"
)

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
	for _, k := range []struct {
		name, lock string
		take       func(ctx context.Context) (context.Context, error)
	}{
		{"mutex", "m", c.NewMutex("m").Lock},
		{"fair mutex", "f", c.NewFairMutex("f").Lock},
		{"read", "rw", c.NewRWMutex("rw").RLock},
		{"semaphore", "s", func(ctx context.Context) (context.Context, error) { return c.NewSemaphore("s", 2).Acquire(ctx, 1) }},
	} {
		t.Run(k.name, func(t *testing.T) {
			e.dirty = true // holds lost on purpose lapse by themselves
			h, err := k.take(context.Background())
			require.NoError(t, err)
			require.NoError(t, causeOf(h, 2*lease), "renewals acknowledged: the hold lives on")

			pids := replicaPIDs(k.lock) // asked before they stop
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
}

// TestSyncReplicas_renewalLossGivesBack: a hold that ends because too few replicas acknowledged
// its renewals (the replicas are stopped, SIGSTOP) is given back in Redis too (issue 16, defect
// 5): the primary, which extended its lease, does not keep the name held by nobody until that
// lease runs out.
func TestSyncReplicas_renewalLossGivesBack(t *testing.T) {
	e, replicaPIDs := withReplicas(t)
	const lease = 2 * time.Second
	c := e.client(rlock.Options{SyncReplicas: 1, SyncTimeout: 100 * time.Millisecond, WatchdogTimeout: lease})
	for _, k := range []struct {
		name, lock string
		take       func(ctx context.Context) (context.Context, error)
	}{
		{"mutex", "m", c.NewMutex("m").Lock},
		{"fair mutex", "f", c.NewFairMutex("f").Lock},
		{"read", "rw", c.NewRWMutex("rw").RLock},
		{"semaphore", "s", func(ctx context.Context) (context.Context, error) { return c.NewSemaphore("s", 2).Acquire(ctx, 1) }},
	} {
		t.Run(k.name, func(t *testing.T) {
			h, err := k.take(context.Background())
			require.NoError(t, err)
			pids := replicaPIDs(k.lock) // asked before they stop
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
				n, err := e.do("EXISTS", e.lockKey(k.lock)).AsInt64()
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
}
