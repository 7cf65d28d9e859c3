package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
)

// Bounds when Redis cannot be reached (API.md): a Try call returns within its wait plus 500ms,
// a call whose context has a deadline within 500ms of it, a release within 1s; each error wraps
// the usual one and the transport error. What is left (a release's request, a lost reply, a
// queue place) is settled once Redis answers again: nothing is left behind.

// boundSlack is what a call may take past its bound (API.md).
const boundSlack = 500 * time.Millisecond

// TestBounds_redisAway: every kind and mode under both wait strategies, against a server whose
// process is stopped (SIGSTOP: connections hang), one that stalls (DEBUG SLEEP) and a proxy
// that cuts every connection and refuses new ones. Each row, on its own lock, has a hold taken
// before the fault; during it, a new owner's Try (wait 300ms), a new owner's Lock with a 300ms
// deadline and the release of the hold run at once. Every row runs at the same time on the
// fault's one server, so the test takes about three faults' length. Once Redis answers, nothing
// is left: in particular no hold taken by an attempt its caller left in flight (with attempts
// cancelled on leaving, a stalled server ran one after its resolution, on another connection,
// had found nothing: a read hold nobody knew of, 1 run in 4).
func TestBounds_redisAway(t *testing.T) {
	needsBoundsRun(t)
	const wait, away = 300 * time.Millisecond, 2 * time.Second
	for _, fault := range []string{"stopped", "stalled", "cut"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			srv, err := redistest.StartServer(redistest.ServerOptions{})
			require.NoError(t, err)
			t.Cleanup(srv.Stop)
			e := newEnvAt(t, srv.Addr)
			via := e
			var p *redistest.Proxy
			if fault == "cut" {
				p = e.newProxy()
				via = e.through(p)
			}
			type row struct {
				name  string
				c     *rlock.Client
				ops   lockOps
				held  context.Context
				times [3]time.Duration
				errs  [3]error
			}
			var rows []*row
			for _, k := range kinds {
				for _, s := range strategies {
					c := via.client(rlock.Options{Wait: s.wait})
					r := &row{name: k.name + "/" + s.name, c: c, ops: k.on(c, "away-"+k.name+"-"+s.name)}
					r.held, err = r.ops.lock(bg)
					require.NoError(t, err)
					rows = append(rows, r)
				}
			}

			switch fault {
			case "stopped":
				require.NoError(t, syscall.Kill(srv.PID(), syscall.SIGSTOP))
				time.AfterFunc(away, func() { _ = syscall.Kill(srv.PID(), syscall.SIGCONT) })
			case "stalled":
				go func() {
					_ = e.Admin().Do(bg, e.Admin().B().Arbitrary("DEBUG", "SLEEP").Args("2").Build()).Error()
				}()
				time.Sleep(20 * time.Millisecond) // the server sleeps
			case "cut":
				p.Outage(away)
			}
			start := time.Now()
			var wg sync.WaitGroup
			for _, r := range rows {
				calls := [3]func() error{
					func() error { _, err := r.ops.try(bg, wait); return err },
					func() error {
						ctx, cancel := context.WithTimeout(bg, wait)
						defer cancel()
						_, err := r.ops.lock(ctx)
						return err
					},
					func() error { return r.ops.release(r.held) },
				}
				for i, call := range calls {
					wg.Go(func() {
						s := time.Now()
						r.errs[i] = call()
						r.times[i] = time.Since(s)
					})
				}
			}
			wg.Wait()
			var slowest [3]time.Duration
			for _, r := range rows {
				for i := range slowest {
					slowest[i] = max(slowest[i], r.times[i])
				}
				assert.LessOrEqual(t, r.times[0], wait+boundSlack, "%s: Try", r.name)
				assert.ErrorIs(t, r.errs[0], rlock.ErrNotObtained, "%s: Try", r.name)
				assert.True(t, transportErr(r.errs[0]), "%s: Try: %v", r.name, r.errs[0])
				assert.LessOrEqual(t, r.times[1], wait+boundSlack, "%s: Lock with a deadline", r.name)
				assert.ErrorIs(t, r.errs[1], context.DeadlineExceeded, "%s: Lock", r.name)
				assert.True(t, transportErr(r.errs[1]), "%s: Lock: %v", r.name, r.errs[1])
				assert.LessOrEqual(t, r.times[2], time.Second, "%s: release", r.name)
				assert.True(t, transportErr(r.errs[2]), "%s: release: %v", r.name, r.errs[2])
			}
			t.Logf("%s for %v (%d rows, at once): slowest Try(%v) %v, Lock(%v deadline) %v, release %v; e.g. %s",
				fault, away, len(rows), wait, slowest[0].Round(time.Millisecond), wait, slowest[1].Round(time.Millisecond),
				slowest[2].Round(time.Millisecond), rows[1].errs[0])
			// Once Redis answers again the releases left pending are settled: nothing is left
			// behind (the Env checks that at the end), and the calls work again.
			time.Sleep(time.Until(start.Add(away)))
			back := time.Now()
			// Every release, leave and give-back left pending is settled: before, a release left
			// in flight could lose the race with its own flight and be forgotten (see
			// TestBounds_releaseLeftInFlight), and the watchdog renewed its hold for ever.
			for deadline := time.Now().Add(30 * time.Second); len(e.Keys()) > 0 && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
			}
			if left := e.Keys(); len(left) > 0 {
				for _, r := range rows {
					st, err := r.ops.state(bg)
					t.Logf("%s: state %+v (%v); lanes %q", r.name, st, err, rlock.LanesLeft(r.c))
				}
				t.Fatalf("%s: keys left 30s after Redis answered again: %v", fault, left)
			}
			t.Logf("%s: everything settled %v after Redis answered again", fault, time.Since(back).Round(time.Millisecond))
			for _, r := range rows[:2] {
				h, err := r.ops.try(bg, time.Second)
				require.NoError(t, err, r.name)
				require.NoError(t, r.ops.release(h), r.name)
			}
		})
	}
}

// needsBoundsRun skips t unless this is the suite that runs the bounds tests: the bounds are
// the client's, so they are tested once, on a throwaway standalone Redis 7.0.
func needsBoundsRun(t *testing.T) {
	t.Helper()
	redistest.NeedsRedis(t)
	if topo := redistest.Suite().Topology; topo != "standalone" || os.Getenv("RLOCK_SERVER") != "" {
		t.Skipf("client-side bounds, tested once, on a throwaway standalone Redis 7.0 (topology %s)", topo)
	}
}

// transportErr reports whether err wraps a transport error: a net.Error (a dial, a timeout, the
// library's "no reply in time"), or a connection that ended.
func transportErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed)
}

// TestBounds_releaseLeftInFlight: releases that a stopped server leaves in flight are settled
// once it answers again, every one of them. A release left in flight is cancelled; its flight
// returns at once and gives the lane back, racing the caller, which used to record the pending
// request on the lane only after its flight was left: when the flight won, the lane was
// forgotten without it, nothing replayed the release, and the watchdog renewed the hold for
// ever (seen as holds left 30s after an outage, in 2 of 4 loaded runs of TestBounds_redisAway).
func TestBounds_releaseLeftInFlight(t *testing.T) {
	needsBoundsRun(t)
	const per = 12
	srv, err := redistest.StartServer(redistest.ServerOptions{})
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	e := newEnvAt(t, srv.Addr)
	c := e.client(rlock.Options{})
	type held struct {
		name string
		ops  lockOps
		h    context.Context
	}
	var hs []held
	for _, k := range kinds {
		for i := range per {
			name := fmt.Sprintf("left-%s-%d", k.name, i)
			ops := k.on(c, name)
			h, err := ops.lock(bg)
			require.NoError(t, err)
			hs = append(hs, held{name, ops, h})
		}
	}
	ml := c.NewMultiLock(c.NewMutex("left-m1"), c.NewMutex("left-m2"), c.NewFairMutex("left-m3"))
	mh, err := ml.Lock(bg)
	require.NoError(t, err)

	require.NoError(t, syscall.Kill(srv.PID(), syscall.SIGSTOP))
	resumed := false
	defer func() {
		if !resumed {
			_ = syscall.Kill(srv.PID(), syscall.SIGCONT)
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, len(hs)+1)
	for i, x := range hs {
		wg.Go(func() { errs[i] = x.ops.release(x.h) })
	}
	wg.Go(func() { errs[len(hs)] = ml.Unlock(mh) })
	wg.Wait()
	for i, err := range errs {
		assert.True(t, transportErr(err), "release %d: %v", i, err)
	}
	require.NoError(t, syscall.Kill(srv.PID(), syscall.SIGCONT))
	resumed = true
	back := time.Now()
	for deadline := time.Now().Add(10 * time.Second); len(e.Keys()) > 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	require.Empty(t, e.Keys(), "keys left 10s after Redis answered again; lanes %q", rlock.LanesLeft(c))
	t.Logf("%d releases left in flight, all settled %v after Redis answered again", len(errs),
		time.Since(back).Round(time.Millisecond))
}

// TestBounds_demotedPrimary: the server a client writes to becomes a replica (REPLICAOF a master
// that does not answer), as a primary demoted under a client does until the client learns of
// the new one: its writes are refused with READONLY, and with replica-serve-stale-data off
// with MASTERDOWN. Every kind's Try (wait 300ms) keeps waiting through the refusal and returns
// within its bound with ErrNotObtained wrapping it; a Lock waiting meanwhile is served once
// the server is a primary again (REPLICAOF NO ONE), and nothing is left.
func TestBounds_demotedPrimary(t *testing.T) {
	needsBoundsRun(t)
	srv, err := redistest.StartServer(redistest.ServerOptions{})
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	e := newEnvAt(t, srv.Addr)
	for _, stale := range []string{"yes", "no"} {
		refusal := map[string]string{"yes": "READONLY", "no": "MASTERDOWN"}[stale]
		t.Run(refusal, func(t *testing.T) {
			tt := t
			require.NoError(t, e.Do("CONFIG", "SET", "replica-serve-stale-data", stale).Error())
			port, err := redistest.FreePort()
			require.NoError(t, err)
			require.NoError(t, e.Do("REPLICAOF", "127.0.0.1", port).Error())
			demoted := true
			promote := func() {
				if demoted {
					demoted = false
					require.NoError(t, e.Do("REPLICAOF", "NO", "ONE").Error())
				}
			}
			t.Cleanup(promote)
			type row struct {
				ops lockOps
				ch  <-chan acquireResult
			}
			var rows []row
			each(t, perKind, func(t *testing.T, k lockKind) {
				eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) {
					if refusal == "MASTERDOWN" && wait.String() == "pubsub" {
						// rueidis v1.0.79 follows each UNSUBSCRIBE with a PING and panics, in its
						// reading goroutine, on any reply to it but PONG and a few errors, which
						// MASTERDOWN is not (pipe.go, isUnsubReply): see docs/semantics.md.
						t.Skip("rueidis v1.0.79 panics on MASTERDOWN after an UNSUBSCRIBE")
					}
					c := e.client(rlock.Options{Wait: wait})
					ops := k.on(c, "demoted-"+refusal+"-"+k.name+"-"+wait.String())
					start := time.Now()
					_, err := ops.try(bg, 300*time.Millisecond)
					took := time.Since(start)
					t.Logf("the Try: %v, %v", took.Round(time.Millisecond), err)
					assert.ErrorIs(t, err, rlock.ErrNotObtained)
					assert.ErrorContains(t, err, refusal)
					assert.Less(t, took, 300*time.Millisecond+boundSlack, "the Try kept its bound")
					ctx, cancel := context.WithTimeout(bg, 20*time.Second)
					tt.Cleanup(cancel) // when the waits end, not this subtest
					rows = append(rows, row{ops, goAcquire(func() (context.Context, error) { return ops.lock(ctx) })})
				})
			})
			for _, r := range rows {
				requireNone(t, 0, "a Lock waits through the refusal", r.ch)
			}
			promote()
			for _, r := range rows {
				h := requireGranted(t, r.ch, 5*time.Second, "a Lock once the server is a primary")
				require.NoError(t, r.ops.release(h))
			}
			eventually(t, 5*time.Second, "nothing left", func() bool { return len(e.Keys()) == 0 })
		})
	}
}
