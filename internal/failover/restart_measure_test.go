package failover_test

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/stretchr/testify/require"
)

// A measurement of failovers for the notes, not run by make test: set RLOCK_RESTART_TRIALS=N
// (and RLOCK_RESTART_GRACE, a duration, for Options.RestartGrace); restart_measure_test.go in
// the repository's root has the measurements of restarts. Run:
//
//	RLOCK_RESTART_TRIALS=5 scripts/with-cluster.sh go test -count=1 -v -run 'TestRestart_measureCluster' ./internal/failover

// TestRestart_measureCluster fails the lock's master over to its in-sync replica, N times each:
// CLUSTER FAILOVER on the replica (graceful) and kill -9 of the master (the cluster promotes the
// replica after cluster-node-timeout; the old master is started again). The replica has the
// hold, so it must survive: the holder (a 10s watchdog lease) must still hold 4s after the
// replica took over, with the contender still waiting; then it releases and the contender
// gets the lock.
func TestRestart_measureCluster(t *testing.T) {
	n := redistest.Measurement(t, "RLOCK_RESTART_TRIALS")
	grace, _ := time.ParseDuration(os.Getenv("RLOCK_RESTART_GRACE"))
	f := foClusterFromEnv(t)
	for _, how := range []string{"graceful", "kill"} {
		var took []time.Duration
		for range n {
			redistest.WaitHealthy(t, "the cluster", 40*time.Second, f.unhealthy)
			prefix := foPrefix()
			opts := rlock.Options{KeyPrefix: prefix, WatchdogTimeout: 10 * time.Second, RestartGrace: grace}
			holder, err := rlock.New(f.Client(t), opts)
			require.NoError(t, err)
			contender, err := rlock.New(f.Client(t), opts)
			require.NoError(t, err)
			m, r := f.shard(t, prefix+":{measure}")
			hm, cm := holder.NewMutex("measure"), contender.NewMutex("measure")
			h, err := hm.Lock(bg)
			require.NoError(t, err)
			granted := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(bg, 60*time.Second)
				defer cancel()
				ch, err := cm.Lock(ctx)
				if err == nil {
					err = cm.Unlock(ch)
				}
				granted <- err
			}()
			foWaitInSync(t, m, r)
			start := time.Now()
			switch how {
			case "graceful":
				require.NoError(t, foDo(r, "CLUSTER", "FAILOVER").Error())
			case "kill":
				foSignal(t, m.PID(t), syscall.SIGKILL)
			}
			require.Eventually(t, func() bool { return foRole(r) == "master" }, 30*time.Second, 5*time.Millisecond)
			took = append(took, time.Since(start))
			time.Sleep(4 * time.Second) // more than a renewal period
			require.NoError(t, h.Err(), "%s: the hold did not survive a failover to its in-sync replica", how)
			select {
			case err := <-granted:
				t.Fatalf("%s: the contender got the lock while the holder held it (%v)", how, err)
			default:
			}
			require.NoError(t, hm.Unlock(h))
			require.NoError(t, <-granted)
			require.NoError(t, holder.Close())
			require.NoError(t, contender.Close())
			if how == "kill" {
				f.restart(t, m.Addr)
			}
		}
		t.Logf("cluster %s: the hold survived %d of %d failovers; promotion took %s", how, n, n, redistest.DurationStats(took))
	}
}
