package rlock

import (
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/redistest"
)

// testRueidis returns a rueidis client of the tests' deployment (redistest.TopologyEnv), closed
// when the test ends; it skips t under -short.
func testRueidis(t *testing.T) rueidis.Client {
	t.Helper()
	redistest.NeedsRedis(t)
	d, err := redistest.DeploymentFromEnv()
	require.NoError(t, err)
	rc, err := d.NewClient()
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	return rc
}
