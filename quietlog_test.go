package rlock_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
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
