package rlock_test

// Elections under real faults: replies lost on the line (redistest.Proxy), subscriptions
// killed (CLIENT KILL) or cut off for a while, the server restarted without its data
// (redistest.Crashable), replicas that do not acknowledge (SyncReplicas), a restart grace.

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
)

// TestElection_lostReplies: a TryCampaign whose reply is lost holds nothing when it returns; a
// Campaign whose reply is lost is replayed and leads once; a Resign whose reply is lost is
// retried and never ends the next leader's term; a Proclaim whose reply is lost is retried.
func TestElection_lostReplies(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		p := e.newProxy()
		key := e.LockKey("lost")
		subject := e.through(p).client(rlock.Options{Wait: wait}).NewElection("lost")
		direct := e.client(rlock.Options{Wait: wait}).NewElection("lost")

		p.DropReply(matchScript("el_campaign.lua", key))
		_, err := subject.TryCampaign(bg, "s", 0)
		require.ErrorIs(t, err, rlock.ErrNotObtained, "the reply was lost")
		require.EqualValues(t, 1, p.Fired())
		requireNothingHeld(t, e, "the lead the lost reply took was given back")

		p.DropReply(matchScript("el_campaign.lua", key))
		h, err := subject.Campaign(bg, "s")
		require.NoError(t, err)
		require.EqualValues(t, 2, p.Fired())
		st, err := direct.State(bg)
		require.NoError(t, err)
		require.Len(t, st.Holders, 1, "one candidate leads")
		ts := termOf(t, subject, h)
		assert.Equal(t, ts, st.Token)

		p.DropReply(matchScript("el_proclaim.lua", key))
		require.NoError(t, subject.Proclaim(h, "s2"))
		l, err := direct.Leader(bg)
		require.NoError(t, err)
		assert.Equal(t, rlock.Leadership{Value: "s2", Term: ts, Lease: l.Lease}, l)

		next := campaign(direct, "d")
		require.Eventually(t, func() bool {
			st, err := direct.State(bg)
			return err == nil && len(st.Waiters) == 1
		}, 2*time.Second, time.Millisecond)
		p.DropReply(matchScript("el_resign.lua", key))
		require.NoError(t, subject.Resign(h), "the retry finds the term ended: the lost reply's")
		assert.ErrorIs(t, context.Cause(h), context.Canceled)
		hd := requireGranted(t, next, 2*time.Second, "the next candidate leads")
		td := termOf(t, direct, hd)
		assert.Greater(t, td, ts)
		time.Sleep(50 * time.Millisecond) // anything left on the subject's lane would have run
		assert.NoError(t, hd.Err(), "the retried Resign left the next term alone")
		l, err = direct.Leader(bg)
		require.NoError(t, err)
		assert.Equal(t, td, l.Term)
		assert.ErrorIs(t, subject.Resign(h), rlock.ErrNotHeld)
		require.NoError(t, direct.Resign(hd))
	})
}

// TestElection_observeFaults: an observer's subscription is cut (CLIENT KILL, and a proxy
// outage of 500ms during which the leadership changes twice) and recovered: it never closes,
// never goes back a term, and shows the leadership as it is within a second of coming back.
func TestElection_observeFaults(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		p := e.newProxy()
		direct := e.client(rlock.Options{Wait: wait}).NewElection("faults")
		obs := watch(e.through(p).client(rlock.Options{}).NewElection("faults").Observe(bg))
		obs.await(t, 2*time.Second, "at first", vacant)
		a, err := direct.Campaign(bg, "a")
		require.NoError(t, err)
		ta := termOf(t, direct, a)
		obs.await(t, 2*time.Second, "a leads", leads(ta, "a"))

		// CLIENT KILL of every subscriber, then a change at once.
		require.Positive(t, e.KillClients("pubsub"))
		require.NoError(t, direct.Proclaim(a, "a2"))
		obs.await(t, 2*time.Second, "a's proclaim, after CLIENT KILL", leads(ta, "a2"))

		// An outage of the observer's line while a resigns to b, who proclaims.
		b := campaign(direct, "b")
		require.Eventually(t, func() bool {
			st, err := direct.State(bg)
			return err == nil && len(st.Waiters) == 1
		}, 2*time.Second, time.Millisecond)
		p.Outage(500 * time.Millisecond)
		out := time.Now()
		require.NoError(t, direct.Resign(a))
		hb := requireGranted(t, b, 2*time.Second, "b leads")
		tb := termOf(t, direct, hb)
		require.NoError(t, direct.Proclaim(hb, "b2"))
		obs.await(t, 1500*time.Millisecond+500*time.Millisecond, "b's proclaim, after the outage", leads(tb, "b2"))
		t.Logf("seen %v after the outage began (500ms)", time.Since(out).Round(time.Millisecond))

		// A vacancy during another outage.
		p.Outage(300 * time.Millisecond)
		require.NoError(t, direct.Resign(hb))
		obs.await(t, 2*time.Second, "vacant, after the outage", vacant)
		select {
		case <-obs.done:
			t.Fatal("the channel closed")
		default:
		}
		monotonic(t, obs.values())
	})
}

// TestElection_restart: the server restarts without its data under a leader: its term ends
// (ErrLockLost) within a second of the server answering again, observers see the vacancy, and
// the next term is larger than every earlier one although the counter is gone (the clock
// floor). With RestartGrace, nobody leads until the grace has passed: TryCampaign fails, and a
// waiting Campaign leads once it has.
func TestElection_restart(t *testing.T) {
	e, kill, start := crashable(t, "restart")
	m := e.Master("restart")
	const grace = 2 * time.Second
	c := e.client(rlock.Options{})
	el := c.NewElection("restart")
	graced := e.client(rlock.Options{RestartGrace: grace}).NewElection("restart")
	spin := e.client(rlock.Options{RestartGrace: grace, Wait: rlock.Spin(50 * time.Millisecond)}).NewElection("restart")
	obs := watch(e.client(rlock.Options{}).NewElection("restart").Observe(bg))
	var last int64
	for range 5 { // the counter runs ahead of the clock's milliseconds
		h, err := el.Campaign(bg, "old")
		require.NoError(t, err)
		last = termOf(t, el, h)
		require.NoError(t, el.Resign(h))
	}
	h, err := el.Campaign(bg, "old")
	require.NoError(t, err)
	last = max(last, termOf(t, el, h))
	obs.await(t, 2*time.Second, "old leads", leads(last, "old"))

	kill()
	started := time.Now()
	start()
	back := m.Answering(t, e.LockKey("restart"))
	require.ErrorIs(t, causeOf(h, 2*time.Second), rlock.ErrLockLost, "the term ended with the server's data")
	obs.await(t, 2*time.Second, "vacant after the restart", vacant)
	t.Logf("the term ended and observers saw the vacancy %v after the server answered", time.Since(back).Round(time.Millisecond))
	var n int64
	require.Eventually(t, func() bool { // the admin client's connection broke with the restart
		n, err = e.Do("EXISTS", e.LockKey("restart")+":fence").AsInt64()
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)
	require.Zero(t, n, "the counter is gone with the data")

	_, err = graced.TryCampaign(bg, "graced", 0)
	require.ErrorIs(t, err, rlock.ErrNotObtained, "no lead within the grace")
	for _, el := range []*rlock.Election{graced, spin} {
		ctx, cancel := context.WithTimeout(bg, 10*time.Second)
		hg, err := el.Campaign(ctx, "graced")
		cancel()
		require.NoError(t, err)
		since := time.Since(started)
		assert.GreaterOrEqual(t, since, grace, "led %v after the server started again", since)
		tg := termOf(t, el, hg)
		assert.Greater(t, tg, last, "a term after the restart is larger than every earlier one")
		last = tg
		obs.await(t, 2*time.Second, "the new leader", leads(tg, "graced"))
		require.NoError(t, el.Resign(hg))
	}
	monotonic(t, obs.values())
	e.Dep.WaitSteady(t, 20*time.Second)
}

// TestElection_syncReplicas: with SyncReplicas a term counts once that many replicas
// acknowledged it; too few give ErrNotReplicated and nothing held. A resigning leader wakes the
// next candidate (no handoff without its own WAIT), who then leads.
func TestElection_syncReplicas(t *testing.T) {
	e, replicaPIDs := withReplicas(t)
	pids := replicaPIDs("sync")
	require.NotEmpty(t, pids)
	c := e.client(rlock.Options{SyncReplicas: len(pids), SyncTimeout: 200 * time.Millisecond})
	el := c.NewElection("sync")
	a, err := el.Campaign(bg, "a")
	require.NoError(t, err, "%d replicas, in sync", len(pids))
	b := campaign(el, "b")
	require.Eventually(t, func() bool {
		st, err := el.State(bg)
		return err == nil && len(st.Waiters) == 1
	}, 2*time.Second, time.Millisecond)
	require.NoError(t, el.Resign(a))
	hb := requireGranted(t, b, 2*time.Second, "b leads")
	assert.Greater(t, termOf(t, el, hb), termOf(t, el, a))
	require.NoError(t, el.Resign(hb))

	more := e.client(rlock.Options{SyncReplicas: len(pids) + 1, SyncTimeout: 50 * time.Millisecond}).NewElection("sync")
	_, err = more.Campaign(bg, "m")
	require.ErrorIs(t, err, rlock.ErrNotReplicated, "%d replicas asked, %d exist", len(pids)+1, len(pids))
	requireNothingHeld(t, e, "the term was given back")
	for _, pid := range pids {
		require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	}
	_, err = el.TryCampaign(bg, "a", time.Second)
	for _, pid := range pids {
		require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
	}
	require.True(t, errors.Is(err, rlock.ErrNotReplicated), "the replicas are stopped: %v", err)
	requireNothingHeld(t, e, "the term was given back")
}
