package rlock_test

// Measurements on a Redis Cluster (issue 8), run only when REDIS_CLUSTER_ADDRS is set, e.g.
//
//	scripts/with-cluster.sh go test -count=1 -run '^TestClusterSmoke' -v .
//
// They report figures with t.Logf, and fail when a lock misbehaves or a subscription outlives
// its waiters on any node (make test runs them on a throwaway cluster); renewal scripts per
// period and handoff latency are only measured. The standalone figures use the package's
// server (REDIS_ADDR, or the one TestMain starts).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
)

// scriptCalls is the number of EVALSHA and EVAL calls n has run (INFO commandstats).
func scriptCalls(t testing.TB, n node) int64 {
	t.Helper()
	info, err := n.Do(t, "INFO", "commandstats").ToString()
	require.NoError(t, err)
	var total int64
	for _, l := range strings.Split(info, "\r\n") {
		for _, name := range []string{"cmdstat_evalsha:", "cmdstat_eval:"} {
			rest, ok := strings.CutPrefix(l, name)
			if !ok {
				continue
			}
			calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
			v, err := strconv.ParseInt(calls, 10, 64)
			require.NoError(t, err, l)
			total += v
		}
	}
	return total
}

// TestClusterSmoke_channelsLeft takes each kind's locks with a waiter that gets the lock and a
// waiter that gives up, on 25 names per kind and mode (350 pub/sub waits), then counts the channels
// still subscribed on every node (classic+sharded) after the waits, after the rlock clients' Close
// and after the rueidis clients' Close.
func TestClusterSmoke_channelsLeft(t *testing.T) {
	c := redistest.ClusterFromEnv(t)
	prefix := redistest.NewPrefix("rlcs")
	holderRC, waiterRC := c.Client(t), c.Client(t)
	holder, err := rlock.New(holderRC, rlock.Options{KeyPrefix: prefix, Wait: rlock.PubSub()})
	require.NoError(t, err)
	waiter, err := rlock.New(waiterRC, rlock.Options{KeyPrefix: prefix, Wait: rlock.PubSub()})
	require.NoError(t, err)

	// Every kind and mode: the holder takes a conflicting hold of the name (see
	// lockOps.conflict), the waiter gives up waiting for it (it must not get it while held),
	// then waits for it (blocking; it must get it once the holder lets go).
	const names = 25
	landed := map[string]int{} // where the waiter's subscription was first seen
	waits := 0
	for _, k := range kinds {
		for i := range names {
			name := fmt.Sprintf("%s-%d", k.name, i)
			channel := prefix + ":{" + name + "}:ch"
			owner := c.Owner(t, channel)
			held := k.on(holder, name)
			h, err := held.conflict(0)
			require.NoError(t, err, name)
			release := func() error { return held.conflictRelease(h) }

			w := k.on(waiter, name)
			_, err = w.try(bg, 50*time.Millisecond)
			require.ErrorIs(t, err, rlock.ErrNotObtained, name)
			waits++

			type result struct {
				release func() error
				err     error
			}
			got := make(chan result, 1)
			go func() {
				h, err := w.lock(bg)
				got <- result{func() error { return w.release(h) }, err}
			}()
			waits++
			// Where did the waiter subscribe? Wait until some node has the channel.
			where := ""
			require.Eventually(t, func() bool {
				for _, n := range c.Nodes {
					classic, sharded := n.Channels(t, channel)
					if len(classic)+len(sharded) > 0 {
						switch {
						case n.Addr == owner:
							where = "slot owner"
						case n.Role(t) == "master":
							where = "other master"
						default:
							where = "replica"
						}
						if len(sharded) > 0 {
							where += " (sharded)"
						}
						return true
					}
				}
				return false
			}, 5*time.Second, time.Millisecond, "%s: the waiter never subscribed", name)
			landed[where]++
			select {
			case r := <-got:
				t.Fatalf("%s: the waiter got the lock while it was held (err %v)", name, r.err)
			default:
			}
			require.NoError(t, release(), name)
			var r result
			select {
			case r = <-got:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: the waiter was not woken", name)
			}
			require.NoError(t, r.err, name)
			require.NoError(t, r.release(), name)
		}
	}
	t.Logf("%d waits on %d names; waiter subscriptions seen on: %v", waits, len(kinds)*names, landed)

	count := func(when string) int {
		var detail string
		var total, distinct int
		// Unsubscribing is asynchronous: give it up to 2s to settle.
		deadline := time.Now().Add(2 * time.Second)
		for {
			detail, total, distinct = c.LeftChannels(t, prefix)
			if total == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("channels left %s: %d on all nodes (%d distinct); per node (classic+sharded):%s",
			when, total, distinct, detail)
		return total
	}
	if left := count("after every waiter left"); left != 0 {
		t.Errorf("%d channels still subscribed after their waiters left", left)
	}
	require.NoError(t, waiter.Close())
	require.NoError(t, holder.Close())
	if left := count("after the rlock clients' Close"); left != 0 {
		t.Errorf("%d channels still subscribed after Close", left)
	}
	waiterRC.Close()
	holderRC.Close()
	if left := count("after the rueidis clients' Close"); left != 0 {
		t.Errorf("%d channels subscribed with no connection left", left)
	}
	// Keys: fencing counters only.
	for _, m := range c.MastersNow(t) {
		keys, err := m.Do(t, "KEYS", prefix+":*").AsStrSlice()
		require.NoError(t, err)
		for _, k := range keys {
			if !strings.HasSuffix(k, ":fence") {
				t.Errorf("key left behind on %s: %s", m.Addr, k)
			}
		}
	}
}

// TestClusterSmoke_handoff measures the handoff between two rlock clients (each on its own
// rueidis client) in strict turns: one holds, the other is waiting in Lock (pub/sub), the
// holder unlocks; handoff is from the Unlock call to the waiter's Lock returning. Standalone
// (the package's server) and cluster, plain and fair mutex, 500 handoffs each.
func TestClusterSmoke_handoff(t *testing.T) {
	c := redistest.ClusterFromEnv(t)
	topologies := []struct {
		name string
		rc   func(t *testing.T) rueidis.Client
	}{
		{"standalone", func(t *testing.T) rueidis.Client { return redistest.NewRueidis(t, redistest.RedisAddr()) }},
		{"cluster", c.Client},
	}
	const n = 500
	for _, kind := range kinds {
		if !mutexKinds(kind) {
			continue
		}
		for _, topo := range topologies {
			t.Run(kind.name+"/"+topo.name, func(t *testing.T) {
				prefix := redistest.NewPrefix("rlcs")
				var ms [2]*rlock.Mutex
				for i := range ms {
					cl, err := rlock.New(topo.rc(t), rlock.Options{KeyPrefix: prefix})
					require.NoError(t, err)
					t.Cleanup(func() { require.NoError(t, cl.Close()) })
					ms[i] = kind.mutex(cl, "handoff")
				}
				h, err := ms[0].Lock(bg)
				require.NoError(t, err)
				handoffs := make([]time.Duration, 0, n)
				for i := range n {
					holder, next := ms[i%2], ms[(i+1)%2]
					type result struct {
						h   context.Context
						at  time.Time
						err error
					}
					got := make(chan result, 1)
					go func() {
						h, err := next.Lock(bg)
						got <- result{h, time.Now(), err}
					}()
					time.Sleep(3 * time.Millisecond) // the waiter has tried once and subscribed
					start := time.Now()
					require.NoError(t, holder.Unlock(h))
					var r result
					select {
					case r = <-got:
					case <-time.After(10 * time.Second):
						t.Fatalf("handoff %d: the waiter was not woken", i)
					}
					require.NoError(t, r.err)
					handoffs = append(handoffs, r.at.Sub(start))
					h = r.h
				}
				require.NoError(t, ms[n%2].Unlock(h))
				slices.Sort(handoffs)
				q := func(p float64) time.Duration { return handoffs[int(p*float64(len(handoffs)-1))] }
				t.Logf("%s %s: %d handoffs: p50 %v p90 %v p99 %v max %v", kind.name, topo.name, n,
					q(0.5).Round(time.Microsecond), q(0.9).Round(time.Microsecond),
					q(0.99).Round(time.Microsecond), handoffs[n-1].Round(time.Microsecond))
			})
		}
	}
}

// csLog collects an rlock client's log lines.
type csLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *csLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.TrimSpace(string(p)))
	return len(p), nil
}

// summary returns the number of lines and the first.
func (l *csLog) summary() (int, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == 0 {
		return 0, ""
	}
	return len(l.lines), l.lines[0]
}

// TestClusterSmoke_renewalScripts takes 1,000 watchdog holds with random names and counts the
// scripts (EVALSHA and EVAL, summed over the masters' INFO commandstats) run per watchdog
// period while nothing else happens, on the cluster and on the package's standalone server:
// the masters' counters are sampled every 5ms, and each burst of renewals is one period's.
// It also reports how long each burst took.
func TestClusterSmoke_renewalScripts(t *testing.T) {
	c := redistest.ClusterFromEnv(t)
	const holds = 1000
	const watchdog = 3 * time.Second // a renewal pass every second
	const periods = 5
	standalone := node{Addr: redistest.RedisAddr(), RC: redistest.NewRueidis(t, redistest.RedisAddr())}
	topologies := []struct {
		name  string
		rc    func(t *testing.T) rueidis.Client
		nodes func(t *testing.T) []node
	}{
		{"standalone", func(t *testing.T) rueidis.Client { return redistest.NewRueidis(t, redistest.RedisAddr()) },
			func(*testing.T) []node { return []node{standalone} }},
		{"cluster", c.Client, c.MastersNow},
	}
	for _, topo := range topologies {
		t.Run(topo.name, func(t *testing.T) {
			prefix := redistest.NewPrefix("rlcs")
			var logs csLog
			cl, err := rlock.New(topo.rc(t), rlock.Options{KeyPrefix: prefix, WatchdogTimeout: watchdog,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, cl.Close()) })
			ms := make([]*rlock.Mutex, holds)
			hs := make([]context.Context, holds)
			var wg sync.WaitGroup
			errs := make(chan error, holds)
			for g := range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := g; i < holds; i += 20 {
						ms[i] = cl.NewMutex(rlock.NewOwnerID())
						h, err := ms[i].Lock(bg)
						if err != nil {
							errs <- err
							return
						}
						hs[i] = h
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			nodes := topo.nodes(t)
			total := func() int64 {
				var s int64
				for _, n := range nodes {
					s += scriptCalls(t, n)
				}
				return s
			}
			// Sample the counters across whole periods: bursts are the runs of samples where
			// the count rose, separated by quiet gaps of at least a third of a period.
			type sample struct {
				at    time.Time
				calls int64
			}
			var samples []sample
			start := time.Now()
			for time.Since(start) < (periods+1)*watchdog/3 {
				samples = append(samples, sample{time.Now(), total()})
				time.Sleep(5 * time.Millisecond)
			}
			// A burst is a run of rising samples; a quiet gap of a third of a period ends it.
			type burst struct {
				calls int64
				took  time.Duration
			}
			var bursts []burst
			var cur *burst
			var curStart, last time.Time
			for i := 1; i < len(samples); i++ {
				d := samples[i].calls - samples[i-1].calls
				if d == 0 {
					continue
				}
				if cur == nil || samples[i].at.Sub(last) > watchdog/9 {
					bursts = append(bursts, burst{})
					cur = &bursts[len(bursts)-1]
					curStart = samples[i-1].at
				}
				cur.calls += d
				last = samples[i].at
				cur.took = last.Sub(curStart).Round(time.Millisecond)
			}
			// The first and last may be cut by the sampling window.
			whole := bursts
			if len(whole) > 2 {
				whole = whole[1 : len(whole)-1]
			}
			counts := make([]int64, len(whole))
			for i, b := range whole {
				counts[i] = b.calls
			}
			slices.Sort(counts)
			if n, first := logs.summary(); n > 0 {
				t.Logf("%s: %d warnings from rlock, the first: %s", topo.name, n, first)
			}
			var shown []string
			for _, b := range bursts {
				shown = append(shown, fmt.Sprintf("%d in %v", b.calls, b.took))
			}
			t.Logf("%s: %d watchdog holds: scripts per period (median of %d whole periods) %d; bursts: %s",
				topo.name, holds, len(counts), counts[len(counts)/2], strings.Join(shown, ", "))

			for i := range ms {
				err := ms[i].Unlock(hs[i])
				if err != nil && !errors.Is(err, rlock.ErrLockLost) {
					require.NoError(t, err)
				}
			}
		})
	}
}

// TestClusterSmoke_syncReplicasRenewal: on a cluster, SyncReplicas renewals go out per slot on
// a connection of their own followed by WAIT; with every master's replica in sync, holds of
// many names (many slots, every master) live on across several renewal periods, and a hold's
// context is not ended.
func TestClusterSmoke_syncReplicasRenewal(t *testing.T) {
	cl := redistest.ClusterFromEnv(t)
	const lease = 900 * time.Millisecond
	c, err := rlock.New(cl.Client(t), rlock.Options{KeyPrefix: fmt.Sprintf("rlcsr%d", time.Now().UnixNano()),
		SyncReplicas: 1, SyncTimeout: 500 * time.Millisecond, WatchdogTimeout: lease})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	ctx := context.Background()
	var held []context.Context
	for i := range 12 {
		h, err := c.NewMutex(fmt.Sprintf("n%d", i)).Lock(ctx)
		require.NoError(t, err)
		held = append(held, h)
	}
	time.Sleep(4 * lease)
	for i, h := range held {
		require.NoError(t, context.Cause(h), "hold %d lost although its renewals reached a replica", i)
		require.NoError(t, c.NewMutex(fmt.Sprintf("n%d", i)).Unlock(h))
	}
}
