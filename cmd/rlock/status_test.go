//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rlock-go/rlock/internal/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStatus: status of a free lock exits 1, of a held one 0 with its holder, hold count and
// lease; an rlock exec with the holder's --owner re-enters the lock (2 holds) instead of
// waiting for it.
func TestStatus(t *testing.T) {
	e := newEnv(t)
	key := wire.LockKey(e.prefix, "s")
	code, out, stderr := e.run("status", "s")
	assert.Equal(t, exitFree, code, "stderr: %s", stderr)
	assert.Equal(t, "s: free (key "+key+")\n", out)

	holder := e.start("exec", "--owner", "owner-a", "s", "--", "sh", "-c", holdScript, "sh", "0")
	holder.expect(t, "ready", 5*time.Second)
	code, out, stderr = e.run("status", "s")
	assert.Equal(t, exitHeld, code, "stderr: %s", stderr)
	// exec labels its hold "HOST pid PID" by default
	host, err := os.Hostname()
	require.NoError(t, err)
	label := regexp.QuoteMeta(strconv.Quote(fmt.Sprintf("%s pid %d", host, holder.cmd.Process.Pid)))
	assert.Regexp(t, `^s: mutex held \(key `+regexp.QuoteMeta(key)+`\), lease (1\d\.\d+|2\d\.\d+|30(\.0+)?)s left\n`+
		`holder owner-a: 1 hold, label `+label+`, held \d+(\.\d+)?m?s\n$`, out)

	code, out, _ = e.run("status", "s", "--fair") // flags may follow NAME
	assert.Equal(t, exitHeld, code)
	assert.Regexp(t, `holder owner-a: 1 hold, label `+label+`, held .*\nqueue: empty\n$`, out)

	// A CMD run under the same owner (here: rlock status) sees the hold count 2.
	nested := append([]string{"--owner", "owner-a", "--wait", "0", "s", "--", rlockBin}, e.argv("status", "s")...)
	code, out, stderr = e.run("exec", nested...)
	assert.Equal(t, exitHeld, code, "stderr: %s", stderr)
	assert.Contains(t, out, "holder owner-a: 2 holds, label ", "the re-entry keeps the first label")
	_, out, _ = e.run("status", "s")
	assert.Contains(t, out, "holder owner-a: 1 hold, label ", "the re-entry released its hold only")

	holder.signal(t, syscall.SIGTERM)
	holder.expect(t, "got-term", 2*time.Second)
	assert.Equal(t, 0, holder.wait(t, 5*time.Second))
	code, _, _ = e.run("status", "s")
	assert.Equal(t, exitFree, code)
}

// TestStatus_fairQueue: status --fair lists a queued waiter with the time left to its
// deadline; once the holder ends, the waiter gets the lock and the queue is empty.
func TestStatus_fairQueue(t *testing.T) {
	e := newEnv(t)
	holder := e.start("exec", "--fair", "--owner", "fa", "--label", "host-a pid 12", "q", "--", "sh", "-c", holdScript, "sh", "0")
	holder.expect(t, "ready", 5*time.Second)
	waiter := e.start("exec", "--fair", "--owner", "fb", "--label", "host-b pid 7", "q", "--", "echo", "in")

	var code int
	var out string
	require.Eventually(t, func() bool {
		code, out, _ = e.run("status", "--fair", "q")
		return strings.Contains(out, "queue: 1 waiting")
	}, 5*time.Second, 50*time.Millisecond, "the waiter never showed in the queue: %s", out)
	assert.Equal(t, exitHeld, code)
	assert.Regexp(t, `^q: fair_mutex held \(key .*\), lease .*s left\nholder fa: 1 hold, label "host-a pid 12", held .*s\n`+
		`queue: 1 waiting\n  1\. fb, deadline in (\d+ms|[1-5](\.\d+)?s), label "host-b pid 7"\n$`, out)
	t.Logf("rlock status --fair q:\n%s", out)

	holder.signal(t, syscall.SIGTERM)
	holder.expect(t, "got-term", 2*time.Second)
	assert.Equal(t, 0, holder.wait(t, 5*time.Second))
	waiter.expect(t, "in", 5*time.Second)
	assert.Equal(t, 0, waiter.wait(t, 5*time.Second))

	code, out, _ = e.run("status", "--fair", "q")
	assert.Equal(t, exitFree, code)
	assert.Equal(t, "q: free (key "+wire.LockKey(e.prefix, "q")+")\nqueue: empty\n", out)
}

// TestStatus_redisURLFromEnvironment: without --redis, REDIS_URL names the server.
func TestStatus_redisURLFromEnvironment(t *testing.T) {
	e := newEnv(t)
	env := append(envWithout("REDIS_URL"), "REDIS_URL=redis://"+redisAddr)
	code, out, stderr := e.runArgs(env, []string{"status", "--prefix", e.prefix, "u"})
	assert.Equal(t, exitFree, code, "stderr: %s", stderr)
	assert.Equal(t, "u: free (key "+wire.LockKey(e.prefix, "u")+")\n", out)
}

// TestWrongTypeKey: a key of another type at a lock's name is an error for status and unlock
// (2), and an argument the library refuses for exec (64); nothing is changed.
func TestWrongTypeKey(t *testing.T) {
	e := newEnv(t)
	key := wire.LockKey(e.prefix, "wt")
	require.NoError(t, e.admin.Do(context.Background(), e.admin.B().Set().Key(key).Value("x").Build()).Error())

	code, _, stderr := e.run("status", "wt")
	assert.Equal(t, exitError, code)
	assert.Contains(t, stderr, "holds a value that is not a lock of this library")
	code, _, stderr = e.run("unlock", "--force", "wt")
	assert.Equal(t, exitError, code)
	assert.Contains(t, stderr, "holds a value that is not a lock of this library")
	code, _, stderr = e.run("exec", "wt", "--", "true")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "holds a value that is not a lock of this library")

	v, err := e.admin.Do(context.Background(), e.admin.B().Get().Key(key).Build()).ToString()
	require.NoError(t, err)
	assert.Equal(t, "x", v)
	require.NoError(t, e.admin.Do(context.Background(), e.admin.B().Del().Key(key).Build()).Error())
}

// TestExec_badLabel: a --label the library refuses is a usage error, and nothing is taken.
func TestExec_badLabel(t *testing.T) {
	e := newEnv(t)
	code, _, stderr := e.run("exec", "--label", "", "--wait", "0", "bl", "--", "true")
	assert.Equal(t, exitUsage, code, "stderr: %s", stderr)
	assert.Contains(t, stderr, "invalid argument: empty label")
	assert.Empty(t, e.keys())
}
