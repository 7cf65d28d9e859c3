package rlock_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// No waiter loses its place before its own deadline (issue 16, defect 4). Waiter L (a long
// FairWaitTimeout, 6s) queues; then S, a client of the same lock with a short one (300ms),
// queues behind it and its line goes dead (the proxy refuses it: a crashed process). Once
// S's timeout has passed, N queues; the release must go to L, whose place must still be there.
// (Before, S's join cut the queue keys' expiry to its own timeout, so they expired with L's
// place, and N found an empty queue.) L waits with PubSub, or Spin slower than S's timeout.
func TestQueue_shortTimeoutDoesNotExpireLongerPlaces(t *testing.T) {
	for _, s := range []struct {
		name string
		wait rlock.WaitStrategy
	}{{"pubsub", rlock.PubSub()}, {"spin", rlock.Spin(1500 * time.Millisecond)}} {
		t.Run(s.name, func(t *testing.T) {
			for _, k := range kinds {
				if !queuedKinds(k) {
					continue
				}
				t.Run(k.name, func(t *testing.T) {
					e := newEnv(t)
					p := e.newProxy()
					long := rlock.Options{WatchdogTimeout: 3 * time.Second, FairWaitTimeout: 6 * time.Second, Wait: s.wait}
					short := rlock.Options{WatchdogTimeout: 3 * time.Second, FairWaitTimeout: 300 * time.Millisecond}
					take, release := pair(k, e.client(long), "q")
					ltake, lrelease := pair(k, e.client(long), "q")
					stake, _ := pair(k, e.through(p).client(short), "q")
					ntake, nrelease := pair(k, e.client(long), "q")
					ctx := context.Background()

					h, err := take(ctx)
					require.NoError(t, err)
					got := make(chan string, 2)
					results := make(chan struct {
						who string
						ctx context.Context
					}, 2)
					wait := func(who string, take func(context.Context) (context.Context, error)) {
						go func() {
							c, err := take(ctx)
							assert.NoError(t, err)
							results <- struct {
								who string
								ctx context.Context
							}{who, c}
						}()
					}
					wait("L", ltake)
					e.awaitQueue("q", 1)
					sctx, cancelS := context.WithCancel(ctx)
					sDone := make(chan struct{})
					go func() {
						defer close(sDone)
						_, _ = stake(sctx)
					}()
					e.awaitQueue("q", 2)
					p.Outage(time.Hour) // S is gone: it neither polls nor leaves
					time.Sleep(600 * time.Millisecond)
					wait("N", ntake)
					time.Sleep(100 * time.Millisecond)
					require.NoError(t, release(h))
					for range 2 {
						select {
						case r := <-results:
							got <- r.who
							if r.who == "L" {
								require.NoError(t, lrelease(r.ctx))
							} else {
								require.NoError(t, nrelease(r.ctx))
							}
						case <-time.After(10 * time.Second):
							t.Fatal("a waiter was not let in")
						}
					}
					assert.Equal(t, "L", <-got, "L kept its place ahead of N")
					cancelS()
					p.Outage(0) // S's line is back: its call ends and leaves
					<-sDone
				})
			}
			// A plain RWMutex: L's place among the waiting writers holds new readers back.
			t.Run("plain-rw", func(t *testing.T) {
				e := newEnv(t)
				p := e.newProxy()
				long := rlock.Options{WatchdogTimeout: 3 * time.Second, FairWaitTimeout: 6 * time.Second, Wait: s.wait}
				short := rlock.Options{WatchdogTimeout: 3 * time.Second, FairWaitTimeout: 300 * time.Millisecond}
				rw := e.client(long).NewRWMutex("w")
				l := e.client(long).NewRWMutex("w")
				sw := e.through(p).client(short).NewRWMutex("w")
				ctx := context.Background()
				writers := func() int64 {
					n, err := e.Do("ZCARD", e.LockKey("w")+":writers").AsInt64()
					require.NoError(t, err)
					return n
				}
				rh, err := rw.RLock(ctx)
				require.NoError(t, err)
				lgot := make(chan context.Context, 1)
				go func() {
					c, err := l.Lock(ctx)
					assert.NoError(t, err)
					lgot <- c
				}()
				require.Eventually(t, func() bool { return writers() == 1 }, 5*time.Second, time.Millisecond)
				time.Sleep(100 * time.Millisecond) // past L's attempt on its subscription's confirmation
				sctx, cancelS := context.WithCancel(ctx)
				sDone := make(chan struct{})
				go func() {
					defer close(sDone)
					_, _ = sw.Lock(sctx)
				}()
				require.Eventually(t, func() bool { return writers() == 2 }, 5*time.Second, time.Millisecond)
				p.Outage(time.Hour)
				time.Sleep(600 * time.Millisecond)
				nh, err := rw.TryRLock(ctx, 0)
				if assert.ErrorIs(t, err, rlock.ErrNotObtained, "L's place still holds new readers back") == false {
					require.NoError(t, rw.RUnlock(nh))
				}
				require.NoError(t, rw.RUnlock(rh))
				select {
				case c := <-lgot:
					require.NoError(t, l.Unlock(c))
				case <-time.After(10 * time.Second):
					t.Fatal("L was not let in")
				}
				cancelS()
				p.Outage(0)
				<-sDone
			})
		})
	}
}

// TestQueue_firstWaitLooks: a fair Mutex's or a Semaphore's waiter's first wait on a name (a
// new subscription) costs one full attempt, the one that queues it; the wake-up of the
// subscription's confirmation runs a look (mode "check": a few reads), not a second full
// attempt, and the release's grant comes by message. Under spin there is no subscription and
// no look.
func TestQueue_firstWaitLooks(t *testing.T) {
	for _, k := range []lockKind{kindNamed("fair"), kindNamed("semaphore")} {
		t.Run(k.name, func(t *testing.T) {
			eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
				e := newEnv(t)
				p := e.newProxy()
				take, release := pair(k, e.client(rlock.Options{}), "look")
				wtake, wrelease := pair(k, e.through(p).client(rlock.Options{Wait: wait}), "look")
				isAttempt := matchScript(k.acquireScript, e.LockKey("look"))
				var takes, looks atomic.Int64
				p.DropRequest(func(cmd []string) bool { // counts; never fires
					if isAttempt(cmd) {
						// ARGV[4] is the mode.
						if n, err := strconv.Atoi(cmd[2]); err == nil && len(cmd) > 3+n+3 && cmd[3+n+3] == "check" {
							looks.Add(1)
						} else {
							takes.Add(1)
						}
					}
					return false
				})
				h, err := take(bg)
				require.NoError(t, err)
				got := goAcquire(func() (context.Context, error) { return wtake(bg) })
				requireNone(t, 200*time.Millisecond, "behind the hold", got)
				require.NoError(t, release(h))
				wh := requireGranted(t, got, time.Second, "granted by the release")
				require.NoError(t, wrelease(wh))
				t.Logf("%d full attempts, %d looks", takes.Load(), looks.Load())
				if wait.String() != "pubsub" {
					assert.Zero(t, looks.Load(), "spin: no subscription, no look")
					return
				}
				assert.EqualValues(t, 1, takes.Load(), "one full attempt: the one that queued it")
				assert.EqualValues(t, 1, looks.Load(), "the confirmation's wake-up looks")
			})
		})
	}
}
