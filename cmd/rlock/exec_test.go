//go:build unix

package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// holdScript is a CMD that says "ready" and runs until SIGTERM, on which it says "got-term"
// and exits with status $1.
const holdScript = `trap 'echo got-term; exit $1' TERM; echo ready; sleep 30 & wait`

// TestExec_exclusion runs two rlock exec loops on one name at once: their CMDs, which log
// their start and end to one file with a pause between, never interleave.
func TestExec_exclusion(t *testing.T) {
	e := newEnv(t)
	logFile := filepath.Join(e.dir, "log")
	script := `echo "start $$" >> "$1"; sleep 0.05; echo "end $$" >> "$1"`
	const loops, rounds = 2, 4
	var wg sync.WaitGroup
	for range loops {
		wg.Go(func() {
			for range rounds {
				code, _, stderr := e.run("exec", "excl", "--", "sh", "-c", script, "sh", logFile)
				assert.Equal(t, 0, code, "stderr: %s", stderr)
			}
		})
	}
	wg.Wait()
	b, err := os.ReadFile(logFile)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	require.Len(t, lines, 2*loops*rounds, "every run logged its start and end:\n%s", b)
	for i := 0; i < len(lines); i += 2 {
		start, end := lines[i], lines[i+1]
		require.True(t, strings.HasPrefix(start, "start "), "line %d is %q, not a start:\n%s", i+1, start, b)
		require.Equal(t, "end "+strings.TrimPrefix(start, "start "), end, "line %d: runs interleaved:\n%s", i+2, b)
	}
}

// TestExec_killedHolder kills -9 an rlock exec holding a lock with a 1s watchdog lease: the
// waiting one gets in once the lease ran out (not before half a second, within 1.5s), and on
// Linux the dead holder's CMD was killed with it.
func TestExec_killedHolder(t *testing.T) {
	e := newEnv(t)
	holder := e.start("exec", "--watchdog", "1s", "k", "--", "sh", "-c", `echo "$$"; exec sleep 30`)
	pid, err := strconv.Atoi(holder.next(t, 5*time.Second).text)
	require.NoError(t, err)
	waiter := e.start("exec", "--watchdog", "1s", "k", "--", "echo", "in")
	e.waiting(t, "k", 1)
	waiter.quiet(t, 50*time.Millisecond) // waiting, and nothing printed

	require.NoError(t, syscall.Kill(-holder.cmd.Process.Pid, syscall.SIGKILL)) // rlock's group: not CMD's
	killed := time.Now()
	in := waiter.expect(t, "in", 3*time.Second)
	took := in.Sub(killed)
	assert.Greater(t, took, 500*time.Millisecond, "the waiter got in before the holder's lease ran out")
	assert.Less(t, took, 1500*time.Millisecond, "the waiter got in later than a lease after the kill")
	assert.Equal(t, 0, waiter.wait(t, 5*time.Second))

	if runtime.GOOS == "linux" {
		assert.Eventually(t, func() bool { return gone(pid) }, 2*time.Second, 10*time.Millisecond,
			"the CMD of the killed rlock (pid %d) still runs", pid)
	} else {
		_ = syscall.Kill(pid, syscall.SIGKILL) // it runs on: only Linux kills it with its parent
	}
}

// gone reports whether process pid has ended: it does not exist, or is a zombie that nobody
// reaped yet.
func gone(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) state ...: comm may hold spaces and parentheses, so the state follows the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// TestExec_forceUnlock: rlock unlock --force of a held lock makes the holder's CMD get SIGTERM
// and its rlock exec exit 79, the status of a lost lock.
func TestExec_forceUnlock(t *testing.T) {
	e := newEnv(t)
	holder := e.start("exec", "--watchdog", "1s", "f", "--", "sh", "-c", holdScript, "sh", "0")
	holder.expect(t, "ready", 5*time.Second)

	code, out, stderr := e.run("unlock", "--force", "f")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Equal(t, "f: was locked; deleted\n", out)
	holder.expect(t, "got-term", 2*time.Second) // the next renewal, a third of the lease on, finds it gone
	assert.Equal(t, exitLost, holder.wait(t, 5*time.Second))
	assert.Contains(t, holder.stderr.String(), `rlock: mutex "f" lost while CMD ran`)

	code, out, _ = e.run("unlock", "--force", "f")
	assert.Equal(t, 1, code)
	assert.Equal(t, "f: was not locked\n", out)
}

// TestExec_leaseEnds: with --lease, CMD is stopped when the lease ends: SIGTERM, which this one
// ignores, then SIGKILL --kill-after later; rlock exits with --lost-exit.
func TestExec_leaseEnds(t *testing.T) {
	e := newEnv(t)
	p := e.start("exec", "--lease", "600ms", "--kill-after", "300ms", "--lost-exit", "9", "l", "--",
		"sh", "-c", `trap '' TERM; echo ready; sleep 30`)
	started := p.expect(t, "ready", 5*time.Second)
	assert.Equal(t, 9, p.wait(t, 5*time.Second))
	took := time.Since(started)
	assert.Greater(t, took, 800*time.Millisecond, "lease and grace")
	assert.Less(t, took, 3*time.Second)
	stderr := p.stderr.String()
	assert.Contains(t, stderr, `rlock: mutex "l" lost while CMD ran (lease ended: lock lost): stopping CMD`)
	assert.Contains(t, stderr, "CMD still runs 300ms after SIGTERM: sending SIGKILL")
}

// TestExec_waitZero: --wait 0 on a taken lock exits 75 at once without running CMD; --wait D
// gives up after D.
func TestExec_waitZero(t *testing.T) {
	e := newEnv(t)
	holder := e.start("exec", "w", "--", "sh", "-c", holdScript, "sh", "0")
	holder.expect(t, "ready", 5*time.Second)
	marker := filepath.Join(e.dir, "ran")

	start := time.Now()
	code, _, stderr := e.run("exec", "--wait", "0", "w", "--", "touch", marker)
	assert.Equal(t, exitTempFail, code)
	assert.Less(t, time.Since(start), 2*time.Second, "at once (a process start and one round trip)")
	assert.Equal(t, "rlock: mutex \"w\" is held by another owner\n", stderr)
	assert.NoFileExists(t, marker, "CMD ran without the lock")

	start = time.Now()
	code, _, stderr = e.run("exec", "--wait", "400ms", "w", "--", "touch", marker)
	assert.Equal(t, exitTempFail, code)
	assert.GreaterOrEqual(t, time.Since(start), 400*time.Millisecond)
	assert.Equal(t, "rlock: mutex \"w\" is held by another owner; gave up after 400ms\n", stderr)
	assert.NoFileExists(t, marker, "CMD ran without the lock")

	holder.signal(t, syscall.SIGTERM)
	holder.expect(t, "got-term", 2*time.Second)
	assert.Equal(t, 0, holder.wait(t, 5*time.Second))
}

// TestExec_exitStatus: rlock exec exits with CMD's status, 128+n when CMD died of signal n,
// 127 for a CMD not found and 126 for one that cannot be run.
func TestExec_exitStatus(t *testing.T) {
	e := newEnv(t)
	notExecutable := filepath.Join(e.dir, "script")
	require.NoError(t, os.WriteFile(notExecutable, []byte("#!/bin/sh\n"), 0o644))
	for _, tc := range []struct {
		cmd  []string
		want int
	}{
		{[]string{"true"}, 0},
		{[]string{"sh", "-c", "exit 3"}, 3},
		{[]string{"sh", "-c", "kill -USR1 $$"}, 128 + int(syscall.SIGUSR1)},
		{[]string{"no-such-command-here"}, exitNotFound},
		{[]string{notExecutable}, exitCannotExec},
	} {
		code, _, stderr := e.run("exec", append([]string{"s", "--"}, tc.cmd...)...)
		assert.Equal(t, tc.want, code, "%q: stderr: %s", tc.cmd, stderr)
	}
}

// TestExec_signals: SIGTERM to rlock is passed on to CMD and rlock exits with CMD's status;
// a CMD that dies of it gives 143; SIGTERM or SIGINT while waiting ends the wait with 143 or
// 130, without running CMD.
func TestExec_signals(t *testing.T) {
	e := newEnv(t)
	p := e.start("exec", "sig", "--", "sh", "-c", holdScript, "sh", "7")
	p.expect(t, "ready", 5*time.Second)
	p.signal(t, syscall.SIGTERM)
	p.expect(t, "got-term", 2*time.Second)
	assert.Equal(t, 7, p.wait(t, 5*time.Second))

	holder := e.start("exec", "sig", "--", "sh", "-c", `echo ready; exec sleep 30`)
	holder.expect(t, "ready", 5*time.Second)
	marker := filepath.Join(e.dir, "ran")
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		waiter := e.start("exec", "sig", "--", "touch", marker)
		e.waiting(t, "sig", 1)
		waiter.quiet(t, 50*time.Millisecond)
		waiter.signal(t, sig)
		assert.Equal(t, 128+int(sig), waiter.wait(t, 5*time.Second))
		assert.Contains(t, waiter.stderr.String(), `while waiting for mutex "sig"; CMD not run`)
		assert.NoFileExists(t, marker)
	}
	holder.signal(t, syscall.SIGTERM)
	assert.Equal(t, 128+int(syscall.SIGTERM), holder.wait(t, 5*time.Second), "sleep died of the SIGTERM passed on")

	code, _, _ := e.run("status", "sig")
	assert.Equal(t, exitFree, code, "released after CMD died")
}

// TestExec_ignoredSignal: a signal that rlock was started with ignored (as under nohup) stays
// ignored, by rlock and by CMD.
func TestExec_ignoredSignal(t *testing.T) {
	e := newEnv(t)
	p := e.startProgram(nil, "sh", append([]string{"-c", `trap '' HUP; exec "$0" "$@"`, rlockBin},
		e.argv("exec", "hup", "--", "sh", "-c", holdScript, "sh", "0")...)...)
	p.expect(t, "ready", 5*time.Second)
	p.signal(t, syscall.SIGHUP)
	p.quiet(t, 300*time.Millisecond)
	p.signal(t, syscall.SIGTERM)
	p.expect(t, "got-term", 2*time.Second)
	assert.Equal(t, 0, p.wait(t, 5*time.Second))
}

// TestExec_processGroup: CMD runs in a process group of its own, or with --foreground in
// rlock's, where SIGTERM still reaches it.
func TestExec_processGroup(t *testing.T) {
	e := newEnv(t)
	script := `trap 'kill $!; echo got-term; exit 5' TERM; echo "$$"; sleep 30 & wait`
	for _, fg := range []bool{false, true} {
		args := []string{"pg", "--", "sh", "-c", script}
		if fg {
			args = append([]string{"--foreground"}, args...)
		}
		p := e.start("exec", args...)
		pid, err := strconv.Atoi(p.next(t, 5*time.Second).text)
		require.NoError(t, err)
		pgid, err := syscall.Getpgid(pid)
		require.NoError(t, err)
		if fg {
			assert.Equal(t, p.cmd.Process.Pid, pgid, "--foreground: CMD is in rlock's process group")
		} else {
			assert.Equal(t, pid, pgid, "CMD leads a process group of its own")
		}
		p.signal(t, syscall.SIGTERM)
		p.expect(t, "got-term", 2*time.Second)
		assert.Equal(t, 5, p.wait(t, 5*time.Second))
	}
}

// TestExec_environment: CMD learns the lock's name and owner from RLOCK_NAME and RLOCK_OWNER,
// and gets the owner given with --owner.
func TestExec_environment(t *testing.T) {
	e := newEnv(t)
	code, out, stderr := e.run("exec", "--owner", "me", "env", "--", "sh", "-c", `echo "$RLOCK_NAME $RLOCK_OWNER"`)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Equal(t, "env me\n", out)
}

// TestExec_quiet: with --quiet a round that does not get the lock prints nothing (so cron
// mails nothing) and still exits 75; other messages are still printed.
func TestExec_quiet(t *testing.T) {
	e := newEnv(t)
	holder := e.start("exec", "q", "--", "sh", "-c", holdScript, "sh", "0")
	holder.expect(t, "ready", 5*time.Second)
	marker := filepath.Join(e.dir, "ran")
	for _, wait := range []string{"0", "300ms"} {
		code, out, stderr := e.run("exec", "--quiet", "--wait", wait, "q", "--", "touch", marker)
		assert.Equal(t, exitTempFail, code, "--wait %s: stderr: %s", wait, stderr)
		assert.Empty(t, stderr, "--wait %s", wait)
		assert.Empty(t, out, "--wait %s", wait)
		assert.NoFileExists(t, marker, "CMD ran without the lock")
	}
	code, _, stderr := e.run("exec", "--quiet", "--semaphore", "1", "--wait", "0", "q", "--", "true")
	assert.Equal(t, exitUsage, code, "stderr: %s", stderr)
	assert.Contains(t, stderr, `rlock: lock "q" is a mutex in Redis`)

	holder.signal(t, syscall.SIGTERM)
	holder.expect(t, "got-term", 2*time.Second)
	assert.Equal(t, 0, holder.wait(t, 5*time.Second))
}

// TestExec_lostExit: a lock lost while CMD runs exits 79 by default, not the 75 of a skipped
// round, and says so even with --quiet; --lost-exit N makes it N.
func TestExec_lostExit(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		flags []string
		want  int
	}{{[]string{"--quiet"}, exitLost}, {[]string{"--lost-exit", "3"}, 3}} {
		p := e.start("exec", append(tc.flags, "--lease", "300ms", "lost", "--", "sh", "-c", holdScript, "sh", "0")...)
		p.expect(t, "ready", 5*time.Second)
		p.expect(t, "got-term", 3*time.Second)
		assert.Equal(t, tc.want, p.wait(t, 5*time.Second), "%q", tc.flags)
		assert.Contains(t, p.stderr.String(), `rlock: mutex "lost" lost while CMD ran (lease ended: lock lost)`, "%q", tc.flags)
	}
}

// TestExec_redisGoneAfterConnect: when Redis becomes unreachable after rlock connected, the
// attempt that could not reach it exits 69 at once with the transport error, even with
// --quiet, not 75 as if another owner held the lock.
func TestExec_redisGoneAfterConnect(t *testing.T) {
	e := newEnv(t)
	p := redistest.NewProxy(t, redisAddr)
	// The first script (exec's look at NAME's keys) cuts every connection, and new ones fail
	// for a while: the acquisition after it finds no server.
	p.DropRequest(redistest.ThenCall(func(cmd []string) bool {
		return len(cmd) > 0 && strings.HasPrefix(strings.ToUpper(cmd[0]), "EVAL")
	}, func() { p.Outage(5 * time.Second) }))
	marker := filepath.Join(e.dir, "ran")
	pr := e.startArgs(nil, []string{"exec", "--redis", "redis://" + p.Addr(), "--prefix", e.prefix,
		"--quiet", "--wait", "0", "gone", "--", "touch", marker})
	code := pr.wait(t, 3*time.Second) // Try's bound is wait + 500ms
	stderr := pr.stderr.String()
	assert.Equal(t, exitUnavailable, code, "stderr: %s", stderr)
	assert.True(t, strings.HasPrefix(stderr, `rlock: mutex "gone": not obtained`), "stderr: %s", stderr)
	assert.NotRegexp(t, `rlock: .*rlock: `, stderr)
	assert.NoFileExists(t, marker, "CMD ran without the lock")
	assert.EqualValues(t, 1, p.Fired())
}

// TestWrapsOther: an error of the library that wraps ErrNotObtained alone is contention; one
// that wraps a transport error besides (the shape of a Try call's error when its last attempt
// could not reach Redis) is not.
func TestWrapsOther(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{rlock.ErrNotObtained, false},
		{fmt.Errorf("mutex %q: %w", "n", rlock.ErrNotObtained), false},
		{fmt.Errorf("mutex %q: %w (last attempt: %w)", "n", rlock.ErrNotObtained, refused), true},
		{fmt.Errorf("mutex %q: %w", "n", errors.Join(rlock.ErrNotObtained, io.EOF)), true},
	} {
		assert.Equal(t, tc.want, wrapsOther(tc.err, rlock.ErrNotObtained), "%v", tc.err)
	}
}
