package rlock_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
)

// TestCrashCost measures what a crash costs the others, for docs/timeouts.md:
// how long a holder process killed (SIGKILL) at a random moment of its lease keeps waiters out,
// for several WatchdogTimeouts. It takes about a minute, so it runs only with RLOCK_CRASHCOST=1:
//
//	RLOCK_CRASHCOST=1 scripts/with-redis.sh go test -run TestCrashCost -v .
func TestCrashCost(t *testing.T) {
	if os.Getenv("RLOCK_CRASHCOST") != "1" {
		t.Skip("a measurement: set RLOCK_CRASHCOST=1")
	}
	for _, lease := range []time.Duration{time.Second, 3 * time.Second, 10 * time.Second} {
		t.Run(lease.String(), func(t *testing.T) {
			var delays []time.Duration
			for i := range 3 {
				e := newEnv(t)
				c := redistest.StartChild(t, "hold", "PREFIX="+e.Prefix, "LOCK=k", "WATCHDOG="+lease.String())
				c.Expect(t, "locked")
				time.Sleep(rand.N(lease / 3)) // a random moment between two renewals
				require.NoError(t, c.Cmd.Process.Kill())
				killed := time.Now()
				m := e.client(rlock.Options{}).NewMutex("k")
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
