package failover_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
)

// TestFailover_clusterKillAfterHold (issue 23, defect 5): the lock's master is killed (kill -9)
// within milliseconds of a hold, by a client that had no hold before (so none of its watchers
// had reached the master), and its replica, which lacks the hold (stopped, its link cut), takes
// over (CLUSTER FAILOVER TAKEOVER). Every hold context must end with ErrLockLost within 1s of
// the new master answering its client (whose slot map rueidis refreshes within a second of an
// error, at a random moment): the old master's watcher never reached it, and the new master's
// watcher connects to a node that was a replica all along. A plain and a fair Mutex, with the
// watchdog (30s lease: a renewal would come 10s later) and a fixed 30s lease, each on a client
// of its own; another client then takes each lock, and how long two held it is reported.
func TestFailover_clusterKillAfterHold(t *testing.T) {
	f := foClusterFromEnv(t)
	redistest.WaitHealthy(t, "the cluster", 40*time.Second, f.unhealthy)
	prefix := foPrefix()
	m, r := f.shard(t, prefix+":{after0}")
	type hold struct {
		what, name string
		new        mutexMaker
		opts       []rlock.MutexOption
		rc         rueidis.Client
		c          *rlock.Client
		h          context.Context
		w          *redistest.CtxWatch
		back       time.Time // when rc sent the lock's commands to the new master
	}
	var holds []*hold
	i := 0
	for _, lease := range []string{"watchdog", "fixed"} {
		var opts []rlock.MutexOption
		if lease == "fixed" {
			opts = append(opts, rlock.WithLease(30*time.Second))
		}
		for _, k := range []struct {
			name string
			new  mutexMaker
		}{{"plain", (*rlock.Client).NewMutex}, {"fair", (*rlock.Client).NewFairMutex}} {
			// Lock names on m.
			name := ""
			for ; name == ""; i++ {
				if n := fmt.Sprintf("after%d", i); f.ownerOf(t, prefix+":{"+n+"}") == m.Addr {
					name = n
				}
			}
			holds = append(holds, &hold{what: lease + "/" + k.name, name: name, new: k.new, opts: opts})
		}
	}
	newClient := func() (*rlock.Client, rueidis.Client) {
		rc := f.Client(t)
		c, err := rlock.New(rc, rlock.Options{KeyPrefix: prefix})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, c.Close()) })
		return c, rc
	}
	for _, h := range holds {
		h.c, h.rc = newClient()
		// The client's connection to m is made before the hold, not its watchers'.
		_, err := h.new(h.c, h.name).IsLocked(bg)
		require.NoError(t, err)
	}
	other, _ := newClient()

	// The replica stops, and the master drops its link: the holds will not reach it.
	takeover := takeoverWithout(t, m, r)

	errs := make(chan error, len(holds))
	for _, h := range holds {
		go func() {
			var err error
			h.h, err = h.new(h.c, h.name, h.opts...).Lock(bg)
			if err == nil {
				h.w = redistest.WatchCtx(h.h)
			}
			errs <- err
		}()
	}
	for range holds {
		require.NoError(t, <-errs)
	}
	killedAt := takeover()
	// When the new master answers for the locks' slot, and when each holder's client sends
	// their commands there.
	var answered time.Time
	require.Eventually(t, func() bool {
		now := time.Now()
		if answered.IsZero() && foRole(r) == "master" && foDo(r, "EXISTS", prefix+":{"+holds[0].name+"}").Error() == nil {
			answered = now
		}
		done := !answered.IsZero()
		for _, h := range holds {
			if h.back.IsZero() && foRoutesTo(h.rc, prefix+":{"+h.name+"}") == r.Addr {
				h.back = now
			}
			done = done && !h.back.IsZero()
		}
		return done
	}, 10*time.Second, 5*time.Millisecond, "%s did not take over, or a client did not follow", r.Addr)
	t.Logf("killed %s; %s answered as the master %v later", m.Addr, r.Addr, redistest.Ms(answered.Sub(killedAt)))

	for _, h := range holds {
		select {
		case <-h.w.Done:
			ended := h.w.At.Sub(h.back) // (negative: before the poll saw the client follow)
			assert.ErrorIs(t, context.Cause(h.h), rlock.ErrLockLost, h.what)
			t.Logf("%s: its client followed %v after the new master answered; the hold context ended %v after that",
				h.what, redistest.Ms(h.back.Sub(answered)), redistest.Ms(ended))
			assert.LessOrEqual(t, ended, time.Second, "%s: the hold context ended %v after its client reached the new master", h.what, ended)
		case <-time.After(max(3*time.Second-time.Since(h.back), 0)):
			t.Errorf("%s: the hold context did not end within 3s of its client reaching the new master", h.what)
		}
	}
	for _, h := range holds {
		// Another client takes the lock (the new master has no holder).
		var oh context.Context
		var err error
		require.Eventually(t, func() bool {
			ctx, cancel := context.WithTimeout(bg, 2*time.Second)
			defer cancel()
			oh, err = h.new(other, h.name).TryLock(ctx, 0)
			return err == nil
		}, 10*time.Second, 10*time.Millisecond, "%s: another client could not take the lock: %v", h.what, err)
		require.NoError(t, h.new(other, h.name).Unlock(oh))
		if err := h.new(h.c, h.name).Unlock(h.h); err != nil {
			require.ErrorIs(t, err, rlock.ErrLockLost, h.what)
		}
	}
	f.restart(t, m.Addr)
	redistest.WaitHealthy(t, "the cluster", 40*time.Second, f.unhealthy)
	require.Eventually(t, func() bool {
		_, total, _ := f.LeftChannels(t, prefix)
		return total == 0
	}, 5*time.Second, 20*time.Millisecond, "channels left")
}

// takeoverWithout readies a takeover of master m by its replica r that misses what m is sent
// from now on: r stops (SIGSTOP), m drops its replica link, and CLUSTER FAILOVER TAKEOVER waits
// in r's socket, the first thing r does when it runs. The function it returns kills m
// (SIGKILL), resumes r, waits for the takeover's OK, and returns when m was killed.
func takeoverWithout(t *testing.T, m, r node) func() time.Time {
	mpid, rpid := m.PID(t), r.PID(t)
	foSignal(t, rpid, syscall.SIGSTOP)
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = syscall.Kill(rpid, syscall.SIGCONT)
		}
	})
	killed, err := foDo(m, "CLIENT", "KILL", "TYPE", "replica").AsInt64()
	require.NoError(t, err)
	require.EqualValues(t, 1, killed, "replica links killed on %s", m.Addr)
	raw, err := foDial(r.Addr)
	require.NoError(t, err)
	t.Cleanup(func() { raw.c.Close() })
	require.NoError(t, raw.send("CLUSTER", "FAILOVER", "TAKEOVER"))
	return func() time.Time {
		foSignal(t, mpid, syscall.SIGKILL)
		killedAt := time.Now()
		foSignal(t, rpid, syscall.SIGCONT)
		resumed = true
		_ = raw.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		reply, err := raw.read()
		require.NoError(t, err)
		require.Equal(t, "OK", reply, "CLUSTER FAILOVER TAKEOVER on %s", r.Addr)
		return killedAt
	}
}
