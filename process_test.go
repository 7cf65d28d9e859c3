package rlock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
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

// runHelper is main() of a child process: it runs the helper named by RLOCK_TEST_HELPER and
// returns the exit status.
func runHelper(name string) int {
	if name == "pauseprobe" {
		return runPauseProbe()
	}
	if name == "derivedprobe" {
		return runDerivedProbe()
	}
	if strings.HasPrefix(name, "kinds-") {
		return runKindsHelper(name)
	}
	rc, c, err := helperClients()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer rc.Close()
	defer c.Close()
	m := c.NewMutex(os.Getenv("LOCK"))
	if os.Getenv("FAIR") == "1" {
		m = c.NewFairMutex(os.Getenv("LOCK"))
	}
	helpers := map[string]func(rueidis.Client, *rlock.Mutex) error{
		"counter": helperCounter,
		"reenter": helperReenter,
		"hold":    helperHold,
		"pause":   helperPause,
		"order":   helperOrder,
		"granted": helperGranted,
	}
	if err := helpers[name](rc, m); err != nil {
		fmt.Fprintln(os.Stderr, "helper", name, "failed:", err)
		return 1
	}
	return 0
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
func helperCounter(rc rueidis.Client, m *rlock.Mutex) error {
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
func helperReenter(_ rueidis.Client, m *rlock.Mutex) error {
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

// helperHold takes the lock and keeps it until killed.
func helperHold(_ rueidis.Client, m *rlock.Mutex) error {
	if _, err := m.Lock(bg); err != nil {
		return err
	}
	fmt.Println("locked")
	select {}
}

// helperPause takes the lock, and once told (a line on stdin) reports what became of the hold.
func helperPause(_ rueidis.Client, m *rlock.Mutex) error {
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
func helperOrder(rc rueidis.Client, m *rlock.Mutex) error {
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

func TestMutex_exclusionAcrossProcesses(t *testing.T) {
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

func TestMutex_crossProcessReentrancy(t *testing.T) {
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

func TestMutex_killedHolderProcess(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		const timeout = time.Second
		c := redistest.StartChild(t, "hold", "PREFIX="+e.Prefix, "LOCK=k", "WATCHDOG="+timeout.String())
		c.Expect(t, "locked")
		require.NoError(t, c.Cmd.Process.Kill())

		m := e.client(rlock.Options{Wait: wait}).NewMutex("k")
		start := time.Now()
		h, err := m.TryLock(bg, 3*timeout)
		require.NoError(t, err)
		assert.Less(t, time.Since(start), timeout+200*time.Millisecond, "free within one lease")
		require.NoError(t, m.Unlock(h))
	})
}

// TestMutex_pausedHolderLearnsOfLoss stops the holder process (SIGSTOP) for longer than its
// lease, as a long GC pause would: another owner takes the lock, and when the holder resumes
// its hold context is cancelled with ErrLockLost and its Unlock says so.
func TestMutex_pausedHolderLearnsOfLoss(t *testing.T) {
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

var _ = errors.Is
var _ = strings.Contains
