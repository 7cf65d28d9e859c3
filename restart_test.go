package rlock_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nameOn returns a lock name starting with base whose key e's deployment keeps on master m (on
// a cluster, the first of base-0, base-1, ... in one of m's slots; elsewhere base itself).
func nameOn(e *env, m node, base string) string {
	if e.Dep.Topology != "cluster" {
		return base
	}
	for i := 0; ; i++ {
		name := fmt.Sprintf("%s-%d", base, i)
		if e.Master(name).Addr == m.Addr {
			return name
		}
	}
}

// TestRestart_noticeAtOnce holds every kind and mode, with the watchdog (30s lease, renewed
// every 10s) and with a fixed 30s lease, on a server that is killed (SIGKILL) and started again
// without its data: every hold context must end with ErrLockLost within 1s of the server
// answering again (not at the next renewal, or the lease end). On a cluster or Sentinel the
// server is the holds' master, started again before a failover.
func TestRestart_noticeAtOnce(t *testing.T) {
	e, kill, start := crashable(t, "notice")
	m := e.Master("notice")
	var logs syncBuffer
	c := e.client(rlock.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
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
		for _, k := range kinds {
			kind := k.name
			h, err := kindNamed(kind).on(c, nameOn(e, m, "notice-"+lease+"-"+kind), opts...).lock(bg)
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
	back := m.Answering(t, e.LockKey(nameOn(e, m, "notice-watchdog-mutex")))
	wg.Wait()
	for i, h := range holds {
		require.False(t, ended[i].IsZero(), "%s: the hold context did not end", h.what)
		assert.ErrorIs(t, context.Cause(h.ctx), rlock.ErrLockLost, h.what)
		took := ended[i].Sub(back)
		t.Logf("%s: ended %v after the server answered again", h.what, took.Round(time.Millisecond))
		assert.LessOrEqual(t, took, time.Second, "%s: the hold context ended %v after the server answered again", h.what, took)
	}
	t.Logf("server answered at %s; log:\n%s", back.Format("15:04:05.000"), logs.String())
	e.Dep.WaitSteady(t, 20*time.Second)
}

// TestRestart_grace restarts the server without its data and checks Options.RestartGrace: within
// the grace no new hold of any kind is granted (a Try with wait 0 returns ErrNotObtained), a
// re-entry of a hold the server has is not held back, and waiting Locks (pub/sub and spin) get
// the lock once the grace has passed, without polling the server hot meanwhile.
func TestRestart_grace(t *testing.T) {
	e, kill, start := crashable(t, "grace")
	m := e.Master("grace")
	const grace = 3 * time.Second
	graced := e.client(rlock.Options{RestartGrace: grace})
	spin := e.client(rlock.Options{RestartGrace: grace, Wait: rlock.Spin(100 * time.Millisecond)})
	plain := e.client(rlock.Options{})

	kill()
	killed := time.Now()
	start()
	m.Answering(t, e.LockKey("grace"))
	calls := func() int64 {
		stats, err := m.Info("commandstats")
		for try := 0; err != nil && try < 100; try++ { // its connections broke with the restart
			time.Sleep(10 * time.Millisecond)
			stats, err = m.Info("commandstats")
		}
		require.NoError(t, err)
		var n int64
		for _, cmd := range []string{"cmdstat_evalsha", "cmdstat_eval"} {
			var c int64
			_, _ = fmt.Sscanf(stats[cmd], "calls=%d", &c)
			n += c
		}
		return n
	}
	// The clients' connections broke with the restart: let each make a new one.
	for _, c := range []*rlock.Client{graced, spin, plain} {
		require.Eventually(t, func() bool {
			_, err := c.NewMutex(nameOn(e, m, "grace")).IsLocked(bg)
			return err == nil
		}, 5*time.Second, 10*time.Millisecond)
	}
	before := calls()

	// A hold taken without the grace (another client's setting) can be re-entered at once.
	reName := nameOn(e, m, "grace-re")
	held, err := plain.NewMutex(reName).TryLock(bg, 2*time.Second)
	require.NoError(t, err)
	owner, _ := rlock.Owner(held)
	// (A wait, only for connections that broke with the restart: a re-entry does not wait.)
	re, err := graced.NewMutex(reName).TryLock(rlock.WithOwner(bg, owner), time.Second)
	require.NoError(t, err, "a re-entry is not held back by the grace")
	require.NoError(t, graced.NewMutex(reName).Unlock(re))
	require.NoError(t, plain.NewMutex(reName).Unlock(held))

	type got struct {
		at  time.Time
		err error
	}
	var wg sync.WaitGroup
	results := make(map[string]*got)
	for _, k := range kinds {
		kind := k.name
		for _, c := range []struct {
			name string
			c    *rlock.Client
		}{{"pubsub", graced}, {"spin", spin}} {
			name := nameOn(e, m, "grace-"+c.name+"-"+kind)
			_, err := kindNamed(kind).on(c.c, name).try(bg, 0)
			if err != nil && strings.Contains(err.Error(), "last attempt") {
				// A connection that broke with the restart: try again, with a short wait.
				_, err = kindNamed(kind).on(c.c, name).try(bg, 200*time.Millisecond)
			}
			require.ErrorIs(t, err, rlock.ErrNotObtained, "%s %s: no new hold within the grace", c.name, kind)
			r := &got{}
			results[c.name+"/"+kind] = r
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(bg, grace+5*time.Second)
				defer cancel()
				h, err := kindNamed(kind).on(c.c, name).try(ctx, grace+5*time.Second)
				r.at, r.err = time.Now(), err
				if err == nil {
					r.err = kindNamed(kind).on(c.c, name).release(h)
				}
			})
		}
	}
	wg.Wait()
	for what, r := range results {
		require.NoError(t, r.err, what)
		assert.GreaterOrEqual(t, r.at.Sub(killed), grace, "%s: granted within the grace", what)
		// The grace lasts up to a second more (INFO's uptime is in whole seconds).
		assert.Less(t, r.at.Sub(killed), grace+3*time.Second, "%s: the wait went on long after the grace", what)
	}
	n := calls() - before
	t.Logf("%d script calls during and after the grace", n)
	// Pub/sub waiters look again when the grace ends (or their kind's FairWaitTimeout poll);
	// spin waiters poll every 100ms: 7 spin waiters * ~40 polls, and some for the rest.
	assert.Less(t, n, int64(600), "the waiters polled the server hot")
	e.Dep.WaitSteady(t, 20*time.Second)
}

// TestRestart_graceInvalid: a negative RestartGrace is invalid.
func TestRestart_graceInvalid(t *testing.T) {
	_, err := rlock.New(newEnv(t).Rueidis(), rlock.Options{RestartGrace: -time.Second})
	require.ErrorIs(t, err, rlock.ErrInvalid)
}

// TestRestart_rightAfterHold: the server is killed (kill -9) and started again without its
// data within milliseconds of a hold, taken by a client that had no hold before (so none of its
// watchers had connected yet): the hold context must still end with ErrLockLost within 1s of
// the server answering again (issue 23, defect 5: it ended at the next renewal, ~10s later, or
// at the end of a fixed lease). Every kind and mode, with the watchdog and with a fixed lease,
// and a contender on another client that waits through the restart for the plain and the fair
// Mutex (pub/sub and spin), with how long both held the lock. On standalone, one restart per
// hold; on a cluster or Sentinel (the lock's master, started again before a failover) one per
// wait strategy, with every hold on a fresh client of its own.
func TestRestart_rightAfterHold(t *testing.T) {
	e, kill, start := crashable(t, "after")
	m := e.Master("after")
	standalone := e.Dep.Topology == "standalone"
	type hold struct {
		kind, name string
		lease      string // "watchdog" or "fixed"
		contended  bool
	}
	// trial takes holds, each on a fresh client, has the server restarted at once (contenders
	// waiting for those contended) and checks when each hold context ended.
	trial := func(t *testing.T, holds []hold, contender *rlock.Client) {
		type taken struct {
			c     *rlock.Client
			h     context.Context
			w     *redistest.CtxWatch
			grant chan contended
		}
		tk := make([]taken, len(holds))
		for i, hd := range holds {
			c := e.client(rlock.Options{})
			// The client's connection is made before the hold (the restart breaks it), but
			// not its watchers': those connect after its first hold.
			_, err := c.NewMutex(hd.name).IsLocked(bg)
			require.NoError(t, err)
			tk[i].c = c
		}
		var wg sync.WaitGroup
		for i, hd := range holds {
			wg.Go(func() {
				var opts []rlock.MutexOption
				if hd.lease == "fixed" {
					opts = append(opts, rlock.WithLease(30*time.Second))
				}
				h, err := kindNamed(hd.kind).on(tk[i].c, hd.name, opts...).lock(bg)
				if assert.NoError(t, err) {
					tk[i].h, tk[i].w = h, redistest.WatchCtx(h)
				}
			})
		}
		wg.Wait()
		for i, hd := range holds {
			if hd.contended && tk[i].h != nil {
				tk[i].grant = contend(contender, hd.kind, hd.name)
			}
		}
		kill()
		start()
		back := m.Answering(t, e.LockKey(holds[0].name))
		for i, hd := range holds {
			if tk[i].h == nil {
				continue
			}
			what := hd.lease + "/" + hd.kind
			select {
			case <-tk[i].w.Done:
				ended := tk[i].w.At.Sub(back) // (negative: before the poll saw the server back)
				assert.ErrorIs(t, context.Cause(tk[i].h), rlock.ErrLockLost, what)
				t.Logf("%s: ended %v after the server answered again", what, redistest.Ms(ended))
				assert.LessOrEqual(t, ended, time.Second, "%s: the hold context ended %v after the server answered again", what, ended)
			case <-time.After(max(3*time.Second-time.Since(back), 0)):
				t.Errorf("%s: the hold context did not end within 3s of the server answering again", what)
			}
			if tk[i].grant != nil {
				g := <-tk[i].grant
				require.NoError(t, g.err, what)
				if at, ok := tk[i].w.Ended(); ok {
					t.Logf("%s: the contender got the lock %v after the server answered again; two holders for %v",
						what, redistest.Ms(g.at.Sub(back)), redistest.Ms(max(at.Sub(g.at), 0)))
				}
				require.NoError(t, kindNamed(hd.kind).on(contender, hd.name).release(g.h))
			}
			if err := kindNamed(hd.kind).on(tk[i].c, hd.name).release(tk[i].h); err != nil {
				assert.ErrorIs(t, err, rlock.ErrLockLost, what)
			}
		}
		// (Standalone too: the test's own connections to the server broke with it.)
		e.Dep.WaitSteady(t, 20*time.Second)
	}
	eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
		contender := e.client(rlock.Options{Wait: wait})
		var holds []hold
		for _, lease := range []string{"watchdog", "fixed"} {
			for _, k := range kinds {
				kind := k.name
				contended := lease == "watchdog" && (kind == "mutex" || kind == "fair")
				holds = append(holds, hold{kind, nameOn(e, m, "after-"+lease+"-"+kind), lease, contended})
			}
		}
		if !standalone {
			trial(t, holds, contender)
			return
		}
		for _, hd := range holds {
			trial(t, []hold{hd}, contender)
		}
	})
}

// contended is what contend's call got.
type contended struct {
	h   context.Context
	at  time.Time
	err error
}

// contend has c take a hold of kind (a row of kinds) called name, waiting up to 20s (through the
// CLUSTERDOWN of a cluster node coming back), and returns where it reports.
func contend(c *rlock.Client, kind, name string) chan contended {
	got := make(chan contended, 1)
	go func() {
		ctx, cancel := context.WithTimeout(bg, 20*time.Second)
		defer cancel()
		h, err := kindNamed(kind).on(c, name).try(ctx, 20*time.Second)
		for err != nil && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
			h, err = kindNamed(kind).on(c, name).try(ctx, 20*time.Second)
		}
		got <- contended{h, time.Now(), err}
	}()
	return got
}

// TestRestart_noticeCost: what the restart notice costs a client that locks in turn (issue 23,
// defect 5). A watcher's connections have the holds checked, the first one too, and an
// acquisition under way when that happens has them checked again; but the watchers linger
// after the last hold (a second here, the lease by default), so 100 lock-unlock rounds cost
// their two scripts each and a few checks in all, not one per acquisition. Two bursts, the
// watchers stopped before each.
func TestRestart_noticeCost(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{WatchdogTimeout: time.Second}) // the watchers linger 1s
	m := c.NewMutex("cost")
	round := func() {
		h, err := m.Lock(bg)
		require.NoError(t, err)
		require.NoError(t, m.Unlock(h))
	}
	// The scripts are loaded: the lock's, and the check's (run while the first hold lasts).
	h, err := m.Lock(bg)
	require.NoError(t, err)
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, m.Unlock(h))
	const rounds = 100
	for burst := range 2 {
		time.Sleep(2 * time.Second) // the watchers stop
		before := e.clientCommands()
		for range rounds {
			round()
		}
		time.Sleep(200 * time.Millisecond) // the checks of the watchers' first connections
		extra := e.clientCommands() - before - 2*rounds
		t.Logf("burst %d: %d lock-unlock rounds, %d scripts besides theirs (%d nodes watched)", burst, rounds, extra, len(e.Dep.Data))
		assert.LessOrEqual(t, extra, int64(2*len(e.Dep.Data)), "burst %d: the notices cost more than two checks per node", burst)
	}
}
