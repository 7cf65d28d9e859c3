package rlock_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/internal/wire"
)

// Direct handoff (issue 11): a release of a queued kind (fair Mutex, fair RWMutex, Semaphore: the
// rows of kinds that queuedKinds takes) grants the lock to the queue's head and says so in the
// wake-up, so the head returns without another round trip. These tests check that it does, and that
// it stays as safe and as live as waking: a grant's claim bounds what a waiter that is gone costs,
// a waiter that gives up gives its grant back, a grant nobody heard of is found by the waiter's
// next poll, and fixed leases and fencing tokens stay exact.

// pair is the lock of kind k called name on c: how to take and give back one of its holds.
func pair(k lockKind, c *rlock.Client, name string, opts ...rlock.MutexOption) (take func(context.Context) (context.Context, error), release func(context.Context) error) {
	ops := k.on(c, name, opts...)
	return ops.lock, ops.release
}

// countScripts makes p count the requests that run script on key (it never fires).
func countScripts(p *redistest.Proxy, script, key string) *atomic.Int64 {
	var n atomic.Int64
	match := matchScript(script, key)
	p.DropRequest(func(cmd []string) bool {
		if match(cmd) {
			n.Add(1)
		}
		return false
	})
	return &n
}

// handoffOpts are the client options of these tests: a claim (FairWaitTimeout) of 1s, below
// the watchdog lease of 3s, so a grant's lease is visibly the claim until it is extended.
var handoffOpts = rlock.Options{WatchdogTimeout: 3 * time.Second, FairWaitTimeout: time.Second}

func TestHandoff_grantWithoutRoundTrip(t *testing.T) {
	for _, k := range kinds {
		if !queuedKinds(k) {
			continue
		}
		t.Run(k.name, func(t *testing.T) {
			e := newEnv(t)
			p := e.newProxy()
			attempts := countScripts(p, k.acquireScript, e.LockKey("h"))
			holder := e.client(handoffOpts)
			waiter := e.through(p).client(handoffOpts)
			take, release := pair(k, holder, "h")
			wtake, wrelease := pair(k, waiter, "h")
			ctx := context.Background()

			h, err := take(ctx)
			require.NoError(t, err)
			got := make(chan context.Context, 1)
			go func() {
				wh, err := wtake(ctx)
				assert.NoError(t, err)
				got <- wh
			}()
			// The first attempt queues the waiter; its subscription's confirmation may wake it for
			// one more (a release may have come before it subscribed). Then it sleeps.
			require.Eventually(t, func() bool { return attempts.Load() >= 1 }, 5*time.Second, time.Millisecond)
			time.Sleep(50 * time.Millisecond)
			before := attempts.Load()
			require.NoError(t, release(h))
			var wh context.Context
			select {
			case wh = <-got:
			case <-time.After(5 * time.Second):
				t.Fatal("the waiter was not handed the lock")
			}
			assert.Equal(t, before, attempts.Load(), "the waiter returned on the grant, without another attempt")

			// The grant's lease is the claim; the holder extends it to the watchdog lease off the
			// critical path, long before the claim runs out.
			pttl, err := e.Do("PTTL", e.LockKey("h")).AsInt64()
			require.NoError(t, err)
			if k.name == "fair" {
				assert.LessOrEqual(t, pttl, int64(1000), "the grant's lease is the claim")
				require.Eventually(t, func() bool {
					pttl, _ := e.Do("PTTL", e.LockKey("h")).AsInt64()
					return pttl > 1500
				}, 2*time.Second, 5*time.Millisecond, "the claim was extended to the lease")
			} else {
				leaseLeft := func() int64 {
					ids, err := e.Do("ZRANGE", e.LockKey("h")+":leases", "0", "0").AsStrSlice()
					require.NoError(t, err)
					require.Len(t, ids, 1)
					end, err := e.Do("ZSCORE", e.LockKey("h")+":leases", ids[0]).AsInt64()
					require.NoError(t, err)
					now, err := e.Do("TIME").AsStrSlice()
					require.NoError(t, err)
					return end - (parseMs(now[0])*1000 + parseMs(now[1])/1000)
				}
				assert.LessOrEqual(t, leaseLeft(), int64(1000), "the grant's lease is the claim")
				require.Eventually(t, func() bool { return leaseLeft() > 1500 }, 2*time.Second, 5*time.Millisecond,
					"the claim was extended to the lease")
			}
			time.Sleep(1200 * time.Millisecond) // past the claim
			require.NoError(t, wh.Err(), "the hold outlives its claim")
			require.NoError(t, wrelease(wh))
		})
	}
}

// TestHandoff_giveUpGivesGrantBack: a waiter that polls rarely (Spin 10s) and so has not heard
// of its grant gives up; the grant goes back and on to the next waiter at once, not when the
// claim runs out.
func TestHandoff_giveUpGivesGrantBack(t *testing.T) {
	for _, k := range kinds {
		if !queuedKinds(k) {
			continue
		}
		t.Run(k.name, func(t *testing.T) {
			e := newEnv(t)
			c := e.client(handoffOpts)
			take, release := pair(k, c, "g")
			deaf, _ := pair(k, c, "g", rlock.WithWait(rlock.Spin(10*time.Second)))
			ctx := context.Background()
			h, err := take(ctx)
			require.NoError(t, err)

			dctx, cancel := context.WithCancel(ctx)
			deafDone := make(chan error, 1)
			go func() {
				_, err := deaf(dctx)
				deafDone <- err
			}()
			e.awaitQueue("g", 1)
			next := make(chan context.Context, 1)
			go func() {
				nh, err := take(ctx)
				assert.NoError(t, err)
				next <- nh
			}()
			e.awaitQueue("g", 2)
			require.NoError(t, release(h)) // grants it to the deaf waiter
			time.Sleep(50 * time.Millisecond)
			start := time.Now()
			cancel()
			require.Error(t, <-deafDone)
			select {
			case nh := <-next:
				assert.Less(t, time.Since(start), 500*time.Millisecond, "the grant came back, not at the claim's end")
				require.NoError(t, release(nh))
			case <-time.After(5 * time.Second):
				t.Fatal("the next waiter never got the lock")
			}
		})
	}
}

// TestHandoff_grantFoundByPoll: a waiter that hears no messages (Spin) finds its grant at its
// next poll, with the grant's lease, which the watchdog then extends.
func TestHandoff_grantFoundByPoll(t *testing.T) {
	for _, k := range kinds {
		if !queuedKinds(k) {
			continue
		}
		t.Run(k.name, func(t *testing.T) {
			e := newEnv(t)
			c := e.client(handoffOpts)
			take, release := pair(k, c, "p")
			poll, _ := pair(k, c, "p", rlock.WithWait(rlock.Spin(100*time.Millisecond)))
			ctx := context.Background()
			h, err := take(ctx)
			require.NoError(t, err)
			got := make(chan context.Context, 1)
			go func() {
				ph, err := poll(ctx)
				assert.NoError(t, err)
				got <- ph
			}()
			e.awaitQueue("p", 1)
			require.NoError(t, release(h))
			select {
			case ph := <-got:
				time.Sleep(1200 * time.Millisecond) // past the claim: renewed meanwhile
				require.NoError(t, ph.Err())
				require.NoError(t, release(ph))
			case <-time.After(3 * time.Second):
				t.Fatal("the polling waiter never found its grant")
			}
		})
	}
}

// TestHandoff_goneGranteeCostsAtMostTheClaim: the head waiter's connection is cut for good
// after it queued (a partitioned process): it is granted the lock and never hears of it. The
// next waiter gets the lock when the claim (FairWaitTimeout) runs out, not later.
func TestHandoff_goneGranteeCostsAtMostTheClaim(t *testing.T) {
	for _, k := range kinds {
		if !queuedKinds(k) {
			continue
		}
		t.Run(k.name, func(t *testing.T) {
			e := newEnv(t)
			e.Dirty = true // the gone waiter's subscription and entry may outlive the test briefly
			p := e.newProxy()
			c := e.client(handoffOpts)
			gone := e.through(p).client(handoffOpts)
			take, release := pair(k, c, "d")
			gtake, _ := pair(k, gone, "d")
			ctx := context.Background()
			h, err := take(ctx)
			require.NoError(t, err)
			gctx, cancel := context.WithCancel(ctx)
			goneDone := make(chan struct{})
			go func() {
				defer close(goneDone)
				_, _ = gtake(gctx)
			}()
			e.awaitQueue("d", 1)
			next := make(chan context.Context, 1)
			go func() {
				nh, err := take(ctx)
				assert.NoError(t, err)
				next <- nh
			}()
			e.awaitQueue("d", 2)
			p.Outage(time.Hour)
			start := time.Now()
			require.NoError(t, release(h))
			select {
			case nh := <-next:
				waited := time.Since(start)
				t.Logf("the next waiter got the lock %v after the release", waited)
				assert.Less(t, waited, handoffOpts.FairWaitTimeout+500*time.Millisecond)
				require.NoError(t, release(nh))
			case <-time.After(5 * time.Second):
				t.Error("a grant to a gone waiter blocked the lock")
			}
			cancel()
			p.Outage(0) // the line is back: the gone waiter's call ends
			<-goneDone
		})
	}
}

// TestHandoff_fixedLeaseAndToken: a fair mutex with a fixed lease no longer than
// FairWaitTimeout is granted exactly that lease, with the next fencing token; one with a
// longer fixed lease is woken to take it itself (a second attempt), with that lease too.
func TestHandoff_fixedLeaseAndToken(t *testing.T) {
	for _, tc := range []struct {
		lease    time.Duration
		attempts int64
	}{{800 * time.Millisecond, 1}, {2 * time.Second, 2}} {
		t.Run(tc.lease.String(), func(t *testing.T) {
			e := newEnv(t)
			p := e.newProxy()
			attempts := countScripts(p, "fair_acquire.lua", e.LockKey("f"))
			holder := e.client(handoffOpts).NewFairMutex("f", rlock.WithFencing())
			waiter := e.through(p).client(handoffOpts).NewFairMutex("f", rlock.WithFencing(), rlock.WithLease(tc.lease))
			ctx := context.Background()
			h, err := holder.Lock(ctx)
			require.NoError(t, err)
			tok, _ := holder.Token(h)
			got := make(chan context.Context, 1)
			go func() {
				wh, err := waiter.Lock(ctx)
				assert.NoError(t, err)
				got <- wh
			}()
			e.awaitQueue("f", 1)
			time.Sleep(50 * time.Millisecond) // past the wake-up of its subscription's confirmation
			before := attempts.Load()
			released := time.Now()
			require.NoError(t, holder.Unlock(h))
			wh := <-got
			require.NotNil(t, wh)
			assert.Equal(t, tc.attempts, attempts.Load()-before+1, "attempts, the one that queued included")
			wtok, ok := waiter.Token(wh)
			assert.True(t, ok)
			assert.Equal(t, tok+1, wtok, "the next fencing token")
			pttl, err := e.Do("PTTL", e.LockKey("f")).AsInt64()
			require.NoError(t, err)
			assert.LessOrEqual(t, pttl, tc.lease.Milliseconds(), "the lease is the fixed lease, not more")
			assert.Greater(t, pttl, tc.lease.Milliseconds()-200)
			dl, ok := wh.Deadline()
			require.True(t, ok)
			assert.False(t, dl.After(released.Add(tc.lease+100*time.Millisecond)), "the hold context ends with the lease")
			require.NoError(t, waiter.Unlock(wh))
		})
	}
}

func parseMs(s string) int64 {
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// TestHandoff_readerBatch: a fair RWMutex's write release grants the lock to every reader
// ahead of the first queued writer at once, each told in its own message (no reader makes
// another attempt), and the writer behind them is granted it when the last of them releases.
func TestHandoff_readerBatch(t *testing.T) {
	e := newEnv(t)
	p := e.newProxy()
	attempts := countScripts(p, "rw_acquire.lua", e.LockKey("b"))
	holder := e.client(handoffOpts).NewFairRWMutex("b")
	readers := e.through(p).client(handoffOpts).NewFairRWMutex("b")
	ctx := context.Background()
	h, err := holder.Lock(ctx)
	require.NoError(t, err)
	const n = 3
	got := make(chan context.Context, n)
	for range n {
		go func() {
			rh, err := readers.RLock(ctx)
			assert.NoError(t, err)
			got <- rh
		}()
	}
	e.awaitQueue("b", n)
	writer := make(chan context.Context, 1)
	go func() {
		wh, err := holder.Lock(context.Background())
		assert.NoError(t, err)
		writer <- wh
	}()
	e.awaitQueue("b", n+1)
	time.Sleep(50 * time.Millisecond)
	before := attempts.Load()
	require.NoError(t, holder.Unlock(h))
	var held []context.Context
	for range n {
		select {
		case rh := <-got:
			held = append(held, rh)
		case <-time.After(5 * time.Second):
			t.Fatal("a reader was not granted the lock")
		}
	}
	assert.Equal(t, before, attempts.Load(), "every reader returned on its grant")
	e.awaitQueue("b", 1) // the writer waits behind them
	for _, rh := range held {
		require.NoError(t, readers.RUnlock(rh))
	}
	select {
	case wh := <-writer:
		require.NoError(t, holder.Unlock(wh))
	case <-time.After(5 * time.Second):
		t.Fatal("the writer was not granted the lock after the readers")
	}
}

// Two RLocks of one owner (WithOwner) queued behind a writer of a fair RWMutex are let in by
// one release (issue 16, defect 3): Redis must count exactly their two read holds, so that the
// two RUnlocks leave nothing and the next writer gets in at once; and if the first of them
// gives up before it learns of its grant, its hold is given back.
func TestHandoff_sharedOwnerReaderBatch(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		for _, cancelFirst := range []bool{false, true} {
			name := "both"
			if cancelFirst {
				name = "firstGivesUp"
			}
			t.Run(name, func(t *testing.T) {
				e := newEnv(t)
				p := e.newProxy()
				opts := rlock.Options{WatchdogTimeout: 3 * time.Second, FairWaitTimeout: 3 * time.Second, Wait: wait}
				writer := e.client(opts).NewFairRWMutex("s")
				readers := e.through(p).client(opts).NewFairRWMutex("s")
				owner := rlock.NewOwnerID()
				ctx := context.Background()
				readHolds := func() int64 {
					n, err := e.Do("HGET", e.LockKey("s"), "r:"+owner).AsInt64()
					if err != nil {
						return 0
					}
					return n
				}

				h, err := writer.Lock(ctx)
				require.NoError(t, err)
				type result struct {
					ctx context.Context
					err error
				}
				got := [2]chan result{make(chan result, 1), make(chan result, 1)}
				firstCtx, cancelFirstCtx := context.WithCancel(rlock.WithOwner(ctx, owner))
				defer cancelFirstCtx()
				for i, c := range []context.Context{firstCtx, rlock.WithOwner(ctx, owner)} {
					go func() {
						rh, err := readers.RLock(c)
						got[i] <- result{rh, err}
					}()
					e.awaitQueue("s", int64(i+1))
				}
				time.Sleep(50 * time.Millisecond)

				var flow func()
				if cancelFirst {
					flow = p.HoldReplies() // neither reader learns of the grants yet
					defer flow()
				}
				require.NoError(t, writer.Unlock(h))
				var held []context.Context
				if cancelFirst {
					require.Eventually(t, func() bool { return e.queueLen("s") == 0 || readHolds() >= 1 },
						5*time.Second, time.Millisecond)
					time.Sleep(20 * time.Millisecond)
					cancelFirstCtx()
					time.Sleep(20 * time.Millisecond)
					flow()
					select {
					case r := <-got[0]:
						require.Error(t, r.err, "the first reader gave up")
					case <-time.After(5 * time.Second):
						t.Fatal("the first reader did not give up")
					}
					select {
					case r := <-got[1]:
						require.NoError(t, r.err)
						held = append(held, r.ctx)
					case <-time.After(5 * time.Second):
						t.Fatal("the second reader was not let in")
					}
				} else {
					for i := range got {
						select {
						case r := <-got[i]:
							require.NoError(t, r.err)
							held = append(held, r.ctx)
						case <-time.After(5 * time.Second):
							t.Fatalf("reader %d was not let in", i)
						}
					}
				}
				time.Sleep(50 * time.Millisecond)
				assert.Equal(t, int64(len(held)), readHolds(), "Redis counts one read hold per RLock that holds")
				for _, rh := range held {
					require.NoError(t, readers.RUnlock(rh))
				}
				assert.Zero(t, readHolds(), "no read hold is left after the RUnlocks")
				wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				wh, err := writer.TryLock(wctx, time.Second)
				require.NoError(t, err, "the next writer gets in at once")
				require.NoError(t, writer.Unlock(wh))
			})
		}
	})
}

// A late grant message is not a fresh grant (issue 16, defect 1). Waiter V is granted the
// lock, but its receive path is held back (the proxy holds every byte from the server to V)
// longer than the grant's claim; B takes the lock meanwhile, V's next poll finds B holding and
// queues V again, and only then do the old grant message and the poll's reply reach V. V must
// not return holding while B holds, and once it holds, its queue entry must be gone.
func TestHandoff_lateGrantIsNotFresh(t *testing.T) {
	for _, k := range kinds {
		if !queuedKinds(k) {
			continue
		}
		t.Run(k.name, func(t *testing.T) {
			eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
				e := newEnv(t)
				p := e.newProxy()
				attempts := countScripts(p, k.acquireScript, e.LockKey("g"))
				opts := rlock.Options{WatchdogTimeout: 3 * time.Second, FairWaitTimeout: 3 * time.Second, Wait: wait}
				take, release := pair(k, e.client(opts), "g")
				btake, brelease := pair(k, e.client(opts), "g")
				vtake, vrelease := pair(k, e.through(p).client(opts), "g", rlock.WithLease(200*time.Millisecond))
				ctx := context.Background()
				queued := func() int64 {
					n, err := e.Do("LLEN", e.LockKey("g")+":queue").AsInt64()
					require.NoError(t, err)
					return n
				}

				h, err := take(ctx)
				require.NoError(t, err)
				type result struct {
					ctx context.Context
					err error
				}
				got := make(chan result, 1)
				go func() {
					vh, err := vtake(ctx)
					got <- result{vh, err}
				}()
				require.Eventually(t, func() bool { return queued() == 1 }, 5*time.Second, time.Millisecond)
				time.Sleep(50 * time.Millisecond) // past a second attempt on the subscription's confirmation

				flow := p.HoldReplies()
				defer flow()
				require.NoError(t, release(h)) // grants the lock to V, whose message is held back
				// The claim (200ms) runs out in Redis; B, queued meanwhile, takes the lock.
				bctx, cancelB := context.WithTimeout(ctx, 5*time.Second)
				defer cancelB()
				bh, err := btake(bctx)
				require.NoError(t, err, "B takes the lock once V's claim ran out")
				// V's next attempt (its poll) finds B holding and queues V again; its reply is held
				// back too. (A spinning waiter has an attempt in flight all along: none comes.)
				before := attempts.Load()
				polled := time.Now().Add(2 * time.Second)
				for attempts.Load() == before && time.Now().Before(polled) {
					time.Sleep(time.Millisecond)
				}
				time.Sleep(30 * time.Millisecond) // the attempt runs
				flow()                            // the old grant message and the reply reach V

				select {
				case r := <-got:
					// Only a grant Redis confirmed while it was V's may return; one whose claim ran
					// out before its reply arrived comes with its hold context already done.
					require.NoError(t, r.err)
					live := r.ctx.Err() == nil
					assert.False(t, live && bh.Err() == nil, "V's Lock returned with a live hold context while B holds")
					assert.Zero(t, queued(), "V's queue entry is gone once its Lock returned holding")
					_ = vrelease(r.ctx)
					require.NoError(t, brelease(bh))
					return
				case <-time.After(400 * time.Millisecond):
				}
				require.NoError(t, bh.Err())
				require.NoError(t, brelease(bh))
				var r result
				select {
				case r = <-got:
				case <-time.After(5 * time.Second):
					t.Fatal("V did not get the lock after B released it")
				}
				require.NoError(t, r.err)
				require.NoError(t, r.ctx.Err())
				assert.Zero(t, queued(), "V's queue entry is gone once it holds")
				require.NoError(t, vrelease(r.ctx))
			})
		})
	}
}

// helperGranted waits for the lock (queuing on a fair mutex), says whether its hold context is
// live when Lock returns, and releases it once told (a line on stdin).
func helperGranted(ch child) error {
	m := ch.mutex()
	fmt.Println("waiting")
	h, err := m.Lock(bg)
	if err != nil {
		return err
	}
	fmt.Println("locked", h.Err() == nil)
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return err
	}
	fmt.Println("unlock", m.Unlock(h))
	return nil
}

// The same with the waiter's whole process paused (SIGSTOP) past its grant's claim, as a GC or
// VM pause would: when it resumes, the grant message waiting in its socket and its overdue poll
// race. Its Lock must not return holding while B holds. (A fair Mutex; the queued kinds share
// the waiting code.)
func TestHandoff_pausedWaiterTakesNoLateGrant(t *testing.T) {
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		w := "pubsub"
		if strings.HasPrefix(wait.String(), "spin") {
			w = "spin"
		}
		const fairWait = time.Second // the claim: min(watchdog lease, FairWaitTimeout)
		opts := rlock.Options{WatchdogTimeout: 3 * time.Second, FairWaitTimeout: fairWait, Wait: wait}
		holder := e.client(opts).NewFairMutex("p")
		b := e.client(opts).NewFairMutex("p")
		h, err := holder.Lock(bg)
		require.NoError(t, err)
		v := redistest.StartChild(t, "granted", "PREFIX="+e.Prefix, "LOCK=p", "KIND=fair", "WAIT="+w,
			"WATCHDOG=3s", "FAIRWAIT="+fairWait.String())
		v.Expect(t, "waiting")
		e.awaitQueue("p", 1)
		time.Sleep(100 * time.Millisecond)
		require.NoError(t, v.Cmd.Process.Signal(syscall.SIGSTOP))
		require.Eventually(t, func() bool { return stopped(v.Cmd.Process.Pid) }, 5*time.Second, time.Millisecond)
		require.NoError(t, holder.Unlock(h)) // grants V the lock; V hears nothing
		bctx, cancel := context.WithTimeout(bg, 5*time.Second)
		defer cancel()
		bh, err := b.Lock(bctx) // once V's claim ran out
		require.NoError(t, err)
		require.NoError(t, v.Cmd.Process.Signal(syscall.SIGCONT))
		lines := make(chan string, 2)
		go func() {
			for v.Out.Scan() {
				lines <- v.Out.Text()
			}
			close(lines)
		}()
		select {
		case l := <-lines:
			t.Errorf("V's Lock returned (%s) while B held the lock", l)
		case <-time.After(time.Second):
		}
		require.NoError(t, bh.Err(), "B held the lock all along")
		require.NoError(t, b.Unlock(bh))
		select {
		case l := <-lines:
			if l != "locked true" {
				t.Logf("V: %s", l)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("V did not get the lock after B released it")
		}
		_, err = io.WriteString(v.In, "go\n")
		require.NoError(t, err)
		for l := range lines {
			t.Logf("V: %s", l)
		}
		require.NoError(t, v.Cmd.Wait())
	})
}

// stopped reports whether every thread of process pid is stopped (SIGSTOP has taken effect).
func stopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			return false
		}
		_, rest, _ := strings.Cut(string(stat), ") ")
		if !strings.HasPrefix(rest, "T") && !strings.HasPrefix(rest, "t") {
			return false
		}
	}
	return true
}

// TestHandoff_grantBeforeConfirmation (issue 23): a queued waiter W joins the queue while the
// client's subscription to the lock's channel, made by another waiter W0 just before, is not
// confirmed yet; the holder releases, granting W the lock, before the SUBSCRIBE reaches Redis
// (the proxy holds it), so the grant message reaches nobody; the confirmation comes, then W's
// first attempt's reply (the proxy held it too) and W registers for its wake-ups. The
// confirmation must count for W as well: W takes its grant at once, not at its next poll a
// third of FairWaitTimeout later. Every queued kind, pub/sub and spin (a spin waiter has no
// subscription: it polls). The waiters' rueidis client sends commands on pooled connections
// (DisableAutoPipelining), so that the SUBSCRIBE and each attempt have connections of their
// own, as two multiplexed pipelines of rueidis' default may.
func TestHandoff_grantBeforeConfirmation(t *testing.T) {
	const fairWait = 3 * time.Second // a poll every second
	for _, st := range strategies {
		wait, spin := st.wait, st.name == "spin"
		for _, k := range kinds {
			if !queuedKinds(k) {
				continue
			}
			t.Run(st.name+"/"+k.name, func(t *testing.T) {
				e := newEnv(t)
				p := e.newProxy()
				o := e.Dep.ClientOption()
				o.DialCtxFn, o.DisableAutoPipelining = p.Dial, true
				rc, err := rueidis.NewClient(o)
				require.NoError(t, err)
				t.Cleanup(rc.Close)
				waiters, err := rlock.New(rc, rlock.Options{KeyPrefix: e.Prefix, Wait: wait, FairWaitTimeout: fairWait})
				require.NoError(t, err)
				t.Cleanup(func() { require.NoError(t, waiters.Close()) })
				holder := e.client(rlock.Options{})
				take, release := pair(k, holder, "c")
				wtake, wrelease := pair(k, waiters, "c")
				channel := e.LockKey("c") + ":ch"

				h, err := take(bg)
				require.NoError(t, err)
				type got struct {
					h   context.Context
					at  time.Time
					err error
				}
				lock := func() chan got {
					ch := make(chan got, 1)
					go func() {
						h, err := wtake(bg)
						ch <- got{h, time.Now(), err}
					}()
					return ch
				}
				// W's first attempt runs (W heads the queue), its reply held.
				flowW := p.HoldReply(matchScript(k.acquireScript, e.LockKey("c")))
				defer flowW()
				w := lock()
				e.awaitQueue("c", 1)
				// W0 queues behind it and subscribes; the SUBSCRIBE is held.
				flowSub := p.HoldRequest(func(cmd []string) bool {
					return len(cmd) > 1 && (strings.EqualFold(cmd[0], "SUBSCRIBE") || strings.EqualFold(cmd[0], "SSUBSCRIBE")) &&
						cmd[1] == channel
				})
				defer flowSub()
				w0 := lock()
				e.awaitQueue("c", 2)
				if !spin {
					require.Eventually(t, func() bool { return p.Fired() == 2 }, 5*time.Second, time.Millisecond,
						"W0 sent no SUBSCRIBE")
				}
				// The release grants W the lock: the message reaches no subscriber of the client.
				require.NoError(t, release(h))
				e.awaitQueue("c", 1)
				// The subscription is confirmed (and the client has seen it), then W hears of its
				// first attempt.
				flowSub()
				if !spin {
					require.Eventually(t, func() bool { return e.Numsub(channel) == 1 }, 5*time.Second, time.Millisecond)
					time.Sleep(50 * time.Millisecond)
				}
				flowed := time.Now()
				flowW()
				g := <-w
				require.NoError(t, g.err)
				took := g.at.Sub(flowed)
				t.Logf("W had the lock %v after its first attempt's reply was let through", took.Round(10*time.Microsecond))
				assert.Less(t, took, fairWait/6, "W waited for its poll, not its grant")
				require.NoError(t, wrelease(g.h))
				g = <-w0
				require.NoError(t, g.err)
				require.NoError(t, wrelease(g.h))
			})
		}
	}
}

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

// TestHandoff_lostGrantFoundWithinClaim: the grant message to the queue's head is lost (the
// proxy drops that one message; the subscription stays up). With a lease (1s) shorter than
// FairWaitTimeout (5s) the claim is 1s; the waiter finds its grant at its next poll, which
// comes within half the claim, so it holds the lock while the claim lasts and keeps it. (Before:
// it polled every third of FairWaitTimeout, 1.67s, and found the grant lapsed, the lock idle
// meanwhile; had its last poll come just before the grant's end, it would have returned a hold
// whose lease ended before its first renewal.)
func TestHandoff_lostGrantFoundWithinClaim(t *testing.T) {
	each(t, queuedKinds, func(t *testing.T, k lockKind) {
		e := newEnv(t)
		p := e.newProxy()
		opts := rlock.Options{WatchdogTimeout: time.Second} // the claim: min(1s, FairWaitTimeout 5s)
		holder := k.on(e.client(opts), "lg", rlock.WithLease(2*time.Second))
		waiter := k.on(e.through(p).client(opts), "lg")
		h, err := holder.lock(bg)
		require.NoError(t, err)
		ch := goAcquire(func() (context.Context, error) { return waiter.lock(bg) })
		e.awaitQueue("lg", 1)
		time.Sleep(100 * time.Millisecond) // its look after subscribing is done: it sleeps
		p.DropPush(e.LockKey("lg")+":ch", "@")
		released := time.Now()
		require.NoError(t, holder.release(h))
		got := requireGranted(t, ch, 3*time.Second, "the waiter")
		took := time.Since(released)
		t.Logf("the waiter holds the lock %v after the release", took.Round(time.Millisecond))
		assert.Equal(t, int64(1), p.Fired(), "the grant message was lost")
		assert.Less(t, took, time.Second, "its grant found while the claim (1s) lasted")
		time.Sleep(1500 * time.Millisecond) // past the claim: renewed meanwhile
		require.NoError(t, got.Err())
		require.NoError(t, waiter.release(got))
	})
}
