package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/stretchr/testify/assert"
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

// runPauseProbe is main() of the "pauseprobe" helper: it takes a hold of every kind in
// pausedHoldKinds (called LOCK-<kind>; with LEASE, a fixed lease, if set; else the watchdog of
// WATCHDOG), prints "locked", and checks the hold contexts in a loop that uses no timer (the
// first code to run when the process resumes is this loop, not the library's timers). When the
// clock jumped by more than a second between two checks (the parent stopped the process), it
// prints, per kind, the first Err after the jump, whether the cause is ErrLockLost and whether
// Done was closed.
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
	holds := make([]context.Context, len(pausedHoldKinds))
	for i, kind := range pausedHoldKinds {
		if holds[i], err = pausedHold(c, kind, os.Getenv("LOCK")+"-"+kind, opts...); err != nil {
			fmt.Fprintln(os.Stderr, "pauseprobe:", err)
			return 1
		}
	}
	fmt.Println("locked")
	errs := make([]error, len(holds))
	last := time.Now()
	for give := last.Add(20 * time.Second); last.Before(give); {
		before := time.Now()
		for i, h := range holds {
			errs[i] = h.Err()
		}
		after := time.Now()
		switch {
		case after.Sub(before) > time.Second:
			fmt.Println("ambiguous") // stopped during the checks themselves
			return 0
		case before.Sub(last) > time.Second:
			for i, h := range holds {
				done := false
				select {
				case <-h.Done():
					done = true
				default:
				}
				fmt.Printf("%s: first %v; cause is ErrLockLost: %v; done: %v\n", pausedHoldKinds[i], errs[i],
					errors.Is(context.Cause(h), rlock.ErrLockLost), done)
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
// leases (a 2s watchdog lease, or WithLease(500ms)), and resumes it: the first Err of each hold
// context after it resumes, called before any timer of the process could run, must be non-nil,
// with the cause the contract gives (ErrLockLost; Err of a fixed lease: DeadlineExceeded), and
// Done must be closed. Every kind and mode.
func TestHold_pausedHolderSeesEndAtOnce(t *testing.T) {
	for _, lease := range []string{"watchdog", "fixed"} {
		t.Run(lease, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			env := []string{"PREFIX=" + e.prefix, "LOCK=p"}
			want := context.Canceled
			if lease == "fixed" {
				env = append(env, "LEASE=500ms")
				want = context.DeadlineExceeded
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
				line := c.out.Text()
				if line == "ambiguous" && try < 5 {
					t.Logf("try %d: the process was stopped during its checks; again", try)
					c.wait(t)
					continue
				}
				for i, kind := range pausedHoldKinds {
					if i > 0 {
						require.True(t, c.out.Scan(), "the child ended without a report")
						line = c.out.Text()
					}
					assert.Equal(t, fmt.Sprintf("%s: first %v; cause is ErrLockLost: true; done: true", kind, want), line,
						"the first Err after the pause")
				}
				c.wait(t)
				break
			}
		})
	}
}
