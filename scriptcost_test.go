package rlock

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock/internal/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scriptCost runs scripts in states set up by the scripts themselves and counts the calls a
// run makes inside Redis (every redis.call), which is what a script costs Redis beyond its
// EVALSHA (issue 17: server calls per acquisition).
type scriptCost struct {
	t    *testing.T
	rc   rueidis.Client
	keys wire.Keys
}

func newScriptCost(t *testing.T, name string) *scriptCost {
	rc := testRueidis(t)
	s := &scriptCost{t: t, rc: rc, keys: wire.NewKeys("rlcost"+NewOwnerID()[:8], name)}
	t.Cleanup(func() {
		k := s.keys
		rc.Do(context.Background(), rc.B().Del().Key(k.Lock, k.Queue, k.Deadlines, k.Leases, k.Writers, k.Fence).Build())
	})
	return s
}

func (s *scriptCost) variant(sc wire.Script) wire.Variant {
	return sc.For(s.rc.Mode() == rueidis.ClientModeCluster)
}

// run runs sc and returns its reply.
func (s *scriptCost) run(sc wire.Script, keys []string, args ...string) []int64 {
	s.t.Helper()
	r, err := s.variant(sc).Exec(context.Background(), s.rc, keys, args).AsIntSlice()
	require.NoError(s.t, err)
	return r
}

// calls runs sc with its body wrapped in a function whose redis.call counts, and returns how
// many calls the run made; the run's effects are the script's own.
func (s *scriptCost) calls(sc wire.Script, keys []string, args ...string) int64 {
	s.t.Helper()
	src := strings.ReplaceAll(s.variant(sc).Source(), "redis.call(", "counted(")
	src = "local calls = 0\nlocal function counted(...)\n  calls = calls + 1\n  return redis.call(...)\nend\n" +
		"local function body()\n" + src + "\nend\nbody()\nreturn calls\n"
	n, err := s.rc.Do(context.Background(), s.rc.B().Eval().Script(src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()).AsInt64()
	require.NoError(s.t, err)
	s.t.Logf("%d calls", n)
	return n
}

// TestScripts_callsUncontended: a lock+unlock of a free lock that nobody waits for makes at most
// 6 calls inside Redis for every kind (issue 28): a lone hold of an RWMutex or a Semaphore keeps
// its lease in the hash's expiry, as a Mutex's does, so neither its acquire nor its release
// touches the leases.
func TestScripts_callsUncontended(t *testing.T) {
	const lease, wait = "10000", "5000"
	for _, c := range []struct {
		name        string
		acq, rel    wire.Script
		acqK, relK  func(k wire.Keys) []string
		acqA, relA  []string
		take, leave int64
	}{
		// PTTL HSET PEXPIRE; HMGET DEL PUBLISH
		{"mutex", wire.Acquire, wire.Release, func(k wire.Keys) []string { return k.Acquire(false) }, wire.Keys.Release,
			[]string{"A", lease, "r1", "take"}, []string{"A", "r2", "0"}, 3, 3},
		// EXISTS HSET PEXPIRE; HMGET EXISTS DEL
		{"fair mutex", wire.FairAcquire, wire.FairRelease, wire.Keys.FairAcquire, wire.Keys.FairRelease,
			[]string{"A", lease, "r1", "take", "0", wait, "wait", "3000"}, []string{"A", "r2"}, 3, 3},
		// EXISTS HSET PEXPIRE; HMGET DEL PUBLISH
		{"rw write", wire.RWAcquire, wire.RWRelease, wire.Keys.RWAcquire, wire.Keys.RWRelease,
			[]string{"A", lease, "r1", "take", "w", "0", wait, "wait", "plain", "3000"}, []string{"A", "r2", "w", "plain"}, 3, 3},
		{"rw read", wire.RWAcquire, wire.RWRelease, wire.Keys.RWAcquire, wire.Keys.RWRelease,
			[]string{"A", lease, "r1", "take", "r", "0", wait, "wait", "plain", "3000"}, []string{"A", "r2", "r", "plain"}, 3, 3},
		// EXISTS HSET PEXPIRE; HMGET EXISTS DEL
		{"fair rw write", wire.RWAcquire, wire.RWRelease, wire.Keys.RWAcquire, wire.Keys.RWRelease,
			[]string{"A", lease, "r1", "take", "w", "0", wait, "wait", "fair", "3000"}, []string{"A", "r2", "w", "fair"}, 3, 3},
		{"fair rw read", wire.RWAcquire, wire.RWRelease, wire.Keys.RWAcquire, wire.Keys.RWRelease,
			[]string{"A", lease, "r1", "take", "r", "0", wait, "wait", "fair", "3000"}, []string{"A", "r2", "r", "fair"}, 3, 3},
		// EXISTS HSET PEXPIRE; HMGET EXISTS DEL
		{"semaphore", wire.SemAcquire, wire.SemRelease, wire.Keys.Sem, wire.Keys.Sem,
			[]string{"A", lease, "A", "take", "1", "1", wait, "wait", "3000"}, []string{"A"}, 3, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newScriptCost(t, "u")
			assert.LessOrEqual(t, s.calls(c.acq, c.acqK(s.keys), c.acqA...), c.take, "the acquire of a free lock")
			assert.LessOrEqual(t, s.calls(c.rel, c.relK(s.keys), c.relA...), c.leave, "the release of the last hold")
			n, err := s.rc.Do(context.Background(), s.rc.B().Exists().Key(s.keys.Lock, s.keys.Leases).Build()).AsInt64()
			require.NoError(t, err)
			assert.Zero(t, n, "released: no key left")
		})
	}
}

// TestScripts_callsOnContendedPaths: the calls inside Redis of the scripts' contended paths (a
// failed attempt of a held lock, a waiter's retry, a release that grants the lock to a queued
// waiter) stay within the budgets of issue 17's round: each reads a key once, and never reads
// what it does not need.
func TestScripts_callsOnContendedPaths(t *testing.T) {
	const lease, wait = "10000", "5000"
	pause := func() { time.Sleep(5 * time.Millisecond) } // so that a refresh extends expiries

	t.Run("mutex attempt on a held lock", func(t *testing.T) {
		s := newScriptCost(t, "m")
		k := []string{s.keys.Lock}
		require.Equal(t, int64(1), s.run(wire.Acquire, k, "A", lease, "A", "take")[0])
		assert.LessOrEqual(t, s.calls(wire.Acquire, k, "B", lease, "B", "take"), int64(2), "PTTL, HMGET")
	})

	t.Run("fair", func(t *testing.T) {
		s := newScriptCost(t, "f")
		acq := []string{s.keys.Lock, s.keys.Queue, s.keys.Deadlines, s.keys.Fence}
		attempt := func(owner string) []string {
			return []string{owner, lease, owner, "take", "0", wait, "wait", "3000"}
		}
		require.Equal(t, int64(1), s.run(wire.FairAcquire, acq, attempt("A")...)[0])
		require.Equal(t, int64(0), s.run(wire.FairAcquire, acq, attempt("B")...)[0])
		pause()
		assert.LessOrEqual(t, s.calls(wire.FairAcquire, acq, attempt("B")...), int64(11), "a queued waiter's retry")
		rel := []string{s.keys.Lock, s.keys.Channel, s.keys.Queue, s.keys.Deadlines, s.keys.Fence}
		assert.LessOrEqual(t, s.calls(wire.FairRelease, rel, "A", "r1"), int64(11), "a release that grants")
		r := s.run(wire.FairAcquire, acq, attempt("B")...)
		assert.Equal(t, []int64{1, 1, 0}, r[:3], "B was granted the lock")
	})

	for _, fair := range []string{"plain", "fair"} {
		t.Run("rw write "+fair, func(t *testing.T) {
			s := newScriptCost(t, "rw")
			k := s.keys
			acq := []string{k.Lock, k.Leases, k.Writers, k.Queue, k.Deadlines, k.Fence}
			attempt := func(owner string) []string {
				return []string{owner, lease, owner, "take", "w", "0", wait, "wait", fair, "3000"}
			}
			require.Equal(t, int64(1), s.run(wire.RWAcquire, acq, attempt("A")...)[0])
			require.Equal(t, int64(0), s.run(wire.RWAcquire, acq, attempt("B")...)[0])
			pause()
			// EXISTS HMGET TIME PTTL ZADD PEXPIRE: the holder is lone (its lease the hash's PTTL,
			// no lapsed holds to read), so W is read only by its ZADD
			budget := int64(6)
			if fair == "fair" {
				budget = 10
			}
			assert.LessOrEqual(t, s.calls(wire.RWAcquire, acq, attempt("B")...), budget, "a waiting writer's retry")
			rel := []string{k.Lock, k.Leases, k.Writers, k.Queue, k.Deadlines, k.Channel, k.Fence}
			budget = 3 // HMGET DEL PUBLISH: the lone hold goes, waking the waiters
			if fair == "fair" {
				budget = 18 // the grant to the queued writer (the lone hold leaves no lease to read or remove)
			}
			assert.LessOrEqual(t, s.calls(wire.RWRelease, rel, "A", "r1", "w", fair), budget, "the writer's release")
			r := s.run(wire.RWAcquire, acq, attempt("B")...)
			assert.Equal(t, int64(1), r[0], "B takes the lock, or was granted it")
		})
	}

	t.Run("semaphore", func(t *testing.T) {
		s := newScriptCost(t, "sem")
		k := []string{s.keys.Lock, s.keys.Leases, s.keys.Queue, s.keys.Deadlines, s.keys.Channel}
		attempt := func(id string) []string {
			return []string{id, lease, id, "take", "1", "1", wait, "wait", "3000"}
		}
		require.Equal(t, int64(1), s.run(wire.SemAcquire, k, attempt("A")...)[0])
		require.Equal(t, int64(0), s.run(wire.SemAcquire, k, attempt("B")...)[0])
		pause()
		// its place refreshed without the hash's PEXPIREs (the holder's lease outlives it)
		assert.LessOrEqual(t, s.calls(wire.SemAcquire, k, attempt("B")...), int64(12), "a waiter's retry")
		// the grant's hold written with the permits in use (one HSET); no EXISTS of the queue
		assert.LessOrEqual(t, s.calls(wire.SemRelease, k, "A"), int64(16), "a release that grants")
		r := s.run(wire.SemAcquire, k, attempt("B")...)
		assert.Equal(t, int64(1), r[0], "B was granted the permit")
	})
}
