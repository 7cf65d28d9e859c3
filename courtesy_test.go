package rlock

import (
	"context"
	"testing"
	"time"

	"github.com/rlock-go/rlock/internal/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// internalClient returns a Client of the tests' deployment with a key prefix of its own,
// closed when the test ends.
func internalClient(t *testing.T, prefix string) *Client {
	c, err := New(testRueidis(t), Options{KeyPrefix: prefix})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// The courtesy window holds back the releasing client's new Lock calls, not its waiters that
// had already tried and that the release woke. The window is opened by hand
// here, 2s wide, so the measurement cannot be mistaken.
func TestCourtesy_sparesWaitersThatTried(t *testing.T) {
	prefix := "rlcourt" + NewOwnerID()[:8]
	holderClient, waiterClient := internalClient(t, prefix), internalClient(t, prefix)
	holder, waiter := holderClient.NewMutex("c"), waiterClient.NewMutex("c")
	h, err := holder.Lock(context.Background())
	require.NoError(t, err)
	got := make(chan time.Time, 1)
	go func() {
		w, err := waiter.Lock(context.Background())
		got <- time.Now()
		if assert.NoError(t, err) {
			assert.NoError(t, waiter.Unlock(w))
		}
	}()
	require.Eventually(t, func() bool {
		waiter.sh.mu.Lock()
		defer waiter.sh.mu.Unlock()
		s := waiter.sh.subs.m[waiter.keys.Channel]
		return s != nil && s.refs == 1
	}, time.Second, time.Millisecond)
	time.Sleep(5 * time.Millisecond) // the waiter has tried and sleeps

	openWindow := func() { // a window far longer than any handoff, so timing cannot blur it
		waiter.sh.mu.Lock()
		if waiter.sh.courtesy.until == nil {
			waiter.sh.courtesy.until = make(map[string]time.Time)
		}
		waiter.sh.courtesy.until[waiter.keys.Lock] = time.Now().Add(2 * time.Second)
		waiter.sh.mu.Unlock()
	}
	openWindow()
	start := time.Now()
	require.NoError(t, holder.Unlock(h))
	d := (<-got).Sub(start)
	assert.Less(t, d, time.Second, "the woken waiter did not sit out its client's window")

	// A new Lock call of that client does sit it out.
	openWindow()
	start = time.Now()
	w, err := waiter.Lock(context.Background())
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), 1900*time.Millisecond, "a new call keeps the window")
	require.NoError(t, waiter.Unlock(w))
}

// An addressed wake-up for a fair waiter of this client that arrives between its first attempt
// and the registration of its wake-up is kept, however many messages for other clients' waiters
// arrive meanwhile.
func TestSubscription_keepsWakeUpOfArrivingWaiter(t *testing.T) {
	c := internalClient(t, "rlunclaimed"+NewOwnerID()[:8])
	const channel = "rlunclaimed:{x}:ch"
	sh := c.shards.of("rlunclaimed:{x}")
	sh.subs.arrive(channel, "me", 1)
	s := sh.subs.subscribe(channel)
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
