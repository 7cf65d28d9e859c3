//go:build unix

package main

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/wire"
)

// TestLeader: rlock leader prints the leadership (exit 0) or that nobody leads (exit 1); rlock
// status shows an election's leader, term, value and candidates in order; --watch prints every
// change until SIGINT; unlock --force leaves an election alone.
func TestLeader(t *testing.T) {
	e := newEnv(t)
	c := e.libClient()
	el := c.NewElection("sched")
	code, out, stderr := e.run("leader", "sched")
	assert.Equal(t, exitFree, code, "stderr: %s", stderr)
	assert.Equal(t, "sched: no leader\n", out)

	watch := e.start("leader", "--watch", "sched")
	l := watch.next(t, 5*time.Second)
	assert.Regexp(t, `^\d\d:\d\d:\d\d\.\d{3} sched: no leader$`, l.text)

	a, err := el.Campaign(context.Background(), "10.0.0.7:8080")
	require.NoError(t, err)
	term, _ := el.Term(a)
	ta := strconv.FormatInt(term, 10)
	assert.Regexp(t, `^\d\d:\d\d:\d\d\.\d{3} sched: led by "10\.0\.0\.7:8080", term `+ta+`, lease (29\.\d+|30(\.0+)?)s left$`,
		watch.next(t, 5*time.Second).text)
	code, out, stderr = e.run("leader", "sched")
	assert.Equal(t, exitHeld, code, "stderr: %s", stderr)
	assert.Regexp(t, `^sched: led by "10\.0\.0\.7:8080", term `+ta+`, lease .*s left\n$`, out)

	var waiting []chan error
	for _, v := range []string{"b", "c"} {
		done := make(chan error, 1)
		go func() {
			h, err := el.Campaign(context.Background(), v)
			if err == nil {
				err = el.Resign(h)
			}
			done <- err
		}()
		waiting = append(waiting, done)
		require.Eventually(t, func() bool {
			st, err := el.State(context.Background())
			return err == nil && len(st.Waiters) == len(waiting)
		}, 5*time.Second, 5*time.Millisecond)
	}
	st, err := el.State(context.Background())
	require.NoError(t, err)
	code, out, stderr = e.run("status", "sched")
	assert.Equal(t, exitHeld, code, "stderr: %s", stderr)
	assert.Regexp(t, `^sched: election led by `+regexp.QuoteMeta(st.Holders[0].Owner)+` \(key `+
		regexp.QuoteMeta(wire.LockKey(e.prefix, "sched"))+`\), term `+ta+`, lease .*s left\n`+
		`value: "10\.0\.0\.7:8080"\ncandidates: 2 waiting\n`+
		`  1\. `+regexp.QuoteMeta(st.Waiters[0].Owner)+`, deadline in .*\n`+
		`  2\. `+regexp.QuoteMeta(st.Waiters[1].Owner)+`, deadline in .*\n$`, out)

	code, _, stderr = e.run("unlock", "--force", "sched")
	assert.Equal(t, exitError, code)
	assert.Contains(t, stderr, "is an election")
	require.NoError(t, a.Err(), "unlock --force left the term alone")

	require.NoError(t, el.Proclaim(a, "moved"))
	assert.Contains(t, watch.next(t, 5*time.Second).text, `sched: led by "moved", term `+ta)
	require.NoError(t, el.Resign(a))
	for _, done := range waiting {
		require.NoError(t, <-done)
	}
	// b led, then c, then nobody; a slow watcher may skip b or c, never the end.
	for {
		l := watch.next(t, 5*time.Second).text
		require.Regexp(t, `sched: (led by "[bc]", term \d+, lease .*s left|no leader)$`, l)
		if strings.HasSuffix(l, "no leader") {
			break
		}
	}
	watch.signal(t, syscall.SIGINT)
	assert.Equal(t, 0, watch.wait(t, 5*time.Second), "stderr: %s", watch.stderr)
	code, out, _ = e.run("leader", "sched")
	assert.Equal(t, exitFree, code)
	assert.Equal(t, "sched: no leader\n", out)

	// A lock of another kind at the name.
	m := c.NewMutex("mx")
	h, err := m.Lock(context.Background())
	require.NoError(t, err)
	code, _, stderr = e.run("leader", "mx")
	assert.Equal(t, exitError, code)
	assert.Contains(t, stderr, "another kind")
	require.NoError(t, m.Unlock(h))
}

// libClient returns a client of the library in the test's prefix.
func (e *testEnv) libClient() *rlock.Client {
	e.t.Helper()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	require.NoError(e.t, err)
	c, err := rlock.New(rc, rlock.Options{KeyPrefix: e.prefix})
	require.NoError(e.t, err)
	e.t.Cleanup(func() {
		_ = c.Close()
		rc.Close()
	})
	return c
}
