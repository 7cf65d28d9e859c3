package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/stretchr/testify/require"
)

// pausedHoldKinds are the holds TestHold_pausedHolderSeesEndAtOnce takes, one per kind and mode.
var pausedHoldKinds = []string{"mutex", "fair", "rw-read", "rw-write", "fairrw-read", "fairrw-write", "semaphore"}

// pausedHold takes a hold of kind (one of pausedHoldKinds) called name, with opts.
func pausedHold(c *rlock.Client, kind, name string, opts ...rlock.MutexOption) (context.Context, error) {
	switch kind {
	case "mutex":
		return c.NewMutex(name, opts...).Lock(bg)
	case "fair":
		return c.NewFairMutex(name, opts...).Lock(bg)
	case "rw-read":
		return c.NewRWMutex(name, opts...).RLock(bg)
	case "rw-write":
		return c.NewRWMutex(name, opts...).Lock(bg)
	case "fairrw-read":
		return c.NewFairRWMutex(name, opts...).RLock(bg)
	case "fairrw-write":
		return c.NewFairRWMutex(name, opts...).Lock(bg)
	case "semaphore":
		return c.NewSemaphore(name, 1, opts...).Acquire(bg, 1)
	}
	return nil, fmt.Errorf("no kind %q", kind)
}

// runPauseProbe is main() of the "pauseprobe" helper: it takes a hold of KIND called LOCK (with
// LEASE, a fixed lease, if set; else the watchdog of WATCHDOG), prints "locked", and checks the
// hold context in a loop that uses no timer (the first code to run when the process resumes is
// this loop, not the library's timers). When the clock jumped by more than a second between two
// checks (the parent stopped the process), it prints the first Err after the jump and its cause.
func runPauseProbe() int {
	rc, c, err := helperClients()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer rc.Close()
	defer c.Close()
	var opts []rlock.MutexOption
	if d, err := time.ParseDuration(os.Getenv("LEASE")); err == nil {
		opts = append(opts, rlock.WithLease(d))
	}
	h, err := pausedHold(c, os.Getenv("KIND"), os.Getenv("LOCK"), opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pauseprobe:", err)
		return 1
	}
	fmt.Println("locked")
	last := time.Now()
	for give := last.Add(20 * time.Second); last.Before(give); {
		before := time.Now()
		err := h.Err()
		after := time.Now()
		switch {
		case after.Sub(before) > time.Second:
			fmt.Println("ambiguous") // stopped during the check itself
			return 0
		case before.Sub(last) > time.Second:
			fmt.Printf("first %v\n", err)
			fmt.Printf("cause is ErrLockLost: %v\n", errors.Is(context.Cause(h), rlock.ErrLockLost))
			select {
			case <-h.Done():
				fmt.Println("done closed")
			default:
				fmt.Println("done open")
			}
			return 0
		}
		last = after
		runtime.Gosched()
	}
	fmt.Println("no pause seen")
	return 0
}

// TestHold_pausedHolderSeesEndAtOnce stops a holder process (SIGSTOP) for 3s, longer than its
// lease (a 2s watchdog lease, or WithLease(500ms)), and resumes it: the first Err of its hold
// context after it resumes, called before any timer of the process could run, must be non-nil,
// with the cause the contract gives (ErrLockLost; a fixed lease: context.DeadlineExceeded for
// Err, ErrLockLost for the cause), and Done must be closed. Every kind and mode.
func TestHold_pausedHolderSeesEndAtOnce(t *testing.T) {
	for _, lease := range []string{"watchdog", "fixed"} {
		t.Run(lease, func(t *testing.T) {
			for _, kind := range pausedHoldKinds {
				t.Run(kind, func(t *testing.T) {
					t.Parallel()
					e := newEnv(t)
					env := []string{"PREFIX=" + e.prefix, "LOCK=p", "KIND=" + kind}
					want := "first " + context.Canceled.Error()
					if lease == "fixed" {
						env = append(env, "LEASE=500ms")
						want = "first " + context.DeadlineExceeded.Error()
					} else {
						env = append(env, "WATCHDOG=2s")
					}
					for try := 0; ; try++ {
						c := startChild(t, "pauseprobe", env...)
						c.expect(t, "locked")
						time.Sleep(100 * time.Millisecond)
						require.NoError(t, c.cmd.Process.Signal(syscall.SIGSTOP))
						time.Sleep(3 * time.Second)
						require.NoError(t, c.cmd.Process.Signal(syscall.SIGCONT))
						require.True(t, c.out.Scan(), "the child ended without a report")
						if line := c.out.Text(); line == "ambiguous" && try < 3 {
							c.wait(t)
							continue
						} else {
							require.Equal(t, want, line, "the first Err after the pause")
						}
						c.expect(t, "cause is ErrLockLost: true")
						c.expect(t, "done closed")
						c.wait(t)
						break
					}
				})
			}
		})
	}
}

var _ = strings.Contains
