//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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
	waiter.quiet(t, 500*time.Millisecond) // started, connected, waiting

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
// and its rlock exec exit 75.
func TestExec_forceUnlock(t *testing.T) {
	e := newEnv(t)
	holder := e.start("exec", "--watchdog", "1s", "f", "--", "sh", "-c", holdScript, "sh", "0")
	holder.expect(t, "ready", 5*time.Second)

	code, out, stderr := e.run("unlock", "--force", "f")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Equal(t, "f: was locked; deleted\n", out)
	holder.expect(t, "got-term", 2*time.Second) // the next renewal, a third of the lease on, finds it gone
	assert.Equal(t, exitTempFail, holder.wait(t, 5*time.Second))
	assert.Contains(t, holder.stderr.String(), `rlock: lock "f" lost while CMD ran`)

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
	assert.Contains(t, stderr, `rlock: lock "l" lost while CMD ran (lease ended`)
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
	assert.Equal(t, "rlock: lock \"w\" is held by another owner\n", stderr)
	assert.NoFileExists(t, marker, "CMD ran without the lock")

	start = time.Now()
	code, _, stderr = e.run("exec", "--wait", "400ms", "w", "--", "touch", marker)
	assert.Equal(t, exitTempFail, code)
	assert.GreaterOrEqual(t, time.Since(start), 400*time.Millisecond)
	assert.Equal(t, "rlock: lock \"w\" is held by another owner; gave up after 400ms\n", stderr)
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
		waiter.quiet(t, 300*time.Millisecond)
		waiter.signal(t, sig)
		assert.Equal(t, 128+int(sig), waiter.wait(t, 5*time.Second))
		assert.Contains(t, waiter.stderr.String(), `while waiting for lock "sig"; CMD not run`)
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
