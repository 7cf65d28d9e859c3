package rlock_test

import (
	"context"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
)

// TestBounds_electionAndMultiLock is TestBounds_redisAway for the kinds built on the Mutex,
// against a stopped server (SIGSTOP): an Election's TryCampaign, Campaign with a deadline,
// Proclaim and Resign of a term taken before, and a MultiLock's TryLock, Lock with a deadline
// and Unlock of a set held before, under both wait strategies, each within its bound, its error
// wrapping the usual one and the transport error. (Before: Proclaim and the set's calls
// returned when the server did, 2s later.)
func TestBounds_electionAndMultiLock(t *testing.T) {
	needsBoundsRun(t)
	const wait, away = 300 * time.Millisecond, 2 * time.Second
	srv, err := redistest.StartServer(redistest.ServerOptions{})
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	e := newEnvAt(t, srv.Addr)
	type call struct {
		name  string
		bound time.Duration
		do    func() error
		want  error // wrapped by the error, with the transport error; nil: a release's
		took  time.Duration
		err   error
	}
	var calls []*call
	for _, s := range strategies {
		c := e.client(rlock.Options{Wait: s.wait})
		el := c.NewElection("away-el-" + s.name)
		term, err := el.Campaign(bg, "v")
		require.NoError(t, err)
		a, b := c.NewMutex("away-a-"+s.name), c.NewMutex("away-b-"+s.name)
		set := c.NewMultiLock(a, b)
		held, err := set.Lock(bg)
		require.NoError(t, err)
		withDeadline := func(f func(ctx context.Context) error) func() error {
			return func() error {
				ctx, cancel := context.WithTimeout(bg, wait)
				defer cancel()
				return f(ctx)
			}
		}
		calls = append(calls,
			&call{name: s.name + "/TryCampaign", bound: wait + boundSlack, want: rlock.ErrNotObtained, do: func() error {
				_, err := el.TryCampaign(bg, "w", wait)
				return err
			}},
			&call{name: s.name + "/Campaign", bound: wait + boundSlack, want: context.DeadlineExceeded, do: withDeadline(func(ctx context.Context) error {
				_, err := el.Campaign(ctx, "w")
				return err
			})},
			&call{name: s.name + "/Proclaim", bound: time.Second, do: func() error { return el.Proclaim(term, "x") }},
			&call{name: s.name + "/Resign", bound: time.Second, do: func() error { return el.Resign(term) }},
			&call{name: s.name + "/set TryLock", bound: wait + boundSlack, want: rlock.ErrNotObtained, do: func() error {
				_, err := c.NewMultiLock(b, a).TryLock(bg, wait)
				return err
			}},
			&call{name: s.name + "/set Lock", bound: wait + boundSlack, want: context.DeadlineExceeded, do: withDeadline(func(ctx context.Context) error {
				_, err := c.NewMultiLock(b, a).Lock(ctx)
				return err
			})},
			&call{name: s.name + "/set Unlock", bound: time.Second, do: func() error { return set.Unlock(held) }},
		)
	}
	require.NoError(t, syscall.Kill(srv.PID(), syscall.SIGSTOP))
	time.AfterFunc(away, func() { _ = syscall.Kill(srv.PID(), syscall.SIGCONT) })
	start := time.Now()
	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Go(func() {
			s := time.Now()
			c.err = c.do()
			c.took = time.Since(s)
		})
	}
	wg.Wait()
	for _, c := range calls {
		t.Logf("%s: %v, %v", c.name, c.took.Round(time.Millisecond), c.err)
		assert.LessOrEqual(t, c.took, c.bound, c.name)
		assert.True(t, transportErr(c.err), "%s: %v", c.name, c.err)
		if c.want != nil {
			assert.ErrorIs(t, c.err, c.want, c.name)
		}
	}
	// Once Redis answers, the releases left pending are settled and the attempts left in
	// flight give back what they took. A release that could not even take the owner's lane in
	// time (the concurrent Proclaim's flight had it) returned an error with the hold still held,
	// as for a Mutex: retried now, it releases or finds the pending one done. Then nothing is
	// left behind but the election's term counters.
	time.Sleep(time.Until(start.Add(away)))
	for _, c := range calls {
		if c.want == nil && !strings.HasSuffix(c.name, "/Proclaim") { // the releases
			if err := c.do(); err != nil {
				require.ErrorIs(t, err, rlock.ErrNotHeld, "%s again", c.name)
			}
		}
	}
	back := time.Now()
	left := func() (keys []string) {
		for _, k := range e.Keys() {
			if !strings.HasSuffix(k, ":fence") {
				keys = append(keys, k)
			}
		}
		return keys
	}
	for deadline := time.Now().Add(30 * time.Second); len(left()) > 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	require.Empty(t, left(), "keys left 30s after Redis answered again")
	t.Logf("everything settled %v after Redis answered again", time.Since(back).Round(time.Millisecond))
}
