package rlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/stretchr/testify/require"
)

// TestRenewal_afterScriptFlush: the watchdog's pipelined renewals (EVALSHA) find the scripts
// gone after SCRIPT FLUSH (a restarted server) and load them again, for every kind: no hold is
// lost although several leases pass.
func TestRenewal_afterScriptFlush(t *testing.T) {
	needsThrowaway(t)
	e := newEnv(t)
	c := e.client(rlock.Options{WatchdogTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	m, err := c.NewMutex("m").Lock(ctx)
	require.NoError(t, err)
	r, err := c.NewRWMutex("rw").RLock(ctx)
	require.NoError(t, err)
	s, err := c.NewSemaphore("s", 2).Acquire(ctx, 1)
	require.NoError(t, err)
	for i := 0; i < 4; i++ {
		require.NoError(t, e.onMasters("SCRIPT", "FLUSH"))
		time.Sleep(250 * time.Millisecond) // most of a lease: renewals run in between
	}
	for name, held := range map[string]context.Context{"mutex": m, "read": r, "semaphore": s} {
		require.NoError(t, held.Err(), "%s hold lost after SCRIPT FLUSH", name)
	}
	require.NoError(t, c.NewMutex("m").Unlock(m))
	require.NoError(t, c.NewRWMutex("rw").RUnlock(r))
	require.NoError(t, c.NewSemaphore("s", 2).Release(s))
}
