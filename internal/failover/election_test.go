package failover_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
)

// TestFailover_clusterElection: an election's master is killed (kill -9) right after a term
// began, and its replica, which lacks the term (stopped, its link cut), takes over (CLUSTER
// FAILOVER TAKEOVER): the new master has neither the term nor the fencing counter. The
// leader's term context ends with ErrLockLost within 1s of its client reaching the new master;
// a candidate of another client then leads with a larger term (the clock floor); an observer
// of a third client, through the failover, delivers the new leader, and no term on its
// channel goes backwards.
func TestFailover_clusterElection(t *testing.T) {
	f := foClusterFromEnv(t)
	redistest.WaitHealthy(t, "the cluster", 40*time.Second, f.unhealthy)
	prefix := foPrefix()
	m, r := f.shard(t, prefix+":{el0}")
	name := ""
	for i := 0; name == ""; i++ {
		if n := fmt.Sprintf("el%d", i); f.ownerOf(t, prefix+":{"+n+"}") == m.Addr {
			name = n
		}
	}
	key := prefix + ":{" + name + "}"
	newClient := func() *rlock.Client {
		c, err := rlock.New(f.Client(t), rlock.Options{KeyPrefix: prefix})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, c.Close()) })
		return c
	}
	lc, oc, wc := newClient(), newClient(), newClient()
	probe := f.Client(t)
	leader, other := lc.NewElection(name), oc.NewElection(name)
	ctx, stop := context.WithCancel(bg)
	defer stop()
	seen := wc.NewElection(name).Observe(ctx)
	first := <-seen
	require.Zero(t, first.Term, "nobody leads yet")
	// The leader's client reaches m before the term (its watchers do not).
	_, err := leader.Leader(bg)
	require.NoError(t, err)

	takeover := takeoverWithout(t, m, r)

	term, err := leader.Campaign(bg, "old")
	require.NoError(t, err)
	w := redistest.WatchCtx(term)
	old, _ := leader.Term(term)
	takeover()
	var back time.Time
	require.Eventually(t, func() bool {
		if foRole(r) == "master" && foRoutesTo(probe, key) == r.Addr && back.IsZero() {
			back = time.Now()
		}
		return !back.IsZero()
	}, 10*time.Second, 5*time.Millisecond, "%s did not take over", r.Addr)

	select {
	case <-w.Done:
		assert.ErrorIs(t, context.Cause(term), rlock.ErrLockLost)
		t.Logf("the term context ended %v after a probe client reached the new master (negative: before)",
			redistest.Ms(w.At.Sub(back)))
	case <-time.After(3 * time.Second):
		t.Fatal("the term context did not end within 3s of the new master answering")
	}
	var next context.Context
	require.Eventually(t, func() bool {
		c, cancel := context.WithTimeout(bg, 2*time.Second)
		defer cancel()
		next, err = other.TryCampaign(c, "new", 0)
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "another candidate could not lead: %v", err)
	n, _ := other.Term(next)
	assert.Greater(t, n, old, "the new master's term is above the lost one")
	t.Logf("terms: %d lost, %d on the new master", old, n)

	// The observer delivers the new leader; its terms never went backwards.
	last := first.Term
	timeout := time.After(5 * time.Second)
	for l := first; l.Term != n; {
		select {
		case l = <-seen:
			if l.Term != 0 {
				require.GreaterOrEqual(t, l.Term, last, "a term went backwards on the channel")
				last = l.Term
			}
		case <-timeout:
			t.Fatalf("the observer did not deliver term %d (last %+v)", n, l)
		}
	}
	require.NoError(t, other.Resign(next))
	require.ErrorIs(t, leader.Resign(term), rlock.ErrLockLost)
	stop()
	for range seen {
	}
	f.restart(t, m.Addr)
	redistest.WaitHealthy(t, "the cluster", 40*time.Second, f.unhealthy)
	require.Eventually(t, func() bool {
		_, total, _ := f.LeftChannels(t, prefix)
		return total == 0
	}, 5*time.Second, 20*time.Millisecond, "channels left")
	_ = foDo(r, "DEL", key+":fence")
}
