package rlock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClient_Close: Close ends waits (ErrClosed) and hold contexts and drops the subscriptions,
// leaving the holds in Redis to their leases; calls after it return ErrClosed.
func TestClient_Close(t *testing.T) {
	eachMutexKindAndStrategy(t, func(t *testing.T, newMutex mutexMaker, wait rlock.WaitStrategy) {
		e := newEnv(t)
		e.Dirty = true // the held lock expires by itself
		c := e.client(rlock.Options{Wait: wait, WatchdogTimeout: time.Second})
		m := newMutex(c, "close")
		h, err := m.Lock(bg)
		require.NoError(t, err)

		waitErr := make(chan error, 1)
		go func() {
			_, err := m.Lock(bg)
			waitErr <- err
		}()
		time.Sleep(50 * time.Millisecond)
		require.NoError(t, c.Close())
		require.NoError(t, c.Close(), "Close is idempotent")
		select {
		case err := <-waitErr:
			require.ErrorIs(t, err, rlock.ErrClosed)
		case <-time.After(time.Second):
			t.Fatal("waiting Lock not woken by Close")
		}
		require.ErrorIs(t, context.Cause(h), rlock.ErrClosed)

		_, err = m.Lock(bg)
		assert.ErrorIs(t, err, rlock.ErrClosed)
		_, err = m.TryLock(bg, 0)
		assert.ErrorIs(t, err, rlock.ErrClosed)
		assert.ErrorIs(t, m.Unlock(h), rlock.ErrClosed)
		_, err = m.ForceUnlock(bg)
		assert.ErrorIs(t, err, rlock.ErrClosed)
		_, err = m.IsLocked(bg)
		assert.ErrorIs(t, err, rlock.ErrClosed)
		_, err = m.HoldCount(h)
		assert.ErrorIs(t, err, rlock.ErrClosed)
		_, err = m.TTL(bg)
		assert.ErrorIs(t, err, rlock.ErrClosed)
		_, err = newMutex(c, "another").Lock(bg)
		assert.ErrorIs(t, err, rlock.ErrClosed)

		locked, err := newMutex(e.client(rlock.Options{}), "close").IsLocked(bg)
		require.NoError(t, err)
		assert.True(t, locked, "Close does not release held locks")
		assert.Empty(t, e.Channels(), "Close drops the subscriptions")
	})
}

// Concurrent Close calls all return once everything is stopped: every hold
// context is done by the time any Close returns.
func TestClient_concurrentClose(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{})
	var holds []context.Context
	for i := range 1000 {
		h, err := c.NewMutex(fmt.Sprint("cc", i)).Lock(bg)
		require.NoError(t, err)
		holds = append(holds, h)
	}
	m := c.NewMutex("cc0")
	waiting := make(chan error, 1)
	go func() {
		_, err := m.Lock(bg)
		waiting <- err
	}()
	require.Eventually(t, func() bool { return len(e.Channels()) == 1 }, time.Second, time.Millisecond)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			assert.NoError(t, c.Close())
			for _, h := range holds {
				if !assert.ErrorIs(t, context.Cause(h), rlock.ErrClosed, "a Close returned before the holds ended") {
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	assert.ErrorIs(t, <-waiting, rlock.ErrClosed)
	e.Dirty = true // the locks expire with their lease
}
