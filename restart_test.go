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

// nameOn returns a lock name starting with base whose key e's deployment keeps on master m (on
// a cluster, the first of base-0, base-1, ... in one of m's slots; elsewhere base itself).
func nameOn(e *env, m node, base string) string {
	if e.dep.Topology != "cluster" {
		return base
	}
	for i := 0; ; i++ {
		name := fmt.Sprintf("%s-%d", base, i)
		if e.master(name).addr == m.addr {
			return name
		}
	}
}

// answering waits until n serves the slot of key again (EXISTS key gets a reply) and returns
// that moment, polling every 5ms for up to 30s.
func answering(t *testing.T, n node, key string) time.Time {
	t.Helper()
	give := time.Now().Add(30 * time.Second)
	for time.Now().Before(give) {
		ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
		err := n.rc.Do(ctx, n.rc.B().Exists().Key(key).Build()).Error()
		cancel()
		if err == nil {
			return time.Now()
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s did not serve %s again within 30s", n.addr, key)
	return time.Time{}
}

// TestRestart_noticeAtOnce holds every kind and mode, with the watchdog (30s lease, renewed
// every 10s) and with a fixed 30s lease, on a server that is killed (SIGKILL) and started again
// without its data: every hold context must end with ErrLockLost within 1s of the server
// answering again (not at the next renewal, or the lease end). On a cluster or Sentinel the
// server is the holds' master, started again before a failover.
func TestRestart_noticeAtOnce(t *testing.T) {
	e, kill, start := crashable(t, "notice")
	m := e.master("notice")
	c := e.client(rlock.Options{})
	type held struct {
		what string
		ctx  context.Context
	}
	var holds []held
	for _, lease := range []string{"watchdog", "fixed"} {
		var opts []rlock.MutexOption
		if lease == "fixed" {
			opts = append(opts, rlock.WithLease(30*time.Second))
		}
		for _, kind := range pausedHoldKinds {
			h, err := pausedHold(c, kind, nameOn(e, m, "notice-"+lease+"-"+kind), opts...)
			require.NoError(t, err, "%s %s", lease, kind)
			holds = append(holds, held{lease + "/" + kind, h})
		}
	}
	ended := make([]time.Time, len(holds))
	var wg sync.WaitGroup
	for i, h := range holds {
		wg.Go(func() {
			select {
			case <-h.ctx.Done():
				ended[i] = time.Now()
			case <-time.After(40 * time.Second):
			}
		})
	}
	time.Sleep(100 * time.Millisecond) // let the watchers connect
	kill()
	start()
	back := answering(t, m, e.lockKey(nameOn(e, m, "notice-watchdog-mutex")))
	wg.Wait()
	for i, h := range holds {
		require.False(t, ended[i].IsZero(), "%s: the hold context did not end", h.what)
		assert.ErrorIs(t, context.Cause(h.ctx), rlock.ErrLockLost, h.what)
		took := ended[i].Sub(back)
		t.Logf("%s: ended %v after the server answered again", h.what, took.Round(time.Millisecond))
		assert.LessOrEqual(t, took, time.Second, "%s: the hold context ended %v after the server answered again", h.what, took)
	}
	e.dep.waitSteady(t, 20*time.Second)
}
