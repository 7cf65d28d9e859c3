package chaos_test

import (
	"context"
	"testing"

	"github.com/rlock-go/rlock/internal/redistest"
)

// TestMain runs the chaos tests on the deployment redistest.TopologyEnv names (a throwaway
// redis-server when REDIS_ADDR is unset); their child processes, re-executions of this test
// binary, run runChaosChild or runChaosPauseChild instead.
func TestMain(m *testing.M) {
	redistest.Main(m, func(name string) int {
		switch name {
		case "chaos":
			return runChaosChild()
		case "chaos-pause":
			return runChaosPauseChild()
		}
		return 2
	})
}

// node is a server of the deployment, reached directly.
type node = redistest.Node

var bg = context.Background()
