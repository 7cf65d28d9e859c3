package rlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
					n, err := e.do("HGET", e.lockKey("s"), "r:"+owner).AsInt64()
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
