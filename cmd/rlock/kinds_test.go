//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rlock-go/rlock/internal/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// logScript is a CMD that appends "start KIND $$" to the file $1, pauses, and appends
// "end KIND $$"; KIND is $2.
const logScript = `echo "start $2 $$" >> "$1"; sleep 0.05; echo "end $2 $$" >> "$1"`

// checkLog replays a log of logScript lines and returns the most CMDs that ran at once, and
// the most of those that were writers ("w"); it fails t on a malformed log.
// labelled is the end of the line of a hold that rlock exec took with its default label.
const labelled = `, label "[^"]+ pid \d+", held \d+(\.\d+)?m?s\n`

func checkLog(t *testing.T, path string) (most, mostWriters int, runs map[string]int) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	running := map[string]string{} // pid -> kind
	runs = map[string]int{}
	for i, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		f := strings.Fields(l)
		require.Len(t, f, 3, "line %d: %q", i+1, l)
		switch f[0] {
		case "start":
			running[f[2]] = f[1]
			runs[f[1]]++
		case "end":
			require.Equal(t, f[1], running[f[2]], "line %d: %q ends a run that did not start", i+1, l)
			delete(running, f[2])
		}
		writers := 0
		for _, k := range running {
			if k == "w" {
				writers++
			}
		}
		if writers > 0 && len(running) > 1 {
			require.Failf(t, "a writer ran with others", "at line %d:\n%s", i+1, b)
		}
		most, mostWriters = max(most, len(running)), max(mostWriters, writers)
	}
	require.Empty(t, running, "runs that never ended:\n%s", b)
	return most, mostWriters, runs
}

// TestExec_readWriteExclusion runs rlock exec loops on one read-write lock at once, two
// writing and three reading (plain, then fair): a writer's CMD never runs beside another
// CMD, readers' CMDs do run together.
func TestExec_readWriteExclusion(t *testing.T) {
	for _, fair := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "fair"}[fair], func(t *testing.T) {
			e := newEnv(t)
			logFile := filepath.Join(e.dir, "log")
			const rounds = 4
			var wg sync.WaitGroup
			for _, kind := range []string{"w", "w", "r", "r", "r"} {
				wg.Go(func() {
					for range rounds {
						args := []string{"--" + map[string]string{"r": "read", "w": "write"}[kind]}
						if fair {
							args = append(args, "--fair")
						}
						args = append(args, "rw", "--", "sh", "-c", logScript, "sh", logFile, kind)
						code, _, stderr := e.run("exec", args...)
						assert.Equal(t, 0, code, "stderr: %s", stderr)
					}
				})
			}
			wg.Wait()
			most, mostWriters, runs := checkLog(t, logFile)
			assert.Equal(t, 2*rounds, runs["w"])
			assert.Equal(t, 3*rounds, runs["r"])
			assert.Equal(t, 1, mostWriters)
			t.Logf("at most %d CMDs at once", most)
		})
	}
}

// TestExec_readers: readers hold together; a writer cannot get in (--wait 0: 75) and, once it
// waits, holds back a new reader (writer preference); status lists the readers and the
// waiting writer; the writer gets in when the readers are gone.
func TestExec_readers(t *testing.T) {
	e := newEnv(t)
	r1 := e.start("exec", "--read", "--owner", "reader-1", "cfg", "--", "sh", "-c", holdScript, "sh", "0")
	r1.expect(t, "ready", 5*time.Second)
	r2 := e.start("exec", "--read", "--owner", "reader-2", "--wait", "0", "cfg", "--", "sh", "-c", holdScript, "sh", "0")
	r2.expect(t, "ready", 5*time.Second) // at once, beside reader-1

	code, _, stderr := e.run("exec", "--write", "--wait", "0", "cfg", "--", "true")
	assert.Equal(t, exitTempFail, code)
	assert.Equal(t, "rlock: rw_mutex \"cfg\" is held by other owners (readers or a writer)\n", stderr)

	code, out, stderr := e.run("status", "cfg")
	assert.Equal(t, exitHeld, code, "stderr: %s", stderr)
	lease := `, lease (1\d\.\d+|2\d\.\d+|30(\.0+)?)s left` + labelled
	assert.Regexp(t, `^cfg: rw_mutex held for reading by 2 owners \(key `+regexp.QuoteMeta(e.prefix)+`:\{cfg\}\)\n`+
		`(reader reader-1: 1 hold`+lease+`reader reader-2: 1 hold`+lease+`|reader reader-2: 1 hold`+lease+`reader reader-1: 1 hold`+lease+`)$`, out)

	writer := e.start("exec", "--write", "--owner", "writer", "cfg", "--", "echo", "written")
	require.Eventually(t, func() bool {
		_, out, _ = e.run("status", "cfg")
		return strings.Contains(out, "writers waiting: 1\n")
	}, 5*time.Second, 50*time.Millisecond, "the writer never showed as waiting: %s", out)
	assert.Regexp(t, `writers waiting: 1\n  1\. writer, deadline in (\d+ms|[1-5](\.\d+)?s), label "[^"]+ pid \d+"\n$`, out)
	code, _, stderr = e.run("exec", "--read", "--wait", "0", "cfg", "--", "true")
	assert.Equal(t, exitTempFail, code, "a new reader got in before the waiting writer")
	assert.Equal(t, "rlock: rw_mutex \"cfg\" is held for writing, or a writer waits\n", stderr)
	// A reader that holds already re-enters, writer or not.
	code, _, stderr = e.run("exec", "--read", "--owner", "reader-1", "--wait", "0", "cfg", "--", "true")
	assert.Equal(t, 0, code, "stderr: %s", stderr)

	for _, r := range []*proc{r1, r2} {
		r.signal(t, syscall.SIGTERM)
		r.expect(t, "got-term", 2*time.Second)
		assert.Equal(t, 0, r.wait(t, 5*time.Second))
	}
	writer.expect(t, "written", 5*time.Second)
	assert.Equal(t, 0, writer.wait(t, 5*time.Second))
	code, out, _ = e.run("status", "cfg")
	assert.Equal(t, exitFree, code)
	assert.Equal(t, "cfg: free (key "+wire.LockKey(e.prefix, "cfg")+")\n", out)
}

// TestExec_writerStatus: status of a write hold, and of a writer that also reads (through
// --owner, from its CMD): the writer line first; a reader-only owner asking to write is
// refused (64) without waiting.
func TestExec_writerStatus(t *testing.T) {
	e := newEnv(t)
	w := e.start("exec", "--write", "--owner", "wr", "doc", "--", "sh", "-c", holdScript, "sh", "0")
	w.expect(t, "ready", 5*time.Second)
	code, out, stderr := e.run("status", "doc")
	assert.Equal(t, exitHeld, code, "stderr: %s", stderr)
	assert.Regexp(t, `^doc: rw_mutex held for writing \(key .*\)\nwriter wr: 1 hold, lease (1\d\.\d+|2\d\.\d+|30(\.0+)?)s left`+labelled+`$`, out)

	// The writer's CMD takes a read hold as the same owner (at once) and shows the status.
	nested := append([]string{"--read", "--owner", "wr", "--wait", "0", "doc", "--", rlockBin}, e.argv("status", "doc")...)
	code, out, stderr = e.run("exec", nested...)
	assert.Equal(t, exitHeld, code, "stderr: %s", stderr)
	assert.Regexp(t, `^doc: rw_mutex held for writing .*\nwriter wr: 1 hold, lease .*\nreader wr: 1 hold, lease .*\n$`, out)
	w.signal(t, syscall.SIGTERM)
	w.expect(t, "got-term", 2*time.Second)
	assert.Equal(t, 0, w.wait(t, 5*time.Second))

	// An upgrade: a reader's CMD asks to write as the same owner.
	upgrade := append([]string{"--read", "--owner", "rd", "doc", "--", rlockBin},
		e.argv("exec", "--write", "--owner", "rd", "doc", "--", "true")...)
	start := time.Now()
	code, _, stderr = e.run("exec", upgrade...)
	assert.Equal(t, exitUsage, code, "stderr: %s", stderr)
	assert.Less(t, time.Since(start), 3*time.Second, "refused at once")
	assert.Contains(t, stderr, `rlock: rw_mutex "doc": invalid argument: owner "rd" holds it only for reading`)
	assert.Contains(t, stderr, "Run 'rlock help' for usage.")
}

// TestExec_semaphore: --semaphore 2 lets two CMDs run together; a third finds no permit
// (--wait 0: 75) and waits otherwise, getting in when one ends; status shows the holds;
// a client with another permit count is refused (64); CMD gets an empty RLOCK_OWNER.
func TestExec_semaphore(t *testing.T) {
	e := newEnv(t)
	h1 := e.start("exec", "--semaphore", "2", "pool", "--", "sh", "-c", holdScript, "sh", "0")
	h1.expect(t, "ready", 5*time.Second)
	h2 := e.start("exec", "--semaphore", "2", "--wait", "0", "pool", "--", "sh", "-c", holdScript, "sh", "0")
	h2.expect(t, "ready", 5*time.Second)

	code, _, stderr := e.run("exec", "--semaphore", "2", "--wait", "0", "pool", "--", "true")
	assert.Equal(t, exitTempFail, code)
	assert.Equal(t, "rlock: semaphore \"pool\" has no free permit of 2 (or others wait before)\n", stderr)
	code, _, stderr = e.run("exec", "--semaphore", "2", "--wait", "300ms", "pool", "--", "true")
	assert.Equal(t, exitTempFail, code)
	assert.Equal(t, "rlock: semaphore \"pool\" has no free permit of 2 (or others wait before); gave up after 300ms\n", stderr)

	code, _, stderr = e.run("exec", "--semaphore", "3", "--wait", "0", "pool", "--", "true")
	assert.Equal(t, exitUsage, code, "stderr: %s", stderr)
	assert.Equal(t, "rlock: semaphore \"pool\": invalid argument: the semaphore is in use with 2 permits, not 3\n"+
		"Run 'rlock help' for usage.\n", stderr)

	code, out, stderr := e.run("status", "pool")
	assert.Equal(t, exitHeld, code, "stderr: %s", stderr)
	hold := `hold \S+: 1 permit, lease (1\d\.\d+|2\d\.\d+|30(\.0+)?)s left` + labelled
	assert.Regexp(t, `^pool: semaphore, 2 of 2 permits out \(key `+regexp.QuoteMeta(e.prefix)+`:\{pool\}\)\n`+hold+hold+`$`, out)

	third := e.start("exec", "--semaphore", "2", "pool", "--", "sh", "-c", `echo "in [$RLOCK_NAME] [$RLOCK_OWNER]"`)
	require.Eventually(t, func() bool {
		_, out, _ = e.run("status", "pool")
		return strings.Contains(out, "queue: 1 waiting\n")
	}, 5*time.Second, 50*time.Millisecond, "the third never showed in the queue: %s", out)
	assert.Regexp(t, `queue: 1 waiting\n  1\. \S+, deadline in (\d+ms|[1-5](\.\d+)?s), label "[^"]+ pid \d+"\n$`, out)
	third.quiet(t, 200*time.Millisecond)
	h1.signal(t, syscall.SIGTERM)
	h1.expect(t, "got-term", 2*time.Second)
	assert.Equal(t, 0, h1.wait(t, 5*time.Second))
	third.expect(t, "in [pool] []", 5*time.Second)
	assert.Equal(t, 0, third.wait(t, 5*time.Second))

	h2.signal(t, syscall.SIGTERM)
	h2.expect(t, "got-term", 2*time.Second)
	assert.Equal(t, 0, h2.wait(t, 5*time.Second))
	code, _, _ = e.run("status", "pool")
	assert.Equal(t, exitFree, code)
}

// TestExec_semaphoreLimit runs 5 rlock exec loops on a semaphore of 2 permits: never more than
// 2 CMDs at once, and 2 at once at some point.
func TestExec_semaphoreLimit(t *testing.T) {
	e := newEnv(t)
	logFile := filepath.Join(e.dir, "log")
	const loops, rounds = 5, 3
	var wg sync.WaitGroup
	for range loops {
		wg.Go(func() {
			for range rounds {
				code, _, stderr := e.run("exec", "--semaphore", "2", "lim", "--", "sh", "-c", logScript, "sh", logFile, "s")
				assert.Equal(t, 0, code, "stderr: %s", stderr)
			}
		})
	}
	wg.Wait()
	most, _, runs := checkLog(t, logFile)
	assert.Equal(t, loops*rounds, runs["s"])
	assert.LessOrEqual(t, most, 2, "more CMDs at once than permits")
	assert.Equal(t, 2, most, "the two permits were never used together")
}

// TestExec_killedHolderKinds kills -9 an rlock exec holding a read hold (a writer waits) or a
// semaphore's only permit (another waits), with a 1s watchdog lease: the waiter gets in once
// the lease ran out, not before half a second, within 1.5s.
func TestExec_killedHolderKinds(t *testing.T) {
	for _, tc := range []struct {
		name           string
		holder, waiter []string
	}{
		{"reader", []string{"--read"}, []string{"--write"}},
		{"writer", []string{"--write"}, []string{"--read"}},
		{"semaphore", []string{"--semaphore", "1"}, []string{"--semaphore", "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			holder := e.start("exec", append(tc.holder, "--watchdog", "1s", "k", "--", "sh", "-c", `echo ready; exec sleep 30`)...)
			holder.expect(t, "ready", 5*time.Second)
			waiter := e.start("exec", append(tc.waiter, "--watchdog", "1s", "k", "--", "echo", "in")...)
			waiter.quiet(t, 500*time.Millisecond)

			require.NoError(t, syscall.Kill(-holder.cmd.Process.Pid, syscall.SIGKILL))
			killed := time.Now()
			in := waiter.expect(t, "in", 3*time.Second)
			took := in.Sub(killed)
			assert.Greater(t, took, 500*time.Millisecond, "the waiter got in before the holder's lease ran out")
			assert.Less(t, took, 1500*time.Millisecond, "the waiter got in later than a lease after the kill")
			assert.Equal(t, 0, waiter.wait(t, 5*time.Second))
		})
	}
}

// TestExec_forceUnlockRW: unlock --force of a read-write lock held for reading by two rlock
// exec stops both CMDs (SIGTERM; exit 79); of one held for writing, the writer's.
func TestExec_forceUnlockRW(t *testing.T) {
	e := newEnv(t)
	var readers []*proc
	for range 2 {
		r := e.start("exec", "--read", "--watchdog", "1s", "f", "--", "sh", "-c", holdScript, "sh", "0")
		r.expect(t, "ready", 5*time.Second)
		readers = append(readers, r)
	}
	code, out, stderr := e.run("unlock", "--force", "f")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Equal(t, "f: was locked; deleted\n", out)
	for _, r := range readers {
		r.expect(t, "got-term", 2*time.Second)
		assert.Equal(t, exitLost, r.wait(t, 5*time.Second))
		assert.Contains(t, r.stderr.String(), `rlock: rw_mutex "f" lost while CMD ran`)
	}

	w := e.start("exec", "--write", "--fair", "--watchdog", "1s", "f", "--", "sh", "-c", holdScript, "sh", "0")
	w.expect(t, "ready", 5*time.Second)
	code, out, stderr = e.run("unlock", "--force", "f")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Equal(t, "f: was locked; deleted\n", out)
	w.expect(t, "got-term", 2*time.Second)
	assert.Equal(t, exitLost, w.wait(t, 5*time.Second))
	assert.Contains(t, w.stderr.String(), `rlock: fair_rw_mutex "f" lost while CMD ran`)

	code, out, _ = e.run("unlock", "--force", "f")
	assert.Equal(t, exitFree, code)
	assert.Equal(t, "f: was not locked\n", out)
}

// TestExec_leaseEndsKinds: with --lease, a read hold's and a permit's CMD is stopped when the
// lease ends, and rlock exits with --lost-exit.
func TestExec_leaseEndsKinds(t *testing.T) {
	e := newEnv(t)
	for i, kind := range [][]string{{"--read"}, {"--write", "--fair"}, {"--semaphore", "3"}} {
		name := fmt.Sprintf("l%d", i)
		p := e.start("exec", append(kind, "--lease", "600ms", "--lost-exit", "9", name, "--", "sh", "-c", holdScript, "sh", "0")...)
		started := p.expect(t, "ready", 5*time.Second)
		p.expect(t, "got-term", 3*time.Second)
		assert.Equal(t, 9, p.wait(t, 5*time.Second), "%q", kind)
		assert.Greater(t, time.Since(started), 500*time.Millisecond, "%q", kind)
		assert.Contains(t, p.stderr.String(), "lost while CMD ran (lease ended", "%q", kind)
	}
}

// TestStatus_fairRWQueue: status of a fair read-write lock lists its queue with each entry's
// mode.
func TestStatus_fairRWQueue(t *testing.T) {
	e := newEnv(t)
	w := e.start("exec", "--write", "--fair", "--owner", "w1", "q", "--", "sh", "-c", holdScript, "sh", "0")
	w.expect(t, "ready", 5*time.Second)
	r := e.start("exec", "--read", "--fair", "--owner", "r1", "q", "--", "echo", "read")
	var out string
	require.Eventually(t, func() bool {
		_, out, _ = e.run("status", "q")
		return strings.Contains(out, "queue: 1 waiting\n")
	}, 5*time.Second, 50*time.Millisecond, "the reader never showed in the queue: %s", out)
	assert.Regexp(t, `^q: fair_rw_mutex held for writing .*\nwriter w1: 1 hold, lease .*\nqueue: 1 waiting\n  1\. r1 \(read\), deadline in .*\n$`, out)
	w.signal(t, syscall.SIGTERM)
	w.expect(t, "got-term", 2*time.Second)
	assert.Equal(t, 0, w.wait(t, 5*time.Second))
	r.expect(t, "read", 5*time.Second)
	assert.Equal(t, 0, r.wait(t, 5*time.Second))
	code, out, _ := e.run("status", "--fair", "q")
	assert.Equal(t, exitFree, code)
	assert.Equal(t, "q: free (key "+wire.LockKey(e.prefix, "q")+")\nqueue: empty\n", out)
}

// TestExec_forceUnlockSemaphore: unlock --force of a semaphore ends every hold (their CMDs get
// SIGTERM, exit 79) and lets a queued waiter in at once; the permit count stays checked while
// it waits.
func TestExec_forceUnlockSemaphore(t *testing.T) {
	e := newEnv(t)
	var holders []*proc
	for range 2 {
		h := e.start("exec", "--semaphore", "2", "--watchdog", "3s", "sem", "--", "sh", "-c", holdScript, "sh", "0")
		h.expect(t, "ready", 5*time.Second)
		holders = append(holders, h)
	}
	waiter := e.start("exec", "--semaphore", "2", "sem", "--", "echo", "in")
	var out string
	require.Eventually(t, func() bool {
		_, out, _ = e.run("status", "sem")
		return strings.Contains(out, "queue: 1 waiting\n")
	}, 5*time.Second, 50*time.Millisecond, "the waiter never showed in the queue: %s", out)

	code, out, stderr := e.run("unlock", "--force", "sem")
	forced := time.Now()
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Equal(t, "sem: was locked; deleted\n", out)
	in := waiter.expect(t, "in", 3*time.Second)
	assert.Less(t, in.Sub(forced), time.Second, "the waiter was not woken")
	assert.Equal(t, 0, waiter.wait(t, 5*time.Second))
	for _, h := range holders {
		h.expect(t, "got-term", 3*time.Second) // the next renewal, a third of the lease on
		assert.Equal(t, exitLost, h.wait(t, 5*time.Second))
		assert.Contains(t, h.stderr.String(), `rlock: semaphore "sem" lost while CMD ran`)
	}
	code, out, _ = e.run("unlock", "--force", "sem")
	assert.Equal(t, exitFree, code)
	assert.Equal(t, "sem: was not locked\n", out)
}

// TestExec_wrongKind: exec refuses (64), without running CMD, to take a name as another kind
// than the one that holds it in Redis, and its advice names the kind found and the flags that
// take that kind (not the flags given).
func TestExec_wrongKind(t *testing.T) {
	e := newEnv(t)
	marker := filepath.Join(e.dir, "ran")
	for _, tc := range []struct {
		holder []string
		others [][]string
		msg    string
	}{
		{nil, [][]string{{"--read"}, {"--write"}, {"--semaphore", "2"}},
			"is a mutex in Redis (key %s): take it without --read, --write or --semaphore, as everyone using it must"},
		{[]string{"--read"}, [][]string{{}, {"--semaphore", "2"}},
			"is a rw_mutex in Redis (key %s): take it with --read or --write, as everyone using it must"},
		{[]string{"--semaphore", "2"}, [][]string{{}, {"--write"}},
			"is a semaphore in Redis (key %s): take it with --semaphore N, as everyone using it must"},
	} {
		h := e.start("exec", append(tc.holder, "kind", "--", "sh", "-c", holdScript, "sh", "0")...)
		h.expect(t, "ready", 5*time.Second)
		for _, o := range tc.others {
			code, _, stderr := e.run("exec", append(o, "--wait", "0", "kind", "--", "touch", marker)...)
			assert.Equal(t, exitUsage, code, "%q on %q: stderr: %s", o, tc.holder, stderr)
			assert.Contains(t, stderr, `rlock: lock "kind" `+fmt.Sprintf(tc.msg, wire.LockKey(e.prefix, "kind"))+"\n", "%q on %q", o, tc.holder)
			assert.NoFileExists(t, marker)
		}
		h.signal(t, syscall.SIGTERM)
		h.expect(t, "got-term", 2*time.Second)
		assert.Equal(t, 0, h.wait(t, 5*time.Second))
	}
}
