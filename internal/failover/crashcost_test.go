package failover_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCrashCost measures what a crash costs the others, for docs/timeouts.md:
// how long a holder process killed (SIGKILL) at a random moment of its lease keeps waiters out,
// for several WatchdogTimeouts. It takes about a minute, so it runs only with RLOCK_CRASHCOST=1:
//
//	RLOCK_CRASHCOST=1 scripts/with-redis.sh go test -run TestCrashCost -v ./internal/failover
func TestCrashCost(t *testing.T) {
	if os.Getenv("RLOCK_CRASHCOST") != "1" {
		t.Skip("a measurement: set RLOCK_CRASHCOST=1")
	}
	for _, lease := range []time.Duration{time.Second, 3 * time.Second, 10 * time.Second} {
		t.Run(lease.String(), func(t *testing.T) {
			var delays []time.Duration
			for i := range 3 {
				e := redistest.NewEnv(t)
				c := redistest.StartChild(t, "hold", "PREFIX="+e.Prefix, "LOCK=k", "WATCHDOG="+lease.String())
				c.Expect(t, "locked")
				time.Sleep(rand.N(lease / 3)) // a random moment between two renewals
				require.NoError(t, c.Cmd.Process.Kill())
				killed := time.Now()
				cl, err := rlock.New(e.Rueidis(), rlock.Options{KeyPrefix: e.Prefix})
				require.NoError(t, err)
				defer cl.Close()
				m := cl.NewMutex("k")
				h, err := m.TryLock(bg, 2*lease)
				require.NoError(t, err, "trial %d", i)
				d := time.Since(killed)
				delays = append(delays, d)
				assert.Less(t, d, lease+200*time.Millisecond, "free within one lease")
				require.NoError(t, m.Unlock(h))
			}
			t.Logf("WatchdogTimeout %v: a killed holder kept waiters out for %v", lease, fmt.Sprint(delays))
		})
	}
}

// helperHold is the child process of TestCrashCost: it takes the Mutex LOCK (on the
// deployment redistest.TopologyEnv names, with key prefix PREFIX and WatchdogTimeout
// WATCHDOG), says "locked" and keeps it until killed.
func helperHold() int {
	d, err := redistest.DeploymentFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	rc, err := d.NewClient()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	lease, _ := time.ParseDuration(os.Getenv("WATCHDOG"))
	c, err := rlock.New(rc, rlock.Options{KeyPrefix: os.Getenv("PREFIX"), WatchdogTimeout: lease})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if _, err := c.NewMutex(os.Getenv("LOCK")).Lock(bg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("locked")
	select {}
}
