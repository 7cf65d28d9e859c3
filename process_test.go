package rlock_test

// Tests across real OS processes (re-executions of the test binary, see redistest.Child, each
// running one of helpers): exclusion checked from a shared counter or an append-only log,
// re-entry by another process with the owner's id, and what a process that is killed
// (SIGKILL) or stopped (SIGSTOP) costs the others.

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
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
)

// child is what a helper gets: its clients and its lock, LOCK, of the kind KIND (a row of
// kinds; "mutex" if unset).
type child struct {
	rc   rueidis.Client
	c    *rlock.Client
	kind lockKind
	name string
}

// ops is the child's lock as the kind's row uses it.
func (ch child) ops() lockOps { return ch.kind.on(ch.c, ch.name) }

// mutex is the child's lock, a Mutex kind.
func (ch child) mutex() *rlock.Mutex { return ch.kind.mutex(ch.c, ch.name) }

// rw is the child's lock, an RWMutex kind.
func (ch child) rw() *rlock.RWMutex { return ch.kind.rw(ch.c, ch.name) }

// semaphore is the child's lock, a Semaphore of PERMITS permits.
func (ch child) semaphore() *rlock.Semaphore { return ch.c.NewSemaphore(ch.name, envInt("PERMITS")) }

// helpers are the child processes' helpers (RLOCK_TEST_HELPER), beside the probes of
// paused_test.go.
var helpers = map[string]func(ch child) error{
	"counter":   helperCounter,
	"reenter":   helperReenter,
	"rwreenter": helperRWReenter,
	"hold":      helperHold,
	"wait":      helperWait,
	"pause":     helperPause,
	"order":     helperOrder,
	"granted":   helperGranted,
	"rwlog":     helperRWLog,
	"semlog":    helperSemLog,
}

// runHelper is main() of a child process: it runs the helper named by RLOCK_TEST_HELPER and
// returns the exit status.
func runHelper(name string) int {
	switch name {
	case "pauseprobe":
		return runPauseProbe()
	case "derivedprobe":
		return runDerivedProbe()
	}
	f := helpers[name]
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
	kind := os.Getenv("KIND")
	if kind == "" {
		kind = "mutex"
	}
	if err := f(child{rc: rc, c: c, kind: kindNamed(kind), name: os.Getenv("LOCK")}); err != nil {
		fmt.Fprintln(os.Stderr, "helper", name, "failed:", err)
		return 1
	}
	return 0
}

// childEnv is the environment of a child for the lock called name in e, with wait strategy
// wait.
func childEnv(e *env, name string, wait rlock.WaitStrategy, extra ...string) []string {
	w := "pubsub"
	if strings.HasPrefix(wait.String(), "spin") {
		w = "spin"
	}
	return append([]string{"PREFIX=" + e.Prefix, "LOCK=" + name, "WAIT=" + w}, extra...)
}

// helperClients opens a helper process's rueidis and rlock clients, as its environment says:
// the parent's deployment (redistest.TopologyEnv), PREFIX, WAIT (spin or pubsub), WATCHDOG and
// FAIRWAIT (durations).
func helperClients() (rueidis.Client, *rlock.Client, error) {
	d, err := redistest.DeploymentFromEnv()
	if err != nil {
		return nil, nil, err
	}
	rc, err := d.NewClient()
	if err != nil {
		return nil, nil, err
	}
	opts := rlock.Options{KeyPrefix: os.Getenv("PREFIX")}
	if os.Getenv("WAIT") == "spin" {
		opts.Wait = rlock.Spin(5 * time.Millisecond)
	}
	if d, err := time.ParseDuration(os.Getenv("WATCHDOG")); err == nil {
		opts.WatchdogTimeout = d
	}
	if d, err := time.ParseDuration(os.Getenv("FAIRWAIT")); err == nil {
		opts.FairWaitTimeout = d
	}
	c, err := rlock.New(rc, opts)
	if err != nil {
		rc.Close()
		return nil, nil, err
	}
	return rc, c, nil
}

// helperCounter increments a Redis counter ITERS times with a non-atomic GET/SET under the lock.
func helperCounter(ch child) error {
	rc, m := ch.rc, ch.mutex()
	iters, _ := strconv.Atoi(os.Getenv("ITERS"))
	key := os.Getenv("PREFIX") + ":counter"
	fmt.Println("ready")
	for range iters {
		h, err := m.Lock(bg)
		if err != nil {
			return err
		}
		v, err := rc.Do(h, rc.B().Get().Key(key).Build()).AsInt64()
		if err != nil && !rueidis.IsRedisNil(err) {
			return err
		}
		time.Sleep(200 * time.Microsecond)
		if err := rc.Do(h, rc.B().Set().Key(key).Value(strconv.FormatInt(v+1, 10)).Build()).Error(); err != nil {
			return err
		}
		if err := m.Unlock(h); err != nil {
			return err
		}
	}
	return nil
}

// helperReenter re-enters a lock the parent holds with the shared owner OWNER, reports the
// hold counts, and releases its hold. With WAITERS=1 another goroutine of this process waits
// for the lock first, and the re-entry is a blocking Lock: it must not queue behind it.
func helperReenter(ch child) error {
	m := ch.mutex()
	ctx := rlock.WithOwner(bg, os.Getenv("OWNER"))
	var h context.Context
	var err error
	if os.Getenv("WAITERS") == "1" {
		wctx, cancel := context.WithCancel(bg)
		defer cancel()
		go func() { _, _ = m.Lock(wctx) }() // a fresh owner: waits behind the parent
		time.Sleep(200 * time.Millisecond)
		lctx, stop := context.WithTimeout(ctx, 2*time.Second)
		defer stop()
		h, err = m.Lock(lctx)
	} else {
		h, err = m.TryLock(ctx, 0)
	}
	if err != nil {
		return fmt.Errorf("re-entry: %w", err)
	}
	n, err := m.HoldCount(h)
	if err != nil {
		return err
	}
	fmt.Println("holds", n)
	if err := m.Unlock(h); err != nil {
		return err
	}
	n, err = m.HoldCount(ctx)
	if err != nil {
		return err
	}
	fmt.Println("holds", n)
	return nil
}

// helperRWReenter re-enters, with a single attempt, a read hold of the owner OWNER that the
// parent holds, reports the owner's hold counts, and releases its hold.
func helperRWReenter(ch child) error {
	m := ch.rw()
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

// helperHold takes a hold (see lockOps.lock) and keeps it until killed.
func helperHold(ch child) error {
	if _, err := ch.ops().lock(bg); err != nil {
		return err
	}
	fmt.Println("locked")
	select {}
}

// helperWait says "waiting", then takes a hold (see lockOps.lock), says "locked" and keeps it
// until killed.
func helperWait(ch child) error {
	fmt.Println("waiting")
	if _, err := ch.ops().lock(bg); err != nil {
		return err
	}
	fmt.Println("locked")
	select {}
}

// helperPause takes the lock, and once told (a line on stdin) reports what became of the hold.
func helperPause(ch child) error {
	m := ch.mutex()
	h, err := m.Lock(bg)
	if err != nil {
		return err
	}
	fmt.Println("locked")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return err
	}
	select {
	case <-h.Done():
	case <-time.After(5 * time.Second):
	}
	fmt.Println("cause", context.Cause(h))
	fmt.Println("unlock", m.Unlock(h))
	return nil
}

// helperOrder locks once (queuing on a fair mutex), appends ID to the list ORDER while it holds
// the lock, and releases.
func helperOrder(ch child) error {
	rc, m := ch.rc, ch.mutex()
	fmt.Println("waiting")
	h, err := m.Lock(bg)
	if err != nil {
		return err
	}
	if err := rc.Do(h, rc.B().Rpush().Key(os.Getenv("ORDER")).Element(os.Getenv("ID")).Build()).Error(); err != nil {
		return err
	}
	return m.Unlock(h)
}

// envInt is the integer in the environment variable name.
func envInt(name string) int64 {
	n, _ := strconv.ParseInt(os.Getenv(name), 10, 64)
	return n
}

// sectionLog appends lines to the file LOG, each with one write(2) on an O_APPEND descriptor, so
// the lines of all processes are in the order they were written.
type sectionLog struct {
	f  *os.File
	id string
}

func openSectionLog() (*sectionLog, error) {
	f, err := os.OpenFile(os.Getenv("LOG"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &sectionLog{f: f, id: strconv.Itoa(os.Getpid())}, nil
}

// line appends "event mode n pid".
func (l *sectionLog) line(event, mode string, n int64) error {
	_, err := l.f.Write([]byte(fmt.Sprintf("%s %s %d %s\n", event, mode, n, l.id)))
	return err
}

// section runs a critical section: it logs its entry, works briefly, and logs its exit.
func (l *sectionLog) section(mode string, n int64) error {
	if err := l.line("enter", mode, n); err != nil {
		return err
	}
	time.Sleep(500 * time.Microsecond)
	return l.line("exit", mode, n)
}

// helperRWLog first takes a read hold and keeps it until told (a line on stdin), so that all
// processes read together; then it takes ITERS holds, a quarter of them write holds, logging
// each section.
func helperRWLog(ch child) error {
	m := ch.rw()
	log, err := openSectionLog()
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

// helperSemLog takes 1 or 2 permits ITERS times, logging each section.
func helperSemLog(ch child) error {
	s := ch.semaphore()
	log, err := openSectionLog()
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

// logLine is one line of a sectionLog.
type logLine struct {
	event, mode string
	n           int64
	pid         string
}

// readSectionLog parses the log at path.
func readSectionLog(t *testing.T, path string) []logLine {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var lines []logLine
	for _, s := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		f := strings.Fields(s)
		require.Len(t, f, 4, "log line %q", s)
		n, err := strconv.ParseInt(f[2], 10, 64)
		require.NoError(t, err)
		lines = append(lines, logLine{f[0], f[1], n, f[3]})
	}
	return lines
}

// TestProcess_mutexExclusion: 4 processes increment a counter with a non-atomic GET and SET
// under the lock; no update is lost.
func TestProcess_mutexExclusion(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		const procs, iters = 4, 40
		children := make([]*redistest.Child, procs)
		for i := range children {
			children[i] = redistest.StartChild(t, "counter", "PREFIX="+e.Prefix, "LOCK=shared", "ITERS="+strconv.Itoa(iters), "WAIT="+wait.String()[:4])
		}
		for _, c := range children {
			c.Expect(t, "ready")
		}
		for _, c := range children {
			c.Wait(t)
		}
		n, err := e.Do("GET", e.Prefix+":counter").AsInt64()
		require.NoError(t, err)
		assert.EqualValues(t, procs*iters, n, "no lost update: the processes excluded each other")
		e.Do("DEL", e.Prefix+":counter")
	})
}

// TestProcess_mutexReentry: another process re-enters a hold with the holder's owner id (a
// blocking Lock too, while a waiter of its own waits), and its release is partial.
func TestProcess_mutexReentry(t *testing.T) {
	for _, waiters := range []string{"0", "1"} {
		t.Run("waiters="+waiters, func(t *testing.T) { testCrossProcessReentrancy(t, waiters) })
	}
}

func testCrossProcessReentrancy(t *testing.T, waiters string) {
	e := newEnv(t)
	m := e.client(rlock.Options{}).NewMutex("xre")
	owner := rlock.NewOwnerID()
	h, err := m.Lock(rlock.WithOwner(bg, owner))
	require.NoError(t, err)

	c := redistest.StartChild(t, "reenter", "PREFIX="+e.Prefix, "LOCK=xre", "OWNER="+owner, "WAITERS="+waiters)
	c.Expect(t, "holds 2")
	c.Expect(t, "holds 1")
	c.Wait(t)

	n, err := m.HoldCount(h)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	require.NoError(t, h.Err(), "the other process's release was partial")
	require.NoError(t, m.Unlock(h))
	require.ErrorIs(t, h.Err(), context.Canceled)
}

// TestProcess_killedHolder kills (SIGKILL) a process holding a lock of each kind and mode: a
// conflicting hold (another owner's; a write hold against a read hold) gets in within one lease.
func TestProcess_killedHolder(t *testing.T) {
	eachKind(t, func(t *testing.T, k lockKind) {
		strategiesInParallel(t, func(t *testing.T, wait rlock.WaitStrategy) {
			e := newEnv(t)
			const timeout = time.Second
			c := redistest.StartChild(t, "hold", childEnv(e, "k", wait, "KIND="+k.name, "WATCHDOG="+timeout.String())...)
			c.Expect(t, "locked")
			require.NoError(t, c.Cmd.Process.Kill())

			ops := k.on(e.client(rlock.Options{Wait: wait}), "k")
			start := time.Now()
			h, err := ops.conflict(3 * timeout)
			require.NoError(t, err)
			d := time.Since(start)
			t.Logf("MEASURE kill-holder-delay: %s/%s: %v (WatchdogTimeout %v)", k.name, wait, d, timeout)
			bound := timeout + timeout/2
			if k.mutex != nil {
				bound = timeout + 200*time.Millisecond
			}
			assert.Less(t, d, bound, "free within one lease")
			require.NoError(t, ops.conflictRelease(h))
		})
	})
}

// TestProcess_pausedHolderLearnsOfLoss stops the holder process (SIGSTOP) for longer than its
// lease, as a long GC pause would: another owner takes the lock, and when the holder resumes
// its hold context is cancelled with ErrLockLost and its Unlock says so.
func TestProcess_pausedHolderLearnsOfLoss(t *testing.T) {
	e := newEnv(t)
	const timeout = 600 * time.Millisecond
	c := redistest.StartChild(t, "pause", "PREFIX="+e.Prefix, "LOCK=p", "WATCHDOG="+timeout.String())
	c.Expect(t, "locked")
	require.NoError(t, c.Cmd.Process.Signal(syscall.SIGSTOP))

	m := e.client(rlock.Options{}).NewMutex("p")
	h, err := m.TryLock(bg, 3*timeout)
	require.NoError(t, err)
	require.NoError(t, c.Cmd.Process.Signal(syscall.SIGCONT))
	_, err = io.WriteString(c.In, "go\n")
	require.NoError(t, err)
	c.Expect(t, "cause "+rlock.ErrLockLost.Error())
	c.Expect(t, "unlock mutex \"p\": "+rlock.ErrLockLost.Error())
	c.Wait(t)

	n, err := m.HoldCount(h)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the resumed holder did not release the new owner's lock")
	require.NoError(t, m.Unlock(h))
}

// TestProcess_rwExclusion: 4 processes first hold read holds together, then take
// read and write holds at random; the append-only log shows every writer alone and readers
// together.
func TestProcess_rwExclusion(t *testing.T) {
	eachRWKindAndStrategy(t, func(t *testing.T, k lockKind, wait rlock.WaitStrategy) {
		e := newEnv(t)
		const procs, iters = 4, 30
		logPath := filepath.Join(t.TempDir(), "log")
		children := make([]*redistest.Child, procs)
		for i := range children {
			children[i] = redistest.StartChild(t, "rwlog", childEnv(e, "x", wait,
				"KIND="+k.name, "LOG="+logPath, "ITERS="+strconv.Itoa(iters))...)
		}
		for _, c := range children {
			c.Expect(t, "reading")
		}
		n, err := k.rw(e.client(rlock.Options{}), "x").Readers(bg)
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
		for i, l := range readSectionLog(t, logPath) {
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

// TestProcess_semaphoreExclusion: 4 processes take 1 or 2 of 3 permits in a loop;
// the append-only log never shows more than 3 out.
func TestProcess_semaphoreExclusion(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		const procs, iters, permits = 4, 30, 3
		logPath := filepath.Join(t.TempDir(), "log")
		children := make([]*redistest.Child, procs)
		for i := range children {
			children[i] = redistest.StartChild(t, "semlog", childEnv(e, "s", wait,
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
		for i, l := range readSectionLog(t, logPath) {
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

// TestProcess_rwReentry: another process re-enters a read hold with the holder's owner
// id, at once although a writer waits, and its release is partial.
func TestProcess_rwReentry(t *testing.T) {
	eachRWKind(t, func(t *testing.T, k lockKind) {
		e := newEnv(t)
		m := k.rw(e.client(rlock.Options{}), "xre")
		owner := rlock.NewOwnerID()
		r, err := m.RLock(rlock.WithOwner(bg, owner))
		require.NoError(t, err)
		wrote := goAcquire(func() (context.Context, error) { return m.Lock(bg) })
		e.awaitRWWaiters(k, "xre", 1)

		c := redistest.StartChild(t, "rwreenter", childEnv(e, "xre", rlock.PubSub(), "KIND="+k.name, "OWNER="+owner)...)
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

// TestProcess_killedReader kills (SIGKILL) a process holding a read hold beside a live reader:
// the dead hold ends with its lease, the live one stays, and a writer gets in after both.
func TestProcess_killedReader(t *testing.T) {
	inParallel(t, func(t *testing.T, k lockKind, wait rlock.WaitStrategy) {
		e := newEnv(t)
		const timeout = time.Second
		c := redistest.StartChild(t, "hold", childEnv(e, "k", wait, "KIND="+strings.TrimSuffix(k.name, "-write")+"-read", "WATCHDOG="+timeout.String())...)
		c.Expect(t, "locked")
		m := k.rw(e.client(rlock.Options{Wait: wait, WatchdogTimeout: timeout}), "k")
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
			k.family(), wait, d, gone, timeout)
		assert.Less(t, d, timeout+timeout/2, "the dead reader delays the writer by at most its lease")
		require.NoError(t, m.Unlock(res.h))
	})
}

// TestProcess_killedWriter kills (SIGKILL) a process holding a write hold: a waiting reader gets
// in when its lease ends.
func TestProcess_killedWriter(t *testing.T) {
	inParallel(t, func(t *testing.T, k lockKind, wait rlock.WaitStrategy) {
		e := newEnv(t)
		const timeout = time.Second
		c := redistest.StartChild(t, "wait", childEnv(e, "k", wait, "KIND="+k.name, "WATCHDOG="+timeout.String())...)
		c.Expect(t, "waiting")
		c.Expect(t, "locked")
		m := k.rw(e.client(rlock.Options{Wait: wait, WatchdogTimeout: timeout}), "k")
		read := goAcquire(func() (context.Context, error) { return m.RLock(bg) })
		requireNone(t, 50*time.Millisecond, "a reader behind a writer", read)

		require.NoError(t, c.Cmd.Process.Kill())
		killed := time.Now()
		res := awaitResult(t, read, 5*timeout, "the reader")
		require.NoError(t, res.err)
		d := res.at.Sub(killed)
		t.Logf("MEASURE kill-writer-delay: %s/%s: a reader waited %v after the kill (WatchdogTimeout %v)", k.family(), wait, d, timeout)
		assert.Less(t, d, timeout+timeout/2, "the dead writer delays readers by at most its lease")
		requireRWState(t, m, res.h, false, 1, 1, 0)
		require.NoError(t, m.RUnlock(res.h))
	})
}

// TestProcess_killedQueuedWaiter kills (SIGKILL) a process that waits where others wait behind it
// (a fair read-write mutex's queue, a writer holding back readers, a semaphore's queue): the
// waiter behind it is delayed by about FairWaitTimeout at most. The kill comes more than a
// third of FairWaitTimeout after the live waiter queued, so the dead one has refreshed its
// place (it polls every third) after the live one's last attempt: the worst case for the live
// one, which must not sleep past the dead entry's end.
func TestProcess_killedQueuedWaiter(t *testing.T) {
	const fairWait = time.Second
	for _, tc := range []struct {
		name string
		// run makes the child's waiter head the line with a live waiter behind it, kills the
		// child, lets the live waiter in were the dead one gone, and measures its delay.
		run func(t *testing.T, e *env, wait rlock.WaitStrategy, kill func(c *redistest.Child, deadlines string) queuedKill)
	}{
		{"fair_rw", func(t *testing.T, e *env, wait rlock.WaitStrategy, kill func(c *redistest.Child, deadlines string) queuedKill) {
			k := kindNamed("fairrw-write")
			m := k.rw(e.client(rlock.Options{Wait: wait, FairWaitTimeout: fairWait}), "q")
			w0, err := m.Lock(bg)
			require.NoError(t, err)
			c := redistest.StartChild(t, "wait", childEnv(e, "q", wait, "KIND=fairrw-write", "FAIRWAIT="+fairWait.String())...)
			c.Expect(t, "waiting")
			e.awaitRWWaiters(k, "q", 1)
			behind := goAcquire(func() (context.Context, error) { return m.RLock(bg) })
			e.awaitRWWaiters(k, "q", 2)
			requireNone(t, fairWait/3+100*time.Millisecond, "the waiter behind", behind)
			killed := kill(c, e.kindBase("q")+":deadlines")
			require.NoError(t, m.Unlock(w0))
			h := measureQueued(t, "fair_rw", wait, behind, killed, fairWait)
			require.NoError(t, m.RUnlock(h))
		}},
		{"plain_rw", func(t *testing.T, e *env, wait rlock.WaitStrategy, kill func(c *redistest.Child, deadlines string) queuedKill) {
			k := kindNamed("rw-write")
			m := k.rw(e.client(rlock.Options{Wait: wait, FairWaitTimeout: fairWait}), "q")
			r0, err := m.RLock(bg)
			require.NoError(t, err)
			c := redistest.StartChild(t, "wait", childEnv(e, "q", wait, "KIND=rw-write", "FAIRWAIT="+fairWait.String())...)
			c.Expect(t, "waiting")
			e.awaitRWWaiters(k, "q", 1)
			behind := goAcquire(func() (context.Context, error) { return m.RLock(bg) })
			requireNone(t, fairWait/3+100*time.Millisecond, "the waiter behind", behind)
			killed := kill(c, e.kindBase("q")+":writers")
			h := measureQueued(t, "plain_rw", wait, behind, killed, fairWait)
			require.NoError(t, m.RUnlock(h))
			require.NoError(t, m.RUnlock(r0))
		}},
		{"semaphore", func(t *testing.T, e *env, wait rlock.WaitStrategy, kill func(c *redistest.Child, deadlines string) queuedKill) {
			// The dead waiter at the head waits for semUnit permits, the live one behind it for 1:
			// the release of h1 frees 1, which only the head's end lets the live one have.
			s := e.client(rlock.Options{Wait: wait, FairWaitTimeout: fairWait}).NewSemaphore("q", semPermits)
			h1, err := s.Acquire(bg, 1)
			require.NoError(t, err)
			h2, err := s.Acquire(bg, semPermits-1)
			require.NoError(t, err)
			c := redistest.StartChild(t, "wait", childEnv(e, "q", wait, "KIND=semaphore", "FAIRWAIT="+fairWait.String())...)
			c.Expect(t, "waiting")
			e.awaitSemQueue("q", 1)
			behind := goAcquire(func() (context.Context, error) { return s.Acquire(bg, 1) })
			e.awaitSemQueue("q", 2)
			requireNone(t, fairWait/3+100*time.Millisecond, "the waiter behind", behind)
			killed := kill(c, e.kindBase("q")+":deadlines")
			require.NoError(t, s.Release(h1))
			h := measureQueued(t, "semaphore", wait, behind, killed, fairWait)
			require.NoError(t, s.Release(h))
			require.NoError(t, s.Release(h2))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			strategiesInParallel(t, func(t *testing.T, wait rlock.WaitStrategy) {
				e := newEnv(t)
				tc.run(t, e, wait, func(c *redistest.Child, deadlines string) queuedKill {
					// The dead waiter's entry is the one that ends first: the live one behind it
					// polled last.
					require.NoError(t, c.Cmd.Process.Kill())
					k := queuedKill{at: time.Now()}
					k.entryEnd = e.firstDeadline(deadlines)
					return k
				})
			})
		})
	}
}

// queuedKill is when a queued waiter was killed, and when its entry ends (FairWaitTimeout after
// its last poll).
type queuedKill struct {
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

// measureQueued waits for the live waiter behind a killed one and checks the delay: from
// the kill, at most FairWaitTimeout and a poll; from the end of the dead entry, at most a poll.
func measureQueued(t *testing.T, kind string, wait rlock.WaitStrategy, behind <-chan acquireResult, killed queuedKill, fairWait time.Duration) context.Context {
	t.Helper()
	res := awaitResult(t, behind, 5*fairWait, "the waiter behind a killed one")
	require.NoError(t, res.err)
	d, late := res.at.Sub(killed.at), res.at.Sub(killed.entryEnd)
	t.Logf("MEASURE kill-queued-waiter-delay: %s/%s: %v (FairWaitTimeout %v; %v after the dead entry ended)", kind, wait, d, fairWait, late)
	assert.Less(t, d, fairWait+fairWait/2, "at most FairWaitTimeout plus a poll")
	assert.Less(t, late, fairWait/2, "the waiter behind did not sleep long past the dead entry's end")
	return res.h
}
