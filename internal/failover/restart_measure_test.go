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

// Measurements of restarts and failovers for the notes, not run by make test: set
// RLOCK_RESTART_TRIALS=N (and RLOCK_RESTART_GRACE, a duration, for Options.RestartGrace). Each
// trial of TestRestart_measure: a holder (default options: 30s watchdog lease) holds a Mutex, a
// contender on another client waits for it (pub/sub), and the lock's server is disrupted.
// Reported per trial and in sum: when the server answered again (0), when the contender got the
// lock, when the holder's context ended (notice), and the two-holder window (the holder's
// context still live while the contender held the lock). Run:
//
//	RLOCK_RESTART_TRIALS=10 scripts/with-redis.sh go test -count=1 -v -run 'TestRestart_measure$' ./internal/failover
//	RLOCK_RESTART_TRIALS=10 RLOCK_RESTART_GRACE=31s scripts/with-redis.sh go test -count=1 -v -run 'TestRestart_measure$' ./internal/failover
//	RLOCK_RESTART_TRIALS=5 scripts/with-cluster.sh go test -count=1 -v -run 'TestRestart_measureCluster' ./internal/failover

// restartResult is one trial's figures, from when the server answered again.
type restartResult struct {
	grant, notice, overlap time.Duration
}

// restartTrial holds name with holder, has contender wait for it, runs disrupt (which returns
// when the lock's server answered again) and measures.
func restartTrial(t *testing.T, holder, contender *rlock.Client, name string, grace time.Duration, disrupt func() time.Time) restartResult {
	hm, cm := holder.NewMutex(name), contender.NewMutex(name)
	lockCtx, cancel := context.WithTimeout(bg, grace+30*time.Second)
	defer cancel()
	h, err := hm.Lock(lockCtx)
	require.NoError(t, err)
	w := redistest.WatchCtx(h)
	type got struct {
		h   context.Context
		at  time.Time
		err error
	}
	granted := make(chan got, 1)
	go func() {
		ctx, cancel := context.WithTimeout(bg, grace+60*time.Second)
		defer cancel()
		ch, err := cm.Lock(ctx)
		for err != nil && ctx.Err() == nil { // CLUSTERDOWN while a cluster node comes back
			time.Sleep(10 * time.Millisecond)
			ch, err = cm.Lock(ctx)
		}
		granted <- got{ch, time.Now(), err}
	}()
	time.Sleep(200 * time.Millisecond) // the contender waits
	back := disrupt()
	g := <-granted
	require.NoError(t, g.err)
	var ended time.Time
	select {
	case <-w.Done:
		ended = w.At
	case <-time.After(60 * time.Second):
		t.Fatal("the holder's context did not end within 60s")
	}
	_ = hm.Unlock(h)
	require.NoError(t, cm.Unlock(g.h))
	r := restartResult{grant: g.at.Sub(back), notice: ended.Sub(back)}
	if ended.After(g.at) {
		r.overlap = ended.Sub(g.at)
	}
	return r
}

// reportRestarts logs the trials' figures.
func reportRestarts(t *testing.T, what string, grace time.Duration, rs []restartResult) {
	var grant, notice, overlap []time.Duration
	for i, r := range rs {
		t.Logf("%s trial %d: first grant %v, notice %v, two holders %v", what, i, redistest.Ms(r.grant), redistest.Ms(r.notice), redistest.Ms(r.overlap))
		grant, notice, overlap = append(grant, r.grant), append(notice, r.notice), append(overlap, r.overlap)
	}
	t.Logf("%s, RestartGrace %v, from the server answering again: first grant: %s; notice: %s; two-holder window: %s",
		what, grace, redistest.DurationStats(grant), redistest.DurationStats(notice), redistest.DurationStats(overlap))
}

// TestRestart_measure kills (kill -9) the lock's server and starts it again without its data
// (on a cluster or Sentinel: the lock's master, before a failover), N times.
func TestRestart_measure(t *testing.T) {
	n := redistest.Measurement(t, "RLOCK_RESTART_TRIALS")
	grace, _ := time.ParseDuration(os.Getenv("RLOCK_RESTART_GRACE"))
	e, kill, start := redistest.Crashable(t, "measure")
	m := e.Master("measure")
	client := func() *rlock.Client {
		c, err := rlock.New(e.Rueidis(), rlock.Options{KeyPrefix: e.Prefix, RestartGrace: grace})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, c.Close()) })
		return c
	}
	holder, contender := client(), client()
	var rs []restartResult
	for range n {
		rs = append(rs, restartTrial(t, holder, contender, "measure", grace, func() time.Time {
			kill()
			start()
			return m.Answering(t, e.LockKey("measure"))
		}))
		e.Dep.WaitSteady(t, 20*time.Second)
	}
	reportRestarts(t, e.Dep.Topology+" restart", grace, rs)
}

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
