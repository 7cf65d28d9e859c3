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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
)

// runPauseProbe is main() of the "pauseprobe" helper: it takes a hold of every kind and mode
// of kinds (called LOCK-<kind>; with LEASE, a fixed lease, if set; else the watchdog of
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
	holds := make([]context.Context, len(kinds))
	for i, k := range kinds {
		if holds[i], err = k.on(c, os.Getenv("LOCK")+"-"+k.name, opts...).lock(bg); err != nil {
			fmt.Fprintln(os.Stderr, "pauseprobe:", err)
			return 1
		}
	}
	fmt.Println("locked")
	// Per hold: when its last check ended, and its report once the clock jumped (a stop)
	// between two of its checks; a check that itself spans the jump is ambiguous.
	last := make([]time.Time, len(holds))
	reports := make([]string, len(holds))
	now := time.Now()
	for i := range last {
		last[i] = now
	}
	left := len(holds)
	for give := now.Add(20 * time.Second); left > 0 && time.Now().Before(give); {
		// Most of the loop's time is this spin, without timers or system calls: a stop most
		// likely lands here, and the first thing after it is a check.
		spin(20000)
		for i, h := range holds {
			if reports[i] != "" {
				continue
			}
			before := time.Now()
			err := h.Err()
			after := time.Now()
			switch {
			case after.Sub(before) > time.Second:
				reports[i] = "ambiguous"
				left--
			case before.Sub(last[i]) > time.Second:
				done := false
				select {
				case <-h.Done():
					done = true
				default:
				}
				reports[i] = fmt.Sprintf("%s: first %v; cause is ErrLockLost: %v; done: %v", kinds[i].name, err,
					errors.Is(context.Cause(h), rlock.ErrLockLost), done)
				left--
			}
			last[i] = after
		}
		runtime.Gosched()
	}
	for i, r := range reports {
		if r == "" {
			r = kinds[i].name + ": no pause seen"
		}
		fmt.Println(r)
	}
	return 0
}

// spinSink keeps spin's work from being optimised away.
var spinSink uint64

// spin busy-loops for n steps (about a microsecond per thousand).
func spin(n int) {
	x := spinSink
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	spinSink = x
}

// TestPaused_holderSeesEndAtOnce stops a holder process (SIGSTOP) for 3s, longer than its
// leases (a 2s watchdog lease, or WithLease(500ms)), and resumes it: the first Err of each hold
// context after it resumes, called before any timer of the process could run, must be non-nil,
// with the cause the contract gives (ErrLockLost; Err of a fixed lease: DeadlineExceeded), and
// Done must be closed. Every kind and mode.
func TestPaused_holderSeesEndAtOnce(t *testing.T) {
	for _, lease := range []string{"watchdog", "fixed"} {
		t.Run(lease, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			env := []string{"PREFIX=" + e.Prefix, "LOCK=p"}
			want := context.Canceled
			if lease == "fixed" {
				env = append(env, "LEASE=500ms")
				want = context.DeadlineExceeded
			} else {
				env = append(env, "WATCHDOG=2s")
			}
			// One P: the library's timers run only when the probe yields, never alongside it.
			env = append(env, "GOMAXPROCS=1")
			for try := 0; ; try++ {
				c := redistest.StartChild(t, "pauseprobe", env...)
				c.Expect(t, "locked")
				time.Sleep(100 * time.Millisecond)
				require.NoError(t, c.Cmd.Process.Signal(syscall.SIGSTOP))
				time.Sleep(3 * time.Second)
				require.NoError(t, c.Cmd.Process.Signal(syscall.SIGCONT))
				ambiguous := false
				for _, k := range kinds {
					kind := k.name
					require.True(t, c.Out.Scan(), "the child ended without a report")
					line := c.Out.Text()
					if line == "ambiguous" {
						ambiguous = true // stopped during this very check
						continue
					}
					assert.Equal(t, fmt.Sprintf("%s: first %v; cause is ErrLockLost: true; done: true", kind, want), line,
						"the first Err after the pause")
				}
				if ambiguous && try < 5 {
					t.Logf("try %d: the process was stopped during a check; again", try)
					c.Wait(t)
					continue
				}
				require.False(t, ambiguous, "stopped during a check 6 times")
				c.Wait(t)
				break
			}
		})
	}
}

// runDerivedProbe is main() of the "derivedprobe" helper: it takes a Mutex hold (called LOCK,
// with LEASE, a fixed lease) and derives a context from its hold context with
// context.WithCancel, prints "locked", and spins without timers or context calls until the
// clock jumps by more than a second (the parent stopped the process). It then prints the
// derived context's Err, the hold context's Err, and the derived context's Err again.
func runDerivedProbe() int {
	rc, c, err := helperClients()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer rc.Close()
	defer c.Close()
	lease, _ := time.ParseDuration(os.Getenv("LEASE"))
	h, err := c.NewMutex(os.Getenv("LOCK"), rlock.WithLease(lease)).Lock(bg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "derivedprobe:", err)
		return 1
	}
	derived, cancel := context.WithCancel(h)
	defer cancel()
	fmt.Println("locked")
	last := time.Now()
	for give := last.Add(20 * time.Second); time.Now().Before(give); {
		spin(20000)
		now := time.Now()
		if now.Sub(last) > time.Second {
			before := derived.Err()
			held := h.Err()
			fmt.Printf("derived first: %v; hold: %v; derived then: %v\n", before, held, derived.Err())
			return 0
		}
		last = now
		runtime.Gosched()
	}
	fmt.Println("no pause seen")
	return 0
}

// TestPaused_derivedContextEndsWithTheHoldCheck stops a holder process (SIGSTOP) for 2s,
// longer than its 500ms lease, and resumes it. A context derived from the hold context with
// context.WithCancel is the standard library's: its Err does not look at the clock, so first
// thing after the pause it may still read nil (until the library's timers run). The hold
// context's own Err sees the end at once, and that check ends the derived context too: read
// right after it, the derived context's Err is non-nil. (docs/semantics.md says so.)
func TestPaused_derivedContextEndsWithTheHoldCheck(t *testing.T) {
	e := newEnv(t)
	c := redistest.StartChild(t, "derivedprobe", "PREFIX="+e.Prefix, "LOCK=derived", "LEASE=500ms",
		"GOMAXPROCS=1")
	c.Expect(t, "locked")
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, c.Cmd.Process.Signal(syscall.SIGSTOP))
	time.Sleep(2 * time.Second)
	require.NoError(t, c.Cmd.Process.Signal(syscall.SIGCONT))
	require.True(t, c.Out.Scan(), "the child ended without a report")
	line := c.Out.Text()
	t.Logf("after the pause: %s", line)
	assert.Regexp(t, `^derived first: .*; hold: context deadline exceeded; `+
		`derived then: context (canceled|deadline exceeded)$`, line)
	c.Wait(t)
}
