package rlock_test

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
)

// Integers the Redis scripts handle are Lua numbers, doubles: exact up to 2^53 only (issue
// 23, defect 6). What cannot be kept exact is refused with ErrInvalid, changing nothing.

// max53 is 2^53.
const max53 = int64(1) << 53

// TestLimits_semaphorePermits: a semaphore of more than 2^53 permits is refused by every call
// (before: MaxInt64 permits were stored in exponent form and Available was negative); one of
// 2^53 permits counts exactly, and a semaphore of one permit fewer is told apart from it.
func TestLimits_semaphorePermits(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{})
	for _, permits := range []int64{math.MaxInt64, max53 + 1} {
		s := c.NewSemaphore("big", permits)
		_, err := s.TryAcquire(bg, 1, 0)
		assert.ErrorIs(t, err, rlock.ErrInvalid, "%d permits", permits)
		assert.ErrorContains(t, err, "2^53")
		_, err = s.Acquire(bg, 1)
		assert.ErrorIs(t, err, rlock.ErrInvalid, "%d permits", permits)
		_, err = s.Available(bg)
		assert.ErrorIs(t, err, rlock.ErrInvalid, "%d permits", permits)
		assert.Empty(t, e.Keys(), "%d permits: nothing written", permits)
	}

	s := c.NewSemaphore("exact", max53)
	h, err := s.Acquire(bg, 1)
	require.NoError(t, err)
	free, err := s.Available(bg)
	require.NoError(t, err)
	assert.Equal(t, max53-1, free, "Available counts 2^53 permits exactly")
	stored, err := e.Do("HGET", e.LockKey("exact"), "\x01p").ToString()
	require.NoError(t, err)
	assert.Equal(t, strconv.FormatInt(max53, 10), stored, "the permits are stored in digits")
	_, err = c.NewSemaphore("exact", max53-1).TryAcquire(bg, 1, 0)
	assert.ErrorIs(t, err, rlock.ErrInvalid, "2^53-1 permits are not 2^53")
	h2, err := s.TryAcquire(bg, max53-1, 0)
	require.NoError(t, err, "the other 2^53-1 permits")
	_, err = s.TryAcquire(bg, 1, 0)
	assert.ErrorIs(t, err, rlock.ErrNotObtained, "every permit is out")
	require.NoError(t, s.Release(h2))
	require.NoError(t, s.Release(h))
}

// fenced is the lock of kind k called name on c, with fencing tokens.
func fenced(k lockKind, c *rlock.Client, name string) lockOps {
	return k.on(c, name, rlock.WithFencing())
}

// TestLimits_fencingCounter: a fencing counter set to 2^53-2 gives the exact tokens 2^53-1 and
// 2^53, then a new hold fails with ErrInvalid and changes nothing (before: INCR past 2^53 gave
// the same token twice), while the holder at 2^53 re-enters and releases; a counter past 2^53
// is refused like any bad counter, by State too. Every kind with tokens.
func TestLimits_fencingCounter(t *testing.T) {
	for _, k := range kinds { // the kinds and modes with tokens of their own
		if !exclusiveKinds(k) {
			continue
		}
		t.Run(k.name, func(t *testing.T) {
			e := newEnv(t)
			c := e.client(rlock.Options{})
			name := "fence-" + k.name
			counter := e.LockKey(name) + ":fence"
			defer e.Do("DEL", counter)
			require.NoError(t, e.Do("SET", counter, strconv.FormatInt(max53-2, 10)).Error())
			for _, want := range []int64{max53 - 1, max53} {
				h, err := fenced(k, c, name).try(bg, 0)
				require.NoError(t, err)
				tok, ok := fenced(k, c, name).token(h)
				require.True(t, ok)
				assert.Equal(t, want, tok)
				if want == max53 {
					// The holder at 2^53 re-enters (no new token) and releases.
					inner, err := fenced(k, c, name).try(h, 0)
					require.NoError(t, err, "a re-entry takes no new token")
					tok, _ = fenced(k, c, name).token(inner)
					assert.Equal(t, max53, tok)
					if k.rw != nil {
						rw := k.rw(c, name, rlock.WithFencing())
						rd, err := rw.TryRLock(h, 0)
						require.NoError(t, err, "the writer's read hold takes no new token")
						tok, _ = rw.Token(rd)
						assert.Equal(t, max53, tok)
						require.NoError(t, rw.RUnlock(rd))
					}
					require.NoError(t, fenced(k, c, name).release(inner))
				}
				require.NoError(t, fenced(k, c, name).release(h))
			}
			before := e.Keys()
			_, err := fenced(k, c, name).try(bg, 0)
			require.ErrorIs(t, err, rlock.ErrInvalid, "no exact token is left")
			assert.ErrorContains(t, err, "2^53")
			v, err := e.Do("GET", counter).ToString()
			require.NoError(t, err)
			assert.Equal(t, strconv.FormatInt(max53, 10), v, "the counter is unchanged")
			assert.Equal(t, before, e.Keys(), "nothing was written")
			if k.rw != nil {
				// A reader takes no token: it gets the counter as it is.
				rw := k.rw(c, name, rlock.WithFencing())
				rd, err := rw.TryRLock(bg, 0)
				require.NoError(t, err)
				tok, _ := rw.Token(rd)
				assert.Equal(t, max53, tok)
				require.NoError(t, rw.RUnlock(rd))
			}

			// Past 2^53: not an exact integer, refused by every call.
			require.NoError(t, e.Do("SET", counter, strconv.FormatInt(max53+1, 10)).Error())
			_, err = fenced(k, c, name).try(bg, 0)
			require.ErrorIs(t, err, rlock.ErrInvalid)
			assert.ErrorContains(t, err, "2^53")
			_, err = c.State(bg, name)
			require.ErrorIs(t, err, rlock.ErrInvalid)
			assert.ErrorContains(t, err, "2^53")
			assert.Equal(t, before, e.Keys(), "nothing was written")
		})
	}
}

// TestLimits_fencingHandoff: a release that grants a fenced waiter the lock (direct handoff)
// tells it its token in digits: with a counter at 2^53-3 the waiters get 2^53-1 and 2^53
// (before, the grant message said 9.007199254741e+15); and once the counter is at 2^53 a
// release wakes the next fenced waiter (queued before) instead, whose call fails with
// ErrInvalid, leaving the counter as it was (before, it got the token 2^53 a second time).
// Fair Mutex and fair RWMutex, under pub/sub and spin, each waiter on a client of its own.
func TestLimits_fencingHandoff(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		for _, k := range kinds { // the kinds and modes with tokens of their own
			if !exclusiveKinds(k) {
				continue
			}
			if !k.queued {
				continue
			}
			t.Run(k.name, func(t *testing.T) {
				e := newEnv(t)
				name := "handoff-" + k.name
				counter := e.LockKey(name) + ":fence"
				defer e.Do("DEL", counter)
				require.NoError(t, e.Do("SET", counter, strconv.FormatInt(max53-3, 10)).Error())
				type got struct {
					c   *rlock.Client
					h   context.Context
					at  time.Time
					err error
				}
				queued := 0
				// waiter has a new client wait for the lock, once it is in the lock's queue.
				waiter := func() chan got {
					c := e.client(rlock.Options{Wait: wait})
					ch := make(chan got, 1)
					go func() {
						h, err := fenced(k, c, name).try(bg, 10*time.Second)
						ch <- got{c, h, time.Now(), err}
					}()
					queued++
					require.Eventually(t, func() bool {
						l, err := e.Do("LLEN", e.LockKey(name)+":queue").AsInt64()
						return err == nil && l == int64(queued)
					}, 5*time.Second, time.Millisecond)
					return ch
				}
				c := e.client(rlock.Options{Wait: wait})
				h, err := fenced(k, c, name).try(bg, 0)
				require.NoError(t, err)
				tok, _ := fenced(k, c, name).token(h)
				require.Equal(t, max53-2, tok)
				// The first waiter is granted 2^53-1; then two wait, the first of which is
				// granted 2^53; its release leaves no token for the last.
				chs := []chan got{waiter()}
				for i, want := range []int64{max53 - 1, max53} {
					if i == 1 {
						chs = append(chs, waiter(), waiter())
					}
					released := time.Now()
					require.NoError(t, fenced(k, c, name).release(h))
					queued--
					g := <-chs[0]
					chs = chs[1:]
					require.NoError(t, g.err)
					tok, _ = fenced(k, g.c, name).token(g.h)
					assert.Equal(t, want, tok, "the granted token")
					t.Logf("token %d granted %v after the release", tok, g.at.Sub(released).Round(10*time.Microsecond))
					c, h = g.c, g.h
				}
				require.NoError(t, fenced(k, c, name).release(h))
				g := <-chs[0]
				require.ErrorIs(t, g.err, rlock.ErrInvalid, "no exact token is left for the last waiter")
				assert.ErrorContains(t, g.err, "2^53")
				v, err := e.Do("GET", counter).ToString()
				require.NoError(t, err)
				assert.Equal(t, strconv.FormatInt(max53, 10), v, "the counter is unchanged")
			})
		}
	})
}
