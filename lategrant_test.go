package rlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A late grant message is not a fresh grant (issue 16, defect 1). Waiter V is granted the
// lock, but its receive path is held back (the proxy holds every byte from the server to V)
// longer than the grant's claim; B takes the lock meanwhile, V's next poll finds B holding and
// queues V again, and only then do the old grant message and the poll's reply reach V. V must
// not return holding while B holds, and once it holds, its queue entry must be gone.
func TestHandoff_lateGrantIsNotFresh(t *testing.T) {
	for _, k := range handoffKinds {
		t.Run(k.name, func(t *testing.T) {
			eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
				e := newEnv(t)
				p := e.newProxy()
				attempts := countScripts(p, k.script, e.lockKey("g"))
				opts := rlock.Options{WatchdogTimeout: 3 * time.Second, FairWaitTimeout: 3 * time.Second, Wait: wait}
				take, release := k.acquire(e.client(opts), "g")
				btake, brelease := k.acquire(e.client(opts), "g")
				vtake, vrelease := k.acquire(e.through(p).client(opts), "g", rlock.WithLease(200*time.Millisecond))
				ctx := context.Background()
				queued := func() int64 {
					n, err := e.do("LLEN", e.lockKey("g")+":queue").AsInt64()
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
