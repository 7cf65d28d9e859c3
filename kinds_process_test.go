package rlock_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
)

// Tests of the read-write mutex and the semaphore across real OS processes (re-executions of the
// test binary, see startChild): exclusion checked from an append-only log, and the delay a
// process killed with SIGKILL causes the others.

// kindsHelpers are the child processes' helpers of these tests; runHelper hands every name
// starting with "kinds-" to runKindsHelper.
var kindsHelpers = map[string]func(c *rlock.Client) error{
	"kinds-rwlog":     kindsRWLog,
	"kinds-semlog":    kindsSemLog,
	"kinds-rhold":     kindsRHold,
	"kinds-semhold":   kindsSemHold,
	"kinds-rwwait":    kindsRWWait,
	"kinds-semwait":   kindsSemWait,
	"kinds-rwreenter": kindsRWReenter,
}

// runKindsHelper is main() of a child process running one of kindsHelpers. Its environment:
// PREFIX, LOCK, KIND (plain or fair read-write mutex), PERMITS (semaphore), WAIT (spin or
// pubsub), WATCHDOG and FAIRWAIT (durations), and each helper's own variables.
func runKindsHelper(name string) int {
	f := kindsHelpers[name]
	if f == nil {
		fmt.Fprintln(os.Stderr, "no helper", name)
		return 2
	}
	rc, c, err := helperClients()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer rc.Close()
	defer c.Close()
	if err := f(c); err != nil {
		fmt.Fprintln(os.Stderr, "helper", name, "failed:", err)
		return 1
	}
	return 0
}

// kindsChildEnv is the environment of a child for the lock called name in e.
func kindsChildEnv(e *env, name string, wait rlock.WaitStrategy, extra ...string) []string {
	w := "pubsub"
	if strings.HasPrefix(wait.String(), "spin") {
		w = "spin"
	}
	// A race-enabled child sleeps 1s at exit by default (atexit_sleep_ms): not ours to wait for.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	return append([]string{"PREFIX=" + e.Prefix, "LOCK=" + name, "WAIT=" + w, "GORACE=" + gorace}, extra...)
}

// kindsRWMutex is the child's read-write mutex: LOCK, of kind KIND.
func kindsRWMutex(c *rlock.Client) *rlock.RWMutex {
	if os.Getenv("KIND") == "fair" {
		return c.NewFairRWMutex(os.Getenv("LOCK"))
	}
	return c.NewRWMutex(os.Getenv("LOCK"))
}

// kindsSemaphore is the child's semaphore: LOCK, with PERMITS permits.
func kindsSemaphore(c *rlock.Client) *rlock.Semaphore {
	permits, _ := strconv.ParseInt(os.Getenv("PERMITS"), 10, 64)
	return c.NewSemaphore(os.Getenv("LOCK"), permits)
}

// envInt is the integer in the environment variable name.
func envInt(name string) int64 {
	n, _ := strconv.ParseInt(os.Getenv(name), 10, 64)
	return n
}

// kindsLog appends lines to the file LOG, each with one write(2) on an O_APPEND descriptor, so
// the lines of all processes are in the order they were written.
type kindsLog struct {
	f  *os.File
	id string
}

func openKindsLog() (*kindsLog, error) {
	f, err := os.OpenFile(os.Getenv("LOG"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &kindsLog{f: f, id: strconv.Itoa(os.Getpid())}, nil
}

// line appends "event mode n pid".
func (l *kindsLog) line(event, mode string, n int64) error {
	_, err := l.f.Write([]byte(fmt.Sprintf("%s %s %d %s\n", event, mode, n, l.id)))
	return err
}

// section runs a critical section: it logs its entry, works briefly, and logs its exit.
func (l *kindsLog) section(mode string, n int64) error {
	if err := l.line("enter", mode, n); err != nil {
		return err
	}
	time.Sleep(500 * time.Microsecond)
	return l.line("exit", mode, n)
}

// kindsRWLog first takes a read hold and keeps it until told (a line on stdin), so that all
// processes read together; then it takes ITERS holds, a quarter of them write holds, logging
// each section.
func kindsRWLog(c *rlock.Client) error {
	m := kindsRWMutex(c)
	log, err := openKindsLog()
	if err != nil {
		return err
	}
	defer log.f.Close()
	h, err := m.RLock(bg)
	if err != nil {
		return err
	}
	if err := log.line("enter", "r", 1); err != nil {
		return err
	}
	fmt.Println("reading")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return err
	}
	if err := log.line("exit", "r", 1); err != nil {
		return err
	}
	if err := m.RUnlock(h); err != nil {
		return err
	}
	for range envInt("ITERS") {
		mode, lock, unlock := "r", m.RLock, m.RUnlock
		if rand.IntN(4) == 0 {
			mode, lock, unlock = "w", m.Lock, m.Unlock
		}
		h, err := lock(bg)
		if err != nil {
			return err
		}
		if err := log.section(mode, 1); err != nil {
			return err
		}
		if err := unlock(h); err != nil {
			return err
		}
	}
	return nil
}

// kindsSemLog takes 1 or 2 permits ITERS times, logging each section.
func kindsSemLog(c *rlock.Client) error {
	s := kindsSemaphore(c)
	log, err := openKindsLog()
	if err != nil {
		return err
	}
	defer log.f.Close()
	fmt.Println("ready")
	for range envInt("ITERS") {
		n := 1 + rand.Int64N(2)
		h, err := s.Acquire(bg, n)
		if err != nil {
			return err
		}
		if err := log.section("s", n); err != nil {
			return err
		}
		if err := s.Release(h); err != nil {
			return err
		}
	}
	return nil
}

// kindsRHold takes a read hold and keeps it until killed.
func kindsRHold(c *rlock.Client) error {
	if _, err := kindsRWMutex(c).RLock(bg); err != nil {
		return err
	}
	fmt.Println("locked")
	select {}
}

// kindsSemHold takes N permits and keeps them until killed.
func kindsSemHold(c *rlock.Client) error {
	if _, err := kindsSemaphore(c).Acquire(bg, envInt("N")); err != nil {
		return err
	}
	fmt.Println("acquired")
	select {}
}

// kindsRWWait says "waiting" and takes a write hold (MODE=w) or a read hold, and keeps it.
func kindsRWWait(c *rlock.Client) error {
	m := kindsRWMutex(c)
	lock := m.RLock
	if os.Getenv("MODE") == "w" {
		lock = m.Lock
	}
	fmt.Println("waiting")
	if _, err := lock(bg); err != nil {
		return err
	}
	fmt.Println("locked")
	select {}
}

// kindsSemWait says "waiting" and takes N permits, and keeps them.
func kindsSemWait(c *rlock.Client) error {
	fmt.Println("waiting")
	if _, err := kindsSemaphore(c).Acquire(bg, envInt("N")); err != nil {
		return err
	}
	fmt.Println("acquired")
	select {}
}

// kindsRWReenter re-enters, with a single attempt, a read hold of the owner OWNER that the
// parent holds, reports the owner's hold counts, and releases its hold.
func kindsRWReenter(c *rlock.Client) error {
	m := kindsRWMutex(c)
	h, err := m.TryRLock(rlock.WithOwner(bg, os.Getenv("OWNER")), 0)
	if err != nil {
		return fmt.Errorf("re-entry: %w", err)
	}
	r, w, err := m.HoldCount(h)
	if err != nil {
		return err
	}
	fmt.Println("holds", r, w)
	if err := m.RUnlock(h); err != nil {
		return err
	}
	r, w, err = m.HoldCount(h)
	if err != nil {
		return err
	}
	fmt.Println("holds", r, w)
	return nil
}

// kindsLogLine is one line of a kindsLog.
type kindsLogLine struct {
	event, mode string
	n           int64
	pid         string
}

// readKindsLog parses the log at path.
func readKindsLog(t *testing.T, path string) []kindsLogLine {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var lines []kindsLogLine
	for _, s := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		f := strings.Fields(s)
		require.Len(t, f, 4, "log line %q", s)
		n, err := strconv.ParseInt(f[2], 10, 64)
		require.NoError(t, err)
		lines = append(lines, kindsLogLine{f[0], f[1], n, f[3]})
	}
	return lines
}

// TestKinds_rwExclusionAcrossProcesses: 4 processes first hold read holds together, then take
// read and write holds at random; the append-only log shows every writer alone and readers
// together.
func TestKinds_rwExclusionAcrossProcesses(t *testing.T) {
	eachRWKindAndStrategy(t, func(t *testing.T, k rwKind, wait rlock.WaitStrategy) {
		e := newEnv(t)
		const procs, iters = 4, 30
		logPath := filepath.Join(t.TempDir(), "log")
		children := make([]*redistest.Child, procs)
		for i := range children {
			children[i] = redistest.StartChild(t, "kinds-rwlog", kindsChildEnv(e, "x", wait,
				"KIND="+k.name, "LOG="+logPath, "ITERS="+strconv.Itoa(iters))...)
		}
		for _, c := range children {
			c.Expect(t, "reading")
		}
		n, err := k.new(e.client(rlock.Options{}), "x").Readers(bg)
		require.NoError(t, err)
		assert.Equal(t, procs, n, "every process reads at once")
		for _, c := range children {
			_, err := io.WriteString(c.In, "go\n")
			require.NoError(t, err)
		}
		for _, c := range children {
			c.Wait(t)
		}

		readers := map[string]int{}
		inside, writer, most, writes, sections := 0, "", 0, 0, 0
		for i, l := range readKindsLog(t, logPath) {
			switch l.event + " " + l.mode {
			case "enter r":
				require.Empty(t, writer, "line %d: a reader entered while %s wrote", i, writer)
				readers[l.pid]++
				inside++
				most = max(most, inside)
				sections++
			case "exit r":
				require.Positive(t, readers[l.pid], "line %d: exit without entry", i)
				readers[l.pid]--
				inside--
			case "enter w":
				require.Empty(t, writer, "line %d: two writers", i)
				require.Zero(t, inside, "line %d: a writer entered while %v read", i, readers)
				writer = l.pid
				writes++
				sections++
			case "exit w":
				require.Equal(t, l.pid, writer, "line %d", i)
				writer = ""
			default:
				t.Fatalf("line %d: %v", i, l)
			}
		}
		assert.Equal(t, procs*(iters+1), sections, "every section is in the log")
		assert.Zero(t, inside)
		assert.Equal(t, procs, most, "the log shows the readers together")
		t.Logf("%d sections, %d of them writes, checked", sections, writes)
	})
}

// TestKinds_semaphoreExclusionAcrossProcesses: 4 processes take 1 or 2 of 3 permits in a loop;
// the append-only log never shows more than 3 out.
func TestKinds_semaphoreExclusionAcrossProcesses(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		const procs, iters, permits = 4, 30, 3
		logPath := filepath.Join(t.TempDir(), "log")
		children := make([]*redistest.Child, procs)
		for i := range children {
			children[i] = redistest.StartChild(t, "kinds-semlog", kindsChildEnv(e, "s", wait,
				"PERMITS="+strconv.Itoa(permits), "LOG="+logPath, "ITERS="+strconv.Itoa(iters))...)
		}
		for _, c := range children {
			c.Expect(t, "ready")
		}
		for _, c := range children {
			c.Wait(t)
		}
		var out, most int64
		sections := 0
		held := map[string]int64{}
		for i, l := range readKindsLog(t, logPath) {
			switch l.event {
			case "enter":
				out += l.n
				held[l.pid] += l.n
				require.LessOrEqual(t, out, int64(permits), "line %d: more than %d permits out: %v", i, permits, held)
				most = max(most, out)
				sections++
			case "exit":
				out -= l.n
				held[l.pid] -= l.n
				require.GreaterOrEqual(t, held[l.pid], int64(0), "line %d", i)
			}
		}
		assert.Equal(t, procs*iters, sections, "every section is in the log")
		assert.Zero(t, out)
		assert.Greater(t, most, int64(1), "the processes held permits together")
		t.Logf("%d sections checked; at most %d of %d permits out", sections, most, permits)
		requireAvailable(t, e.client(rlock.Options{}).NewSemaphore("s", permits), permits, "all permits back")
	})
}

// TestKinds_rwCrossProcessReentry: another process re-enters a read hold with the holder's owner
// id, at once although a writer waits, and its release is partial.
func TestKinds_rwCrossProcessReentry(t *testing.T) {
	eachRWKind(t, func(t *testing.T, k rwKind) {
		e := newEnv(t)
		m := k.new(e.client(rlock.Options{}), "xre")
		owner := rlock.NewOwnerID()
		r, err := m.RLock(rlock.WithOwner(bg, owner))
		require.NoError(t, err)
		wrote := goAcquire(func() (context.Context, error) { return m.Lock(bg) })
		e.awaitRWWaiters(k, "xre", 1)

		c := redistest.StartChild(t, "kinds-rwreenter", kindsChildEnv(e, "xre", rlock.PubSub(), "KIND="+k.name, "OWNER="+owner)...)
		c.Expect(t, "holds 2 0")
		c.Expect(t, "holds 1 0")
		c.Wait(t)
		require.NoError(t, r.Err(), "the other process's release was partial")
		requireRWState(t, m, r, false, 1, 1, 0)
		require.NoError(t, m.RUnlock(r))
		w := requireGranted(t, wrote, 5*time.Second, "the writer")
		require.NoError(t, m.Unlock(w))
	})
}

// TestKinds_killedReader kills (SIGKILL) a process holding a read hold beside a live reader:
// the dead hold ends with its lease, the live one stays, and a writer gets in after both.
func TestKinds_killedReader(t *testing.T) {
	inParallel(t, func(t *testing.T, k rwKind, wait rlock.WaitStrategy) {
		e := newEnv(t)
		const timeout = time.Second
		c := redistest.StartChild(t, "kinds-rhold", kindsChildEnv(e, "k", wait, "KIND="+k.name, "WATCHDOG="+timeout.String())...)
		c.Expect(t, "locked")
		m := k.new(e.client(rlock.Options{Wait: wait, WatchdogTimeout: timeout}), "k")
		r, err := m.RLock(bg)
		require.NoError(t, err)
		requireRWState(t, m, r, false, 2, 1, 0)

		require.NoError(t, c.Cmd.Process.Kill())
		killed := time.Now()
		wrote := goAcquire(func() (context.Context, error) { return m.TryLock(bg, 5*timeout) })
		require.Eventually(t, func() bool {
			n, err := m.Readers(bg)
			return err == nil && n == 1
		}, 3*timeout, 5*time.Millisecond, "the dead reader's hold ends")
		gone := time.Since(killed)
		require.NoError(t, r.Err(), "the live reader keeps its hold")
		requireRWState(t, m, r, false, 1, 1, 0)
		requireNone(t, 0, "the writer beside a live reader", wrote)
		require.NoError(t, m.RUnlock(r))
		res := awaitResult(t, wrote, 5*timeout, "the writer")
		require.NoError(t, res.err)
		d := res.at.Sub(killed)
		t.Logf("MEASURE kill-reader-delay: %s/%s: a writer waited %v after the kill (dead read hold gone after %v; WatchdogTimeout %v)",
			k.name, wait, d, gone, timeout)
		assert.Less(t, d, timeout+timeout/2, "the dead reader delays the writer by at most its lease")
		require.NoError(t, m.Unlock(res.h))
	})
}

// TestKinds_killedWriter kills (SIGKILL) a process holding a write hold: a waiting reader gets
// in when its lease ends.
func TestKinds_killedWriter(t *testing.T) {
	inParallel(t, func(t *testing.T, k rwKind, wait rlock.WaitStrategy) {
		e := newEnv(t)
		const timeout = time.Second
		c := redistest.StartChild(t, "kinds-rwwait", kindsChildEnv(e, "k", wait, "KIND="+k.name, "MODE=w", "WATCHDOG="+timeout.String())...)
		c.Expect(t, "waiting")
		c.Expect(t, "locked")
		m := k.new(e.client(rlock.Options{Wait: wait, WatchdogTimeout: timeout}), "k")
		read := goAcquire(func() (context.Context, error) { return m.RLock(bg) })
		requireNone(t, 50*time.Millisecond, "a reader behind a writer", read)

		require.NoError(t, c.Cmd.Process.Kill())
		killed := time.Now()
		res := awaitResult(t, read, 5*timeout, "the reader")
		require.NoError(t, res.err)
		d := res.at.Sub(killed)
		t.Logf("MEASURE kill-writer-delay: %s/%s: a reader waited %v after the kill (WatchdogTimeout %v)", k.name, wait, d, timeout)
		assert.Less(t, d, timeout+timeout/2, "the dead writer delays readers by at most its lease")
		requireRWState(t, m, res.h, false, 1, 1, 0)
		require.NoError(t, m.RUnlock(res.h))
	})
}

// TestKinds_killedSemaphoreHolder kills (SIGKILL) a process holding every permit: they come back
// when its lease ends.
func TestKinds_killedSemaphoreHolder(t *testing.T) {
	strategiesInParallel(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		const timeout, permits = time.Second, 3
		c := redistest.StartChild(t, "kinds-semhold", kindsChildEnv(e, "k", wait,
			"PERMITS="+strconv.Itoa(permits), "N="+strconv.Itoa(permits), "WATCHDOG="+timeout.String())...)
		c.Expect(t, "acquired")
		s := e.client(rlock.Options{Wait: wait, WatchdogTimeout: timeout}).NewSemaphore("k", permits)
		requireAvailable(t, s, 0, "the child holds every permit")

		require.NoError(t, c.Cmd.Process.Kill())
		killed := time.Now()
		h, err := s.TryAcquire(bg, permits, 5*timeout)
		require.NoError(t, err)
		d := time.Since(killed)
		t.Logf("MEASURE kill-semaphore-holder-delay: %s: %v (WatchdogTimeout %v)", wait, d, timeout)
		assert.Less(t, d, timeout+timeout/2, "the dead holder's permits come back within its lease")
		require.NoError(t, s.Release(h))
	})
}

// TestKinds_killedQueuedWaiter kills (SIGKILL) a process that waits where others wait behind it
// (a fair read-write mutex's queue, a writer holding back readers, a semaphore's queue): the
// waiter behind it is delayed by about FairWaitTimeout at most. The kill comes more than a
// third of FairWaitTimeout after the live waiter queued, so the dead one has refreshed its
// place (it polls every third) after the live one's last attempt: the worst case for the live
// one, which must not sleep past the dead entry's end.
func TestKinds_killedQueuedWaiter(t *testing.T) {
	const fairWait = time.Second
	for _, tc := range []struct {
		name string
		// run makes the child's waiter head the line with a live waiter behind it, kills the
		// child, lets the live waiter in were the dead one gone, and measures its delay.
		run func(t *testing.T, e *env, wait rlock.WaitStrategy, kill func(c *redistest.Child, deadlines string) kindsKill)
	}{
		{"fair_rw", func(t *testing.T, e *env, wait rlock.WaitStrategy, kill func(c *redistest.Child, deadlines string) kindsKill) {
			k := rwKinds[1]
			m := k.new(e.client(rlock.Options{Wait: wait, FairWaitTimeout: fairWait}), "q")
			w0, err := m.Lock(bg)
			require.NoError(t, err)
			c := redistest.StartChild(t, "kinds-rwwait", kindsChildEnv(e, "q", wait, "KIND=fair", "MODE=w", "FAIRWAIT="+fairWait.String())...)
			c.Expect(t, "waiting")
			e.awaitRWWaiters(k, "q", 1)
			behind := goAcquire(func() (context.Context, error) { return m.RLock(bg) })
			e.awaitRWWaiters(k, "q", 2)
			requireNone(t, fairWait/3+100*time.Millisecond, "the waiter behind", behind)
			killed := kill(c, e.kindBase("q")+":deadlines")
			require.NoError(t, m.Unlock(w0))
			h := kindsMeasureQueued(t, "fair_rw", wait, behind, killed, fairWait)
			require.NoError(t, m.RUnlock(h))
		}},
		{"plain_rw", func(t *testing.T, e *env, wait rlock.WaitStrategy, kill func(c *redistest.Child, deadlines string) kindsKill) {
			k := rwKinds[0]
			m := k.new(e.client(rlock.Options{Wait: wait, FairWaitTimeout: fairWait}), "q")
			r0, err := m.RLock(bg)
			require.NoError(t, err)
			c := redistest.StartChild(t, "kinds-rwwait", kindsChildEnv(e, "q", wait, "KIND=plain", "MODE=w", "FAIRWAIT="+fairWait.String())...)
			c.Expect(t, "waiting")
			e.awaitRWWaiters(k, "q", 1)
			behind := goAcquire(func() (context.Context, error) { return m.RLock(bg) })
			requireNone(t, fairWait/3+100*time.Millisecond, "the waiter behind", behind)
			killed := kill(c, e.kindBase("q")+":writers")
			h := kindsMeasureQueued(t, "plain_rw", wait, behind, killed, fairWait)
			require.NoError(t, m.RUnlock(h))
			require.NoError(t, m.RUnlock(r0))
		}},
		{"semaphore", func(t *testing.T, e *env, wait rlock.WaitStrategy, kill func(c *redistest.Child, deadlines string) kindsKill) {
			s := e.client(rlock.Options{Wait: wait, FairWaitTimeout: fairWait}).NewSemaphore("q", 2)
			h1, err := s.Acquire(bg, 1)
			require.NoError(t, err)
			h2, err := s.Acquire(bg, 1)
			require.NoError(t, err)
			c := redistest.StartChild(t, "kinds-semwait", kindsChildEnv(e, "q", wait, "PERMITS=2", "N=2", "FAIRWAIT="+fairWait.String())...)
			c.Expect(t, "waiting")
			e.awaitSemQueue("q", 1)
			behind := goAcquire(func() (context.Context, error) { return s.Acquire(bg, 1) })
			e.awaitSemQueue("q", 2)
			requireNone(t, fairWait/3+100*time.Millisecond, "the waiter behind", behind)
			killed := kill(c, e.kindBase("q")+":deadlines")
			require.NoError(t, s.Release(h1))
			h := kindsMeasureQueued(t, "semaphore", wait, behind, killed, fairWait)
			require.NoError(t, s.Release(h))
			require.NoError(t, s.Release(h2))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			strategiesInParallel(t, func(t *testing.T, wait rlock.WaitStrategy) {
				e := newEnv(t)
				tc.run(t, e, wait, func(c *redistest.Child, deadlines string) kindsKill {
					// The dead waiter's entry is the one that ends first: the live one behind it
					// polled last.
					require.NoError(t, c.Cmd.Process.Kill())
					k := kindsKill{at: time.Now()}
					k.entryEnd = e.firstDeadline(deadlines)
					return k
				})
			})
		})
	}
}

// kindsKill is when a queued waiter was killed, and when its entry ends (FairWaitTimeout after
// its last poll).
type kindsKill struct {
	at, entryEnd time.Time
}

// firstDeadline returns, in local time, the earliest deadline (server ms) in the sorted set key.
func (e *env) firstDeadline(key string) time.Time {
	e.T.Helper()
	first, err := e.Do("ZRANGE", key, "0", "0", "WITHSCORES").AsZScores()
	require.NoError(e.T, err)
	require.Len(e.T, first, 1, "an entry in %s", key)
	ms := int64(first[0].Score)
	clock, err := e.Do("TIME").AsStrSlice()
	require.NoError(e.T, err)
	now := time.Now()
	sec, _ := strconv.ParseInt(clock[0], 10, 64)
	usec, _ := strconv.ParseInt(clock[1], 10, 64)
	return now.Add(time.UnixMilli(ms).Sub(time.Unix(sec, usec*1000)))
}

// kindsMeasureQueued waits for the live waiter behind a killed one and checks the delay: from
// the kill, at most FairWaitTimeout and a poll; from the end of the dead entry, at most a poll.
func kindsMeasureQueued(t *testing.T, kind string, wait rlock.WaitStrategy, behind <-chan kindsResult, killed kindsKill, fairWait time.Duration) context.Context {
	t.Helper()
	res := awaitResult(t, behind, 5*fairWait, "the waiter behind a killed one")
	require.NoError(t, res.err)
	d, late := res.at.Sub(killed.at), res.at.Sub(killed.entryEnd)
	t.Logf("MEASURE kill-queued-waiter-delay: %s/%s: %v (FairWaitTimeout %v; %v after the dead entry ended)", kind, wait, d, fairWait, late)
	assert.Less(t, d, fairWait+fairWait/2, "at most FairWaitTimeout plus a poll")
	assert.Less(t, late, fairWait/2, "the waiter behind did not sleep long past the dead entry's end")
	return res.h
}
