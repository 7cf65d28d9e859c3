package rlock_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
)

// queueLen is the number of waiters in a fair lock's queue.
func (e *env) queueLen(name string) int64 {
	n, err := e.Do("LLEN", e.Prefix+":{"+name+"}:queue").AsInt64()
	require.NoError(e.T, err)
	return n
}

// awaitQueue waits until name's queue holds n waiters.
func (e *env) awaitQueue(name string, n int64) {
	e.T.Helper()
	require.Eventually(e.T, func() bool { return e.queueLen(name) == n }, 5*time.Second, time.Millisecond,
		"queue of %s never reached %d", name, n)
}

// inversions counts pairs acquired in the opposite order of their arrival.
func inversions(order []int) int {
	n := 0
	for i := range order {
		for j := i + 1; j < len(order); j++ {
			if order[i] > order[j] {
				n++
			}
		}
	}
	return n
}

// lockAndRelease locks m in a new goroutine, releases it at once, and then sends the time
// Lock returned.
func lockAndRelease(t *testing.T, m *rlock.Mutex) <-chan time.Time {
	got := make(chan time.Time, 1)
	go func() {
		h, err := m.Lock(bg)
		at := time.Now()
		if assert.NoError(t, err) {
			assert.NoError(t, m.Unlock(h))
		}
		got <- at
	}()
	return got
}

// TestFairMutex_fifoGoroutines queues 50 waiters in a known order behind a held lock: they
// acquire in that order.
func TestFairMutex_fifoGoroutines(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		c := e.client(rlock.Options{Wait: wait})
		m := c.NewFairMutex("fifo")
		h, err := m.Lock(bg)
		require.NoError(t, err)

		const n = 50
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h, err := m.Lock(bg)
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				assert.NoError(t, m.Unlock(h))
			}()
			e.awaitQueue("fifo", int64(i+1))
		}
		require.NoError(t, m.Unlock(h))
		wg.Wait()
		require.Len(t, order, n)
		assert.Zero(t, inversions(order), "acquisition order %v", order)
		t.Logf("FIFO inversions among %d goroutines: %d", n, inversions(order))
	})
}

// TestFairMutex_fifoProcesses queues 4 OS processes one after another: they acquire in
// arrival order.
func TestFairMutex_fifoProcesses(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		m := e.client(rlock.Options{}).NewFairMutex("xfifo")
		h, err := m.Lock(bg)
		require.NoError(t, err)
		orderKey := e.Prefix + ":order"
		t.Cleanup(func() { e.Do("DEL", orderKey) })
		const procs = 4
		children := make([]*redistest.Child, procs)
		for i := range children {
			children[i] = redistest.StartChild(t, "order", "PREFIX="+e.Prefix, "LOCK=xfifo", "KIND=fair",
				"ORDER="+orderKey, "ID="+strconv.Itoa(i), "WAIT="+wait.String()[:4])
			children[i].Expect(t, "waiting")
			e.awaitQueue("xfifo", int64(i+1))
		}
		require.NoError(t, m.Unlock(h))
		for _, c := range children {
			c.Wait(t)
		}
		got, err := e.Do("LRANGE", orderKey, "0", "-1").AsStrSlice()
		require.NoError(t, err)
		assert.Equal(t, []string{"0", "1", "2", "3"}, got, "acquisition order equals arrival order")
	})
}

// TestFairMutex_killedWaiter kills (SIGKILL) a waiter process that heads the queue: the next
// waiter is delayed by at most FairWaitTimeout plus one poll.
func TestFairMutex_killedWaiter(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		const fairWait = time.Second
		c := e.client(rlock.Options{Wait: wait, FairWaitTimeout: fairWait})
		m := c.NewFairMutex("dead")
		h, err := m.Lock(bg)
		require.NoError(t, err)

		dead := redistest.StartChild(t, "order", "PREFIX="+e.Prefix, "LOCK=dead", "KIND=fair", "ORDER="+e.Prefix+":order",
			"ID=dead", "FAIRWAIT="+fairWait.String())
		dead.Expect(t, "waiting")
		e.awaitQueue("dead", 1)
		got := lockAndRelease(t, m)
		e.awaitQueue("dead", 2)
		require.NoError(t, dead.Cmd.Process.Kill())
		killed := time.Now()
		require.NoError(t, m.Unlock(h))

		select {
		case at := <-got:
			delay := at.Sub(killed)
			t.Logf("a killed queued waiter delayed the next one by %v (FairWaitTimeout %v)", delay, fairWait)
			assert.Less(t, delay, fairWait+fairWait/3+200*time.Millisecond, "at most FairWaitTimeout plus one poll")
		case <-time.After(5 * fairWait):
			t.Fatal("the waiter behind a dead one never acquired")
		}
	})
}

// TestFairMutex_givingUpLeavesNothing: a cancelled waiter and a timed-out TryLock remove their
// entries, and the waiter behind them is not delayed.
func TestFairMutex_givingUpLeavesNothing(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		c := e.client(rlock.Options{Wait: wait, FairWaitTimeout: 3 * time.Second})
		m := c.NewFairMutex("give-up")
		h, err := m.Lock(bg)
		require.NoError(t, err)

		ctx, cancel := context.WithCancel(bg)
		cancelled := make(chan error, 1)
		go func() {
			_, err := m.Lock(ctx)
			cancelled <- err
		}()
		e.awaitQueue("give-up", 1)
		timedOut := make(chan error, 1)
		go func() {
			_, err := m.TryLock(bg, 300*time.Millisecond)
			timedOut <- err
		}()
		e.awaitQueue("give-up", 2)
		behind := lockAndRelease(t, m)
		e.awaitQueue("give-up", 3)

		cancel()
		require.ErrorIs(t, <-cancelled, context.Canceled)
		require.ErrorIs(t, <-timedOut, rlock.ErrNotObtained)
		assert.EqualValues(t, 1, e.queueLen("give-up"), "both gave-up entries are gone")
		n, err := e.Do("ZCARD", e.Prefix+":{give-up}:deadlines").AsInt64()
		require.NoError(t, err)
		assert.EqualValues(t, 1, n, "and their deadlines")

		released := time.Now()
		require.NoError(t, m.Unlock(h))
		at := <-behind
		assert.Less(t, at.Sub(released), time.Second, "the waiter behind was not delayed to its next refresh")
	})
}

// TestFairMutex_manyWaiters: 200 concurrent waiters across 4 clients all acquire, guarding a
// non-atomic counter.
func TestFairMutex_manyWaiters(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		const clients, perClient = 4, 50
		var counter, inside, overlaps int64
		var wg sync.WaitGroup
		for range clients {
			m := e.client(rlock.Options{Wait: wait}).NewFairMutex("many")
			for range perClient {
				wg.Add(1)
				go func() {
					defer wg.Done()
					h, err := m.Lock(bg)
					if !assert.NoError(t, err) {
						return
					}
					if atomic.AddInt64(&inside, 1) != 1 {
						atomic.AddInt64(&overlaps, 1)
					}
					v := counter
					counter = v + 1
					atomic.AddInt64(&inside, -1)
					assert.NoError(t, m.Unlock(h))
				}()
			}
		}
		wg.Wait()
		assert.Zero(t, overlaps)
		assert.EqualValues(t, clients*perClient, counter)
	})
}

// TestFairMutex_TryLockZeroNeverJumpsTheQueue: a single attempt fails while others wait, even
// when the lock is momentarily free.
func TestFairMutex_TryLockZeroNeverJumpsTheQueue(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{WatchdogTimeout: time.Second})
	m := c.NewFairMutex("nojump")
	h, err := m.Lock(bg)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		h, err := m.Lock(bg)
		if err == nil {
			time.Sleep(100 * time.Millisecond)
			err = m.Unlock(h)
		}
		got <- err
	}()
	e.awaitQueue("nojump", 1)
	// Free the lock behind the waiter's back (no wake-up): it is free, but someone waits.
	_, err = e.Do("DEL", e.Prefix+":{nojump}").AsInt64()
	require.NoError(t, err)
	_, err = m.TryLock(bg, 0)
	require.ErrorIs(t, err, rlock.ErrNotObtained)
	assert.ErrorIs(t, m.Unlock(h), rlock.ErrLockLost)
	require.NoError(t, <-got)
	h, err = m.TryLock(bg, 0)
	require.NoError(t, err, "with nobody waiting, a single attempt takes the free lock")
	require.NoError(t, m.Unlock(h))
}

// clientCommands sums, from every master's INFO commandstats, the commands this library sends
// itself (scripts, and pub/sub (un)subscriptions); the calls scripts make inside are not counted.
func (e *env) clientCommands() int64 {
	var n int64
	for _, m := range e.Dep.Masters {
		info, err := m.Do(e.T, "INFO", "commandstats").ToString()
		require.NoError(e.T, err)
		for _, line := range strings.Split(info, "\n") {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
			if !ok {
				continue
			}
			switch strings.TrimPrefix(name, "cmdstat_") {
			case "evalsha", "eval", "evalsha_ro", "eval_ro", "subscribe", "unsubscribe", "ssubscribe", "sunsubscribe":
				calls, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
				n += calls
			}
		}
	}
	return n
}

// TestFairMutex_commandsPerAcquisition: under contention a fair acquisition costs about three
// commands (the waiter's queued attempt, its attempt on the head's wake-up, the release),
// whatever the number of waiters, because a release wakes only the head.
func TestFairMutex_commandsPerAcquisition(t *testing.T) {
	redistest.NeedsRedis(t)
	perAcq := map[int]float64{}
	for _, waiters := range []int{10, 100} {
		t.Run(strconv.Itoa(waiters), func(t *testing.T) {
			e := newEnv(t)
			mutexes := make([]*rlock.Mutex, 4)
			for i := range mutexes {
				mutexes[i] = e.client(rlock.Options{}).NewFairMutex("cmds")
			}
			const acquisitions = 600
			var left atomic.Int64
			left.Store(acquisitions)
			before := e.clientCommands()
			var wg sync.WaitGroup
			for i := range waiters {
				m := mutexes[i%len(mutexes)]
				wg.Add(1)
				go func() {
					defer wg.Done()
					for left.Add(-1) >= 0 {
						h, err := m.Lock(bg)
						if !assert.NoError(t, err) {
							return
						}
						time.Sleep(200 * time.Microsecond)
						assert.NoError(t, m.Unlock(h))
					}
				}()
			}
			wg.Wait()
			perAcq[waiters] = float64(e.clientCommands()-before) / acquisitions
			t.Logf("%d waiters: %.2f commands per acquisition", waiters, perAcq[waiters])
			assert.LessOrEqual(t, perAcq[waiters], 3.5)
		})
	}
	assert.Less(t, perAcq[100], perAcq[10]*1.25, "commands per acquisition do not grow with the waiters")
}

// A fair queue whose deadlines lost an entry (a volatile-* eviction drops a key
// whole; an edit drops a member) does not block the queue forever.
func TestFairMutex_queueWithoutDeadlines(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		m := e.client(rlock.Options{Wait: wait}).NewFairMutex("ev")
		require.NoError(t, e.Do("RPUSH", e.LockKey("ev")+":queue", "ghost").Error())
		require.NoError(t, e.Do("PEXPIRE", e.LockKey("ev")+":queue", "10000").Error())
		h, err := m.TryLock(bg, 2*time.Second)
		require.NoError(t, err, "a queue head without a deadline is dead")
		require.NoError(t, m.Unlock(h))
	})
}
