package rlock_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
)

// TestQuietLog_outage: during an outage (the proxy cuts every connection and refuses new
// ones) a client retries its renewals every few milliseconds, but logs their failure once when
// it begins, then at most once per quiet period (10s; 500ms here, the outage scaled down with it),
// and once when Redis answers again. The hold outlives the outage (its lease is longer).
func TestQuietLog_outage(t *testing.T) {
	const every, outage = 500 * time.Millisecond, 3 * time.Second
	e := newEnv(t)
	p := e.newProxy()
	var logs syncBuffer
	c := e.through(p).client(rlock.Options{WatchdogTimeout: 6 * time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	rlock.SetQuietEvery(c, every)
	var failures int
	m := c.NewMutex("quiet")
	h, err := m.Lock(bg)
	require.NoError(t, err)

	start := time.Now()
	p.Outage(outage)
	time.Sleep(outage)
	// The next renewal gets through: the recovery is logged.
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "succeeds again") },
		3*time.Second, 10*time.Millisecond, "log:\n%s", logs.String())
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	for _, l := range lines {
		if strings.Contains(l, "renewal failed") {
			failures++
		}
	}
	t.Logf("a %v outage from %s, logged every %v: %d lines:\n%s", outage, start.Format("15:04:05.000"), every,
		len(lines), logs.String())
	assert.GreaterOrEqual(t, failures, 1, "the failures' start is logged")
	assert.LessOrEqual(t, failures, 1+int(outage/every)+1, "then at most one line per quiet period")
	assert.Equal(t, 1, strings.Count(logs.String(), "succeeds again"), "the recovery is logged once")
	require.NoError(t, h.Err(), "the hold outlived the outage")
	require.NoError(t, m.Unlock(h))
}

// TestQuietLog_perNode: on a cluster, the renewal failures of a master that the proxy cuts off
// are logged once when they begin, then at most once per quiet period, and its recovery once,
// each naming the node; the other master's renewals, which go on succeeding, neither end its
// run early (before, a success on any node ended the client's one run, so an outage of one node
// flapped between a failure line and a recovery line) nor log anything themselves.
func TestQuietLog_perNode(t *testing.T) {
	redistest.NeedsThrowaway(t)
	if redistest.Suite().Topology != "cluster" {
		t.Skip("needs two masters: a cluster")
	}
	const every, outage = 500 * time.Millisecond, 3 * time.Second
	e := newEnv(t)
	healthy, away := e.Dep.Masters[0], e.Dep.Masters[1]
	p := e.newProxy(away.Addr)
	var logs syncBuffer
	c := e.through(p).client(rlock.Options{WatchdogTimeout: 6 * time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	rlock.SetQuietEvery(c, every)
	a, b := c.NewMutex(nameOn(e, healthy, "q-healthy")), c.NewMutex(nameOn(e, away, "q-away"))
	ha, err := a.Lock(bg)
	require.NoError(t, err)
	hb, err := b.Lock(bg)
	require.NoError(t, err)

	p.Outage(outage) // the renewals on the healthy master go on meanwhile, every 2s
	time.Sleep(outage)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "succeeds again") },
		5*time.Second, 10*time.Millisecond, "log:\n%s", logs.String())
	time.Sleep(2500 * time.Millisecond) // another period of both: nothing more is logged
	out := logs.String()
	t.Logf("a %v outage of %s, logged every %v:\n%s", outage, away.Addr, every, out)
	failures := 0
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		assert.Contains(t, l, "node="+away.Addr, "every line names the node cut off")
		if strings.Contains(l, "renewal failed") {
			failures++
		}
	}
	assert.GreaterOrEqual(t, failures, 1, "the failures' start is logged")
	assert.LessOrEqual(t, failures, 1+int(outage/every)+1, "then at most one line per quiet period")
	assert.Equal(t, 1, strings.Count(out, "succeeds again"), "the recovery is logged once")
	require.NoError(t, ha.Err())
	require.NoError(t, hb.Err(), "the hold outlived the outage")
	require.NoError(t, a.Unlock(ha))
	require.NoError(t, b.Unlock(hb))
}
