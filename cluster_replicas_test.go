package rlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/stretchr/testify/require"
)

// TestClusterSmoke_syncReplicasRenewal: on a cluster, SyncReplicas renewals go out per slot on
// a connection of their own followed by WAIT; with every master's replica in sync, holds of
// many names (many slots, every master) live on across several renewal periods, and a hold's
// context is not ended.
func TestClusterSmoke_syncReplicasRenewal(t *testing.T) {
	cl := clusterFromEnv(t)
	const lease = 900 * time.Millisecond
	c, err := rlock.New(cl.client(t), rlock.Options{KeyPrefix: fmt.Sprintf("rlcsr%d", time.Now().UnixNano()),
		SyncReplicas: 1, SyncTimeout: 500 * time.Millisecond, WatchdogTimeout: lease})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	ctx := context.Background()
	var held []context.Context
	for i := range 12 {
		h, err := c.NewMutex(fmt.Sprintf("n%d", i)).Lock(ctx)
		require.NoError(t, err)
		held = append(held, h)
	}
	time.Sleep(4 * lease)
	for i, h := range held {
		require.NoError(t, context.Cause(h), "hold %d lost although its renewals reached a replica", i)
		require.NoError(t, c.NewMutex(fmt.Sprintf("n%d", i)).Unlock(h))
	}
}
