package rlock_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncBuffer is a log sink safe for the watchdog goroutine and the test to share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startWaiters starts n goroutines that each Lock m once, hold it briefly and Unlock; the
// returned channel yields each one's error.
func startWaiters(m *rlock.Mutex, n int) <-chan error {
	done := make(chan error, n)
	for range n {
		go func() {
			h, err := m.Lock(bg)
			if err == nil {
				time.Sleep(time.Millisecond)
				err = m.Unlock(h)
			}
			done <- err
		}()
	}
	return done
}

func requireAll(t *testing.T, done <-chan error, n int, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for range n {
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-deadline:
			t.Fatalf("waiters did not all acquire within %v", within)
		}
	}
}

// TestFault_pubsubConnectionKilled kills the waiters' pub/sub connections (CLIENT KILL TYPE
// pubsub) and releases the lock at once, so the unlock message is lost: the waiters must still
// acquire, through re-subscription and the lease bound.
func TestFault_pubsubConnectionKilled(t *testing.T) {
	needsThrowaway(t)
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		holder := e.client(rlock.Options{WatchdogTimeout: time.Second}).NewMutex("killed")
		h, err := holder.Lock(bg)
		require.NoError(t, err)

		const n = 5
		waiting := e.client(rlock.Options{Wait: wait, WatchdogTimeout: time.Second}).NewMutex("killed")
		done := startWaiters(waiting, n)
		if wait.String() == "pubsub" {
			require.Eventually(t, func() bool { return len(e.channels()) == 1 }, time.Second, 5*time.Millisecond)
		} else {
			time.Sleep(50 * time.Millisecond)
		}
		killed, err := e.do("CLIENT", "KILL", "TYPE", "pubsub").AsInt64()
		require.NoError(t, err)
		if wait.String() == "pubsub" {
			assert.Positive(t, killed)
		}
		require.NoError(t, holder.Unlock(h))
		requireAll(t, done, n, 5*time.Second)
	})
}

// TestFault_scriptFlush empties the server's script cache while a lock is held and waited for.
func TestFault_scriptFlush(t *testing.T) {
	needsThrowaway(t)
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		m := e.client(rlock.Options{Wait: wait, WatchdogTimeout: time.Second}).NewMutex("flush")
		h, err := m.Lock(bg)
		require.NoError(t, err)
		done := startWaiters(m, 3)
		time.Sleep(50 * time.Millisecond)
		require.NoError(t, e.do("SCRIPT", "FLUSH").Error())
		inner, err := m.Lock(h)
		require.NoError(t, err, "re-entry after SCRIPT FLUSH")
		require.NoError(t, m.Unlock(inner))
		require.NoError(t, m.Unlock(h))
		requireAll(t, done, 3, 5*time.Second)
		time.Sleep(time.Second) // across renewals of a re-flushed cache
		require.NoError(t, e.do("SCRIPT", "FLUSH").Error())
		locked, err := m.IsLocked(bg)
		require.NoError(t, err)
		assert.False(t, locked)
	})
}

// debugSleep blocks the whole server for d (DEBUG SLEEP) from a connection of its own.
func debugSleep(t *testing.T, e *env, d time.Duration) <-chan error {
	needsThrowaway(t)
	rc := newRueidis(t, e.addr)
	done := make(chan error, 1)
	go func() {
		done <- rc.Do(bg, rc.B().Arbitrary("DEBUG", "SLEEP", strconv.FormatFloat(d.Seconds(), 'f', 3, 64)).Build()).Error()
	}()
	time.Sleep(50 * time.Millisecond) // let the sleep start first
	return done
}

// replyCutter is a TCP proxy in front of Redis that can lose a reply: armed, it drops the next
// server reply that is a two-element array (as the release script returns) and closes that
// connection, after the server has run the command.
type replyCutter struct {
	ln    net.Listener
	armed atomic.Bool
	cut   atomic.Int64
}

func newReplyCutter(t *testing.T, target string) *replyCutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &replyCutter{ln: ln}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			wg.Add(2)
			go func() { // client -> server
				defer wg.Done()
				_, _ = io.Copy(server, client)
				server.Close()
			}()
			go func() { // server -> client, losing one reply when armed
				defer wg.Done()
				defer client.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := server.Read(buf)
					if bytes.HasPrefix(buf[:n], []byte("*2\r\n")) && p.armed.CompareAndSwap(true, false) {
						p.cut.Add(1)
						server.Close()
						return
					}
					if n > 0 {
						if _, err := client.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return p
}

// TestFault_unlockReplayAfterLostReply loses the reply of an Unlock's release script after the
// server ran it (the connection drops): Unlock retries with the same request id and the
// script recognises it, so a partial release is not counted twice and a final one is not
// mistaken for a lost lock.
func TestFault_unlockReplayAfterLostReply(t *testing.T) {
	e := newEnv(t)
	proxy := newReplyCutter(t, e.addr)
	proxied := &env{t: t, addr: proxy.ln.Addr().String(), admin: e.admin, prefix: e.prefix}
	m := proxied.client(rlock.Options{}).NewMutex("replay")
	outer, err := m.Lock(bg)
	require.NoError(t, err)
	inner, err := m.Lock(outer)
	require.NoError(t, err)
	inner2, err := m.Lock(inner)
	require.NoError(t, err)

	proxy.armed.Store(true)
	require.NoError(t, m.Unlock(inner2))
	require.EqualValues(t, 1, proxy.cut.Load(), "the release reply was lost")
	n, err := m.HoldCount(outer)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the retried release did not count twice")

	require.NoError(t, m.Unlock(inner))
	proxy.armed.Store(true)
	require.NoError(t, m.Unlock(outer), "the final release ran; its retry reports success, not a lost lock")
	require.EqualValues(t, 2, proxy.cut.Load())
	require.ErrorIs(t, context.Cause(outer), context.Canceled)
	assert.ErrorIs(t, m.Unlock(outer), rlock.ErrNotHeld)
}

// TestFault_renewalErrorsAreRetried blocks the server (DEBUG SLEEP) right after a renewal, long
// enough that the next renewal times out but shorter than the lease: the failure is logged,
// the next tick renews, and the hold survives.
func TestFault_renewalErrorsAreRetried(t *testing.T) {
	e := newEnv(t)
	var logs syncBuffer
	const timeout = 1500 * time.Millisecond // renewals every 500ms, each given 500ms
	c := e.client(rlock.Options{WatchdogTimeout: timeout, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	m := c.NewMutex("renew-err")
	h, err := m.Lock(bg)
	require.NoError(t, err)

	// Wait for a renewal (the TTL jumps back up), then block the server until 1.1s after it:
	// the next renewal, at 0.5s, gets no reply before 1.0s; the lease lasts until 1.5s.
	waitRenewal(t, m)
	require.NoError(t, <-debugSleep(t, e, 1050*time.Millisecond))
	time.Sleep(timeout / 2)
	assert.Contains(t, logs.String(), "lease renewal failed")
	require.NoError(t, h.Err(), "a failed renewal does not drop the hold; log:\n%s", logs.String())
	ttl, err := m.TTL(bg)
	require.NoError(t, err)
	assert.Greater(t, ttl, timeout/3)
	require.NoError(t, m.Unlock(h))
}

// TestFault_restartedServer restarts Redis (without persistence) under a held lock: the
// watchdog finds the owner gone and cancels the hold with ErrLockLost; locking works again.
func TestFault_restartedServer(t *testing.T) {
	srv, err := startRedis("")
	require.NoError(t, err)
	t.Cleanup(srv.stop)
	e := newEnvAt(t, srv.addr)
	const timeout = 900 * time.Millisecond
	m := e.client(rlock.Options{WatchdogTimeout: timeout}).NewMutex("restart")
	h, err := m.Lock(bg)
	require.NoError(t, err)

	srv.kill()
	require.NoError(t, srv.start())
	require.ErrorIs(t, causeOf(h, 3*timeout), rlock.ErrLockLost)
	require.ErrorIs(t, m.Unlock(h), rlock.ErrLockLost)

	h, err = m.TryLock(bg, time.Second)
	require.NoError(t, err, "locking works after the restart (scripts reloaded)")
	require.NoError(t, m.Unlock(h))
}

// TestFault_serverGone stops Redis for good under a held lock: renewals fail, and once they
// have failed for a whole lease the hold context is cancelled with ErrLockLost (the lease can
// only have lapsed), while Lock calls fail or keep retrying rather than pretend to succeed.
func TestFault_serverGone(t *testing.T) {
	srv, err := startRedis("")
	require.NoError(t, err)
	t.Cleanup(srv.stop)
	e := newEnvAt(t, srv.addr)
	e.dirty = true // the server is gone: nothing to check
	const timeout = 900 * time.Millisecond
	m := e.client(rlock.Options{WatchdogTimeout: timeout}).NewMutex("gone")
	h, err := m.Lock(bg)
	require.NoError(t, err)

	srv.kill()
	start := time.Now()
	require.ErrorIs(t, causeOf(h, 3*timeout), rlock.ErrLockLost)
	assert.GreaterOrEqual(t, time.Since(start), timeout/2, "not before the lease could have lapsed")
	assert.ErrorIs(t, m.Unlock(h), rlock.ErrLockLost)

	ctx, cancel := context.WithTimeout(bg, 300*time.Millisecond)
	defer cancel()
	_, err = m.Lock(ctx)
	require.Error(t, err, "no lock without a server")
}
