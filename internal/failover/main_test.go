package failover_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
)

// TestMain runs the failover tests beside the deployment redistest.TopologyEnv names (see
// foNotTheSuites); a child process of TestCrashCost runs helperHold.
func TestMain(m *testing.M) {
	redistest.Main(m, func(name string) int {
		if name != "hold" {
			fmt.Fprintln(os.Stderr, "no helper", name)
			return 2
		}
		return helperHold()
	})
}

// node is a server of a deployment, reached directly.
type node = redistest.Node

var bg = context.Background()

// mutexMaker makes a mutex of one kind: (*rlock.Client).NewMutex or NewFairMutex.
type mutexMaker = func(c *rlock.Client, name string, opts ...rlock.MutexOption) *rlock.Mutex
