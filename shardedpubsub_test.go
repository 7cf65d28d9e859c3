package rlock_test

import (
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/stretchr/testify/require"
)

// TestShardedPubSub_wakeUpsOnEveryKind runs waits of every kind on clients that use sharded pub/sub
// (SSUBSCRIBE/SPUBLISH), as they do on a cluster: the waiter subscribes to a shard channel,
// never a classic one, is woken by the release long before any lease or poll bound, and leaves
// no subscription behind (the env's final check covers shard channels).
func TestShardedPubSub_wakeUpsOnEveryKind(t *testing.T) {
	e := newEnv(t)
	// Lease and poll bounds far above the wait allowed below: only a message can wake in time.
	opts := rlock.Options{KeyPrefix: e.Prefix, WatchdogTimeout: 30 * time.Second, FairWaitTimeout: 30 * time.Second}
	newClient := func() *rlock.Client {
		c, err := rlock.NewSharded(e.Rueidis(), opts)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, c.Close()) })
		return c
	}
	a, b := newClient(), newClient()
	// Every kind and mode: a holds a conflicting hold (see lockOps.conflict) while b waits.
	eachKind(t, func(t *testing.T, k lockKind) {
		holder := k.on(a, k.name)
		h, err := holder.conflict(0)
		require.NoError(t, err)
		waiter := k.on(b, k.name)
		got := make(chan error, 1)
		go func() {
			held, err := waiter.lock(bg)
			if err == nil {
				err = waiter.release(held)
			}
			got <- err
		}()
		waitForShardChannel(t, e)
		require.NoError(t, holder.conflictRelease(h))
		select {
		case err := <-got:
			require.NoError(t, err)
		case <-time.After(3 * time.Second):
			t.Fatal("the waiter was not woken")
		}
	})
}

// waitForShardChannel waits until a waiter of e has subscribed to a shard channel, and checks
// that no classic channel is subscribed.
func waitForShardChannel(t *testing.T, e *env) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, sharded := e.ChannelsByKind()
		return len(sharded) > 0
	}, 3*time.Second, time.Millisecond, "no shard channel subscribed")
	classic, _ := e.ChannelsByKind()
	require.Empty(t, classic, "a sharded client subscribed to a classic channel")
}
