package rlock_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/stretchr/testify/require"
)

// Measurements of restarts and failovers for the notes, not run by make test: set
// RLOCK_RESTART_TRIALS=N (and RLOCK_RESTART_GRACE, a duration, for Options.RestartGrace). Each
// trial: a holder (default options: 30s watchdog lease) holds a Mutex, a contender on another
// client waits for it (pub/sub), and the lock's server is disrupted. Reported per trial and in
// sum: when the server answered again (0), when the contender got the lock, when the holder's
// context ended (notice), and the two-holder window (the holder's context still live while the
// contender held the lock). Run:
//
//	RLOCK_RESTART_TRIALS=10 scripts/with-redis.sh go test -count=1 -v -run 'TestRestart_measure' .
//	RLOCK_RESTART_TRIALS=10 RLOCK_RESTART_GRACE=31s scripts/with-redis.sh go test -count=1 -v -run 'TestRestart_measure' .
//	RLOCK_RESTART_TRIALS=5 scripts/with-cluster.sh go test -count=1 -v -run 'TestRestart_measureCluster' ./internal/failover

// restartTrials is the number of trials of the measurements (0: skip them).
func restartTrials(t *testing.T) (int, time.Duration) {
	n := redistest.Measurement(t, "RLOCK_RESTART_TRIALS")
	grace, _ := time.ParseDuration(os.Getenv("RLOCK_RESTART_GRACE"))
	return n, grace
}

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
	n, grace := restartTrials(t)
	e, kill, start := crashable(t, "measure")
	m := e.Master("measure")
	holder := e.client(graceOptions(rlock.Options{}, grace))
	contender := e.client(graceOptions(rlock.Options{}, grace))
	var rs []restartResult
	for range n {
		rs = append(rs, restartTrial(t, holder, contender, "measure", grace, func() time.Time {
			kill()
			start()
			return answering(t, m, e.LockKey("measure"))
		}))
		e.Dep.WaitSteady(t, 20*time.Second)
	}
	reportRestarts(t, e.Dep.Topology+" restart", grace, rs)
}

// graceOptions returns o with RestartGrace d (a file of its own, so that the measurements can
// run on a version without the option).
func graceOptions(o rlock.Options, d time.Duration) rlock.Options {
	o.RestartGrace = d
	return o
}
