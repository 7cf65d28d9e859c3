package rlock

// The package's internal tests: what wakes a waiter, seen from inside a subscription.

import (
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/internal/wire"
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

// An addressed wake-up for a fair waiter of this client that arrives between its first attempt
// and the registration of its wake-up is kept, however many messages for other clients' waiters
// arrive meanwhile.
func TestWakeup_keepsWakeUpOfArrivingWaiter(t *testing.T) {
	c, err := New(testRueidis(t), Options{KeyPrefix: "rlunclaimed" + NewOwnerID()[:8]})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	const channel = "rlunclaimed:{x}:ch"
	sh := c.shards.of("rlunclaimed:{x}")
	sh.subs.arrive(channel, "me", 1)
	s := sh.subs.subscribe(channel, time.Time{})
	require.NotNil(t, s)
	s.deliver(wire.AddressedPrefix + "me")
	for i := range 5000 {
		s.deliver(wire.AddressedPrefix + "other" + NewOwnerID()[:6] + string(rune('a'+i%26)))
	}
	s.mu.Lock()
	assert.Len(t, s.unclaimed, 1, "messages for owners not arriving here are not kept")
	s.mu.Unlock()
	a := &addressee{wake: make(chan struct{}, 1)}
	s.address("me", a, true)
	select {
	case <-a.wake:
	default:
		t.Fatal("the arriving waiter's wake-up was dropped")
	}
	s.address("me", a, false)
	sh.subs.arrive(channel, "me", -1)
	sh.subs.unsubscribe(s, false)
}
