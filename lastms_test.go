package rlock_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pinLastMs is a script that waits for the server clock's next millisecond T and then ARGV[1]
// microseconds more, and makes key KEYS[1] expire at the end of millisecond T: a script that
// starts before then and reads its PTTL after (the clock moves on while a script runs) reads 0,
// with the key still there. The next command it lets in lands at a different point of that
// millisecond for each ARGV[1].
const pinLastMs = `
local function us() local t = redis.call('TIME') return t[1] * 1000000 + t[2] end
local start = math.floor(us() / 1000)
local t = us()
while math.floor(t / 1000) == start do t = us() end
local T = math.floor(t / 1000)
while us() < T * 1000 + tonumber(ARGV[1]) do end
return redis.call('pexpireat', KEYS[1], T + 1)`

// A grant found by polling in its claim's last millisecond (issue 16, defect 2): the poll reads
// PTTL 0, which must not be taken as "no claim" (a full lease): the hold context must end no
// later than the key. The proxy runs pinLastMs just before it forwards the waiter's poll, once
// the release has granted the lock, so that the poll lands in the grant's last millisecond.
func TestHandoff_grantInLastMillisecond(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		p := e.newProxy()
		key := e.LockKey("m")
		match := matchScript("fair_acquire.lua", key)
		moves := scriptTimeMoves(t, e)
		// pin makes the key expire at the end of the server's current millisecond. pinLastMs
		// needs TIME to move while a script runs; Redis 8 and Valkey 8 give a script the time it
		// started at, so there the test reads TIME and sets the expiry itself, a round trip
		// later: fewer polls land in the last millisecond, but those that do count the same.
		pin := func(us int64) error {
			if moves {
				return e.Admin().Do(context.Background(), e.Admin().B().Eval().Script(pinLastMs).Numkeys(1).Key(key).Arg(strconv.FormatInt(us, 10)).Build()).Error()
			}
			now, err := e.Do("TIME").AsStrSlice()
			if err != nil {
				return err
			}
			sec, _ := strconv.ParseInt(now[0], 10, 64)
			usec, _ := strconv.ParseInt(now[1], 10, 64)
			return e.Do("PEXPIREAT", key, strconv.FormatInt(sec*1000+usec/1000+1, 10)).Error()
		}
		var armed atomic.Bool
		var offset atomic.Int64 // µs into the pinned millisecond at which the poll is let in
		p.DropRequest(func(cmd []string) bool {
			if !match(cmd) || !armed.Load() {
				return false
			}
			// Hold the poll until the release has granted the lock, then pin its last ms.
			for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
				g, _ := e.Do("HGET", key, wire.FieldGrant).ToString()
				if g != "" {
					armed.Store(false)
					assert.NoError(t, pin(offset.Load()))
					break
				}
				time.Sleep(100 * time.Microsecond)
			}
			return false
		})
		opts := rlock.Options{WatchdogTimeout: 3 * time.Second, FairWaitTimeout: 3 * time.Second, Wait: wait}
		holder := e.client(opts).NewFairMutex("m")
		vc := e.through(p).client(opts)
		v := vc.NewFairMutex("m", rlock.WithLease(200*time.Millisecond))
		ctx := context.Background()

		hits := 0
		const cycles = 60
		for cycle := 0; cycle < cycles; cycle++ {
			h, err := holder.Lock(ctx)
			require.NoError(t, err)
			got := make(chan context.Context, 1)
			go func() {
				vh, err := v.Lock(ctx)
				assert.NoError(t, err)
				got <- vh
			}()
			e.awaitQueue("m", 1)
			offset.Store(int64(cycle*113) % 1000)
			if wait == strategies[0].wait {
				// PubSub: cut the waiter's connections, so that the attempt its resubscription
				// wakes is held (below) until the release, and finds the grant.
				p.CutAll()
				time.Sleep(time.Millisecond)
			}
			armed.Store(true)
			require.NoError(t, holder.Unlock(h))
			var vh context.Context
			select {
			case vh = <-got:
			case <-time.After(5 * time.Second):
				t.Fatal("the waiter did not get the lock")
			}
			armed.Store(false)
			require.NotNil(t, vh)
			time.Sleep(5 * time.Millisecond) // past any grant's claim of a few ms
			n, err := e.Do("EXISTS", key).AsInt64()
			require.NoError(t, err)
			if n == 0 {
				// The poll ran in the grant's last millisecond: the key is gone now, so the hold
				// context must be over by its own deadline.
				hits++
				dl, ok := vh.Deadline()
				require.True(t, ok)
				assert.False(t, dl.After(time.Now()), "hold context ends %v after the key did", time.Until(dl))
				_ = v.Unlock(vh)
				continue
			}
			// The key is there, but on a loaded machine a claim of a few ms can end before the
			// watchdog's early renewal is confirmed: the hold context ended by its deadline and
			// the hold is lost (the key, renewed, ends with its lease). Ending early is allowed;
			// ending after Redis's lease is not.
			if err := v.Unlock(vh); err != nil {
				require.ErrorIs(t, err, rlock.ErrLockLost)
				require.Error(t, vh.Err(), "Unlock reports the hold lost while its context is live")
			}
		}
		t.Logf("grants found with at most a few ms left: %d of %d cycles", hits, cycles)
		if hits == 0 {
			t.Skip("no poll landed in the grant's last millisecond (a loaded machine)")
		}
	})
}

// scriptTimeMoves reports whether TIME moves while a script runs on e's server (Redis 7.0 does;
// Redis 8 and Valkey 8 return the time the script started at).
func scriptTimeMoves(t *testing.T, e *env) bool {
	t.Helper()
	const probe = `local a = redis.call('TIME') for i = 1, 2000000 do end local b = redis.call('TIME')
return (b[1] - a[1]) * 1000000 + (b[2] - a[2])`
	d, err := e.Admin().Do(context.Background(), e.Admin().B().Eval().Script(probe).Numkeys(0).Build()).AsInt64()
	require.NoError(t, err)
	return d > 0
}

// TestLease_shortEndsByRedis: a read-write mutex's and a semaphore's leases are kept in whole
// server milliseconds (the millisecond the script ran in, plus the lease), and a hold lapses
// once the server's clock reaches that end: up to 1ms before the lease has passed since the
// request arrived. A hold context must end no later even for a lease under 10ms (or a claim
// found with that little left), where a tenth of the lease is less than that millisecond:
// each of 100 holds with WithLease(5ms) per mode has a deadline no later than its lease end in
// Redis (the leases' sorted set, or for a lone hold the hash's expiry). (Before the fix the margin was at most a tenth of the lease: about 40% of them ended
// up to 0.5ms after it.)
func TestLease_shortEndsByRedis(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{})
	rw := c.NewRWMutex("rw", rlock.WithLease(5*time.Millisecond))
	sem := c.NewSemaphore("sem", 1, rlock.WithLease(5*time.Millisecond))
	type target struct {
		name, base, leases string
		lock               func() (context.Context, error)
		unlock             func(context.Context) error
	}
	acquire := func(ctx context.Context) (context.Context, error) { return sem.Acquire(ctx, 1) }
	for _, k := range []target{
		{"write", e.kindBase("rw"), e.kindBase("rw") + ":leases", func() (context.Context, error) { return rw.Lock(bg) }, rw.Unlock},
		{"read", e.kindBase("rw"), e.kindBase("rw") + ":leases", func() (context.Context, error) { return rw.RLock(bg) }, rw.RUnlock},
		{"semaphore", e.kindBase("sem"), e.kindBase("sem") + ":leases", func() (context.Context, error) { return acquire(bg) }, sem.Release},
	} {
		late, read := 0, 0
		var worst time.Duration
		for range 100 {
			h, err := k.lock()
			require.NoError(t, err)
			dl, ok := h.Deadline()
			require.True(t, ok, "a fixed lease's hold context has a deadline")
			ends, err := e.Do("ZRANGE", k.leases, "0", "-1", "WITHSCORES").AsZScores()
			require.NoError(t, err)
			var endMs int64
			if len(ends) == 1 {
				endMs = int64(ends[0].Score)
			} else if len(ends) == 0 {
				// A lone hold keeps its lease in the hash's expiry (see wire.FieldLone).
				endMs, err = e.Do("PEXPIRETIME", k.base).AsInt64()
				require.NoError(t, err)
			}
			if endMs > 0 { // (else the lease lapsed and was dropped already: a slow machine)
				read++
				end := endMs * int64(time.Millisecond)
				if over := time.Duration(dl.UnixNano() - end); over > 0 {
					late++
					worst = max(worst, over)
				}
			}
			if err := k.unlock(h); err != nil {
				require.ErrorIs(t, err, rlock.ErrLockLost)
			}
		}
		t.Logf("%s: %d of %d hold contexts with a deadline after their lease end in Redis, by up to %v",
			k.name, late, read, worst)
		require.Positive(t, read, "%s: no lease read before it lapsed", k.name)
		assert.Zero(t, late, "%s: hold contexts that outlive their lease in Redis", k.name)
	}
}
