package wire

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The calls inside Redis of the scripts (every redis.call: what a script costs Redis beyond its
// EVALSHA, see lab.calls) on their usual paths stay within these budgets (issue 17: server
// calls per acquisition).

// The election's and the MultiLock's scripts.
func TestScripts_callsOfElectionAndMultiLock(t *testing.T) {
	l := newLab(t)

	t.Run("election", func(t *testing.T) {
		calls := func(s Script, keys, args []string, budget int64, path string) {
			t.Helper()
			n := l.calls(s, keys, args)
			assert.LessOrEqual(t, n, budget, path)
			t.Logf("%s: %d calls", path, n)
		}
		e := newElection(l, "cost")
		e.cleanup()
		args := func(cand string) []string {
			return CampaignArgs{Candidate: cand, LeaseMs: elLeaseMs, Mode: Take, FairWaitMs: "5000", Join: true,
				ClaimMs: elClaimMs, Value: "v"}.Strings()
		}
		// EXISTS GET TIME SET HSET PEXPIRE PUBLISH
		calls(Campaign, e.k.Election(), args("A"), 7, "a campaign that takes a free election")
		term, err := strconv.ParseInt(e.record()[FieldTerm], 10, 64)
		require.NoError(t, err)
		require.Equal(t, int64(0), e.campaign("B", "v", Take, true)[0])
		time.Sleep(5 * time.Millisecond) // so that a refresh extends expiries
		calls(Campaign, e.k.Election(), args("B"), 12, "a queued candidate's retry")
		calls(Proclaim, e.k.Election(), ProclaimArgs{"A", term, "w"}.Strings(), 4, "a proclaim")
		// HMGET EXISTS TIME LINDEX ZSCORE GET DEL SET HSET PEXPIRE LPOP ZREM PUBLISH PUBLISH
		calls(Resign, e.k.Election(), ResignArgs{"A", term}.Strings(), 14, "a resign that hands over")
		term, err = strconv.ParseInt(e.record()[FieldTerm], 10, 64)
		require.NoError(t, err)
		calls(Resign, e.k.Election(), ResignArgs{"B", term}.Strings(), 4, "a resign with nobody next")
		calls(ReadLeader, e.k.Leadership(), nil, 2, "Leader, vacant")
	})

	t.Run("multilock contended", func(t *testing.T) {
		g := newGroup(l, member{"{ct}a", true, false, "10000"}, member{"{ct}b", true, false, "10000"})
		acquire := MultiAcquireArgs{"S", "rq000000000001", Take, multiWaitMs, true, "", g.specs}.Strings()
		require.Equal(t, int64(1), g.single(0, "X", "rq0000000000x1")[0])
		require.False(t, g.acquire("S", "rq000000000001", Take, true).Acquired)
		time.Sleep(5 * time.Millisecond) // so that a refresh extends expiries
		n := l.calls(MultiAcquire, g.allKeys(), acquire)
		assert.LessOrEqual(t, n, int64(21), "a blocked set's retry, 2 fair members")
		t.Logf("a blocked set's retry, 2 fair members: %d calls", n)
		g.unlock(0, "X", "rl0000000000x1")
		require.True(t, g.acquire("S", "rq000000000001", Take, true).Acquired)
		require.Equal(t, int64(0), g.single(1, "W", "rq0000000000w1")[0])
		n = l.calls(MultiRelease, g.allKeys(), MultiReleaseArgs{"S", "rl000000000001", UnlockMessage, g.specs}.Strings())
		assert.LessOrEqual(t, n, int64(17), "a set's release that hands b over, 2 fair members")
		t.Logf("a set's release that hands one member over, 2 fair members: %d calls", n)
		require.Equal(t, int64(1), g.single(1, "W", "rq0000000000w1")[0])
		g.unlock(1, "W", "rl0000000000w1")
	})

	for _, c := range []struct {
		name          string
		fair, fencing bool
		take, release int64 // calls per member
	}{
		{"plain", false, false, 3, 3}, // PTTL HSET PEXPIRE; HMGET DEL PUBLISH
		{"fair", true, false, 3, 3},   // EXISTS HSET PEXPIRE; HMGET EXISTS DEL
		{"plain fenced", false, true, 5, 3},
		{"fair fenced", true, true, 5, 3},
	} {
		for _, n := range []int{1, 2, 10} {
			t.Run(fmt.Sprintf("multilock %d %s", n, c.name), func(t *testing.T) {
				var ms []member
				for i := 0; i < n; i++ {
					ms = append(ms, member{fmt.Sprintf("{cost}%d", i), c.fair, c.fencing, "10000"})
				}
				g := newGroup(l, ms...)
				take := l.calls(MultiAcquire, g.allKeys(), MultiAcquireArgs{"S", "rq000000000001", Take, multiWaitMs, true, "", g.specs}.Strings())
				assert.LessOrEqual(t, take, c.take*int64(n), "a group acquire of free members")
				rel := l.calls(MultiRelease, g.allKeys(), MultiReleaseArgs{"S", "rl000000000001", UnlockMessage, g.specs}.Strings())
				assert.LessOrEqual(t, rel, c.release*int64(n), "a group release of the last holds, nobody waiting")
				t.Logf("%d members, %s: acquire %d calls, release %d", n, c.name, take, rel)
			})
		}
	}
}

// TestScripts_callsUncontended: a lock+unlock of a free lock that nobody waits for makes at most
// 6 calls inside Redis for every kind (issue 28): a lone hold of an RWMutex or a Semaphore keeps
// its lease in the hash's expiry, as a Mutex's does, so neither its acquire nor its release
// touches the leases.
func TestScripts_callsUncontended(t *testing.T) {
	const lease, wait = "10000", "5000"
	l := newLab(t)
	rw := func(acc Access, fair bool) (acq, rel []string) {
		return RWAcquireArgs{Owner: "A", LeaseMs: lease, Request: "r1", Mode: Take, Access: acc, FairWaitMs: wait,
				Join: true, Fair: fair, ClaimMs: "3000"}.Strings(),
			RWReleaseArgs{Owner: "A", Request: "r2", Access: acc, Fair: fair}.Strings()
	}
	rwW, rwWRel := rw(Write, false)
	rwR, rwRRel := rw(Read, false)
	frwW, frwWRel := rw(Write, true)
	frwR, frwRRel := rw(Read, true)
	for _, c := range []struct {
		name       string
		acq, rel   Script
		acqK, relK func(k Keys) []string
		acqA, relA []string
	}{
		// PTTL HSET PEXPIRE; HMGET DEL PUBLISH
		{"mutex", Acquire, Release, func(k Keys) []string { return k.Acquire(false) }, Keys.Release,
			AcquireArgs{Owner: "A", LeaseMs: lease, Request: "r1", Mode: Take}.Strings(),
			ReleaseArgs{Owner: "A", Request: "r2", Message: UnlockMessage}.Strings()},
		// EXISTS HSET PEXPIRE; HMGET EXISTS DEL
		{"fair mutex", FairAcquire, FairRelease, Keys.FairAcquire, Keys.FairRelease,
			FairAcquireArgs{Owner: "A", LeaseMs: lease, Request: "r1", Mode: Take, FairWaitMs: wait, Join: true,
				ClaimMs: "3000"}.Strings(),
			FairReleaseArgs{Owner: "A", Request: "r2"}.Strings()},
		// EXISTS HSET PEXPIRE; HMGET DEL PUBLISH
		{"rw write", RWAcquire, RWRelease, Keys.RWAcquire, Keys.RWRelease, rwW, rwWRel},
		{"rw read", RWAcquire, RWRelease, Keys.RWAcquire, Keys.RWRelease, rwR, rwRRel},
		// EXISTS HSET PEXPIRE; HMGET EXISTS DEL
		{"fair rw write", RWAcquire, RWRelease, Keys.RWAcquire, Keys.RWRelease, frwW, frwWRel},
		{"fair rw read", RWAcquire, RWRelease, Keys.RWAcquire, Keys.RWRelease, frwR, frwRRel},
		// EXISTS HSET PEXPIRE; HMGET EXISTS DEL
		{"semaphore", SemAcquire, SemRelease, Keys.Sem, Keys.Sem,
			SemAcquireArgs{Hold: "A", LeaseMs: lease, Request: "A", Mode: Take, Permits: "1", N: "1", FairWaitMs: wait,
				Join: true, ClaimMs: "3000"}.Strings(),
			SemReleaseArgs{Hold: "A"}.Strings()},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := l.keys("u" + c.name)
			assert.LessOrEqual(t, l.calls(c.acq, c.acqK(k), c.acqA), int64(3), "the acquire of a free lock")
			assert.LessOrEqual(t, l.calls(c.rel, c.relK(k), c.relA), int64(3), "the release of the last hold")
			assert.Zero(t, l.int("EXISTS", k.Lock, k.Leases), "released: no key left")
			// Labelled (WithLabel: the optional last ARGV), the acquire writes the label and its
			// time (HSETNX TIME HSET, the slow path); the release's calls are the same, and
			// the label goes with the hold.
			acq, rel := l.calls(c.acq, c.acqK(k), append(slices.Clip(c.acqA), "host-a pid 12")), l.calls(c.rel, c.relK(k), c.relA)
			t.Logf("labelled: acquire %d calls, release %d", acq, rel)
			assert.LessOrEqual(t, acq, int64(3+3), "the labelled acquire of a free lock")
			assert.LessOrEqual(t, rel, int64(3), "the release of the last labelled hold")
			assert.Zero(t, l.int("EXISTS", k.Lock, k.Leases), "released: no key left")
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

	l := newLab(t)
	// calls counts the calls of s's run inside Redis, logs them and checks them against budget.
	calls := func(t *testing.T, s Script, keys, args []string, budget int64, what string) {
		t.Helper()
		n := l.calls(s, keys, args)
		t.Logf("%s: %d calls", what, n)
		assert.LessOrEqual(t, n, budget, what)
	}

	t.Run("mutex attempt on a held lock", func(t *testing.T) {
		k := l.keys("m")
		defer l.do("DEL", k.Lock)
		attempt := func(owner string) []string {
			return AcquireArgs{Owner: owner, LeaseMs: lease, Request: owner, Mode: Take}.Strings()
		}
		require.Equal(t, int64(1), l.ints(Acquire, k.Acquire(false), attempt("A"))[0])
		calls(t, Acquire, k.Acquire(false), attempt("B"), 2, "PTTL, HMGET")
		retry := AcquireArgs{Owner: "B", LeaseMs: lease, Request: "B", Mode: TakeNew}.Strings()
		calls(t, Acquire, k.Acquire(false), retry, 1, "a retry of an owner made for its call: PTTL")
	})

	t.Run("fair", func(t *testing.T) {
		k := l.keys("f")
		defer l.do("DEL", k.Lock, k.Queue, k.Deadlines)
		attempt := func(owner string) []string {
			return FairAcquireArgs{Owner: owner, LeaseMs: lease, Request: owner, Mode: Take, FairWaitMs: wait, Join: true,
				ClaimMs: "3000"}.Strings()
		}
		require.Equal(t, int64(1), l.ints(FairAcquire, k.FairAcquire(), attempt("A"))[0])
		require.Equal(t, int64(0), l.ints(FairAcquire, k.FairAcquire(), attempt("B"))[0])
		pause()
		calls(t, FairAcquire, k.FairAcquire(), attempt("B"), 11, "a queued waiter's retry")
		look := func(owner string) []string {
			return FairAcquireArgs{Owner: owner, LeaseMs: lease, Request: owner, Mode: Look, FairWaitMs: wait, Join: true,
				ClaimMs: "3000"}.Strings()
		}
		calls(t, FairAcquire, k.FairAcquire(), look("B"), 5, "a waiter's check after it subscribed: EXISTS HMGET PTTL LINDEX ZSCORE")
		calls(t, FairRelease, k.FairRelease(), FairReleaseArgs{Owner: "A", Request: "r1"}.Strings(), 11, "a release that grants")
		calls(t, FairAcquire, k.FairAcquire(), look("B"), 3, "a check that finds its grant: EXISTS HMGET PTTL")
		r := l.ints(FairAcquire, k.FairAcquire(), attempt("B"))
		assert.Equal(t, []int64{1, 1, 0}, r[:3], "B was granted the lock")
		require.Equal(t, int64(0), l.ints(FairRelease, k.FairRelease(), FairReleaseArgs{Owner: "B", Request: "r2"}.Strings())[0])
	})

	for _, fair := range []string{"plain", "fair"} {
		t.Run("rw write "+fair, func(t *testing.T) {
			k := l.keys("rw" + fair)
			defer l.do("DEL", k.Lock, k.Leases, k.Writers, k.Queue, k.Deadlines)
			attempt := func(owner string) []string {
				return RWAcquireArgs{Owner: owner, LeaseMs: lease, Request: owner, Mode: Take, Access: Write, FairWaitMs: wait,
					Join: true, Fair: fair == "fair", ClaimMs: "3000"}.Strings()
			}
			require.Equal(t, int64(1), l.ints(RWAcquire, k.RWAcquire(), attempt("A"))[0])
			require.Equal(t, int64(0), l.ints(RWAcquire, k.RWAcquire(), attempt("B"))[0])
			pause()
			// EXISTS HMGET TIME PTTL ZADD PEXPIRE: the holder is lone (its lease the hash's PTTL,
			// no lapsed holds to read), so W is read only by its ZADD
			budget := int64(6)
			if fair == "fair" {
				budget = 10
			}
			calls(t, RWAcquire, k.RWAcquire(), attempt("B"), budget, "a waiting writer's retry")
			budget = 3 // HMGET DEL PUBLISH: the lone hold goes, waking the waiters
			if fair == "fair" {
				budget = 18 // the grant to the queued writer (the lone hold leaves no lease to read or remove)
			}
			calls(t, RWRelease, k.RWRelease(), RWReleaseArgs{Owner: "A", Request: "r1", Access: Write, Fair: fair == "fair"}.Strings(),
				budget, "the writer's release")
			r := l.ints(RWAcquire, k.RWAcquire(), attempt("B"))
			assert.Equal(t, int64(1), r[0], "B takes the lock, or was granted it")
		})
	}

	t.Run("semaphore", func(t *testing.T) {
		k := l.keys("sem")
		defer l.do(append([]string{"DEL"}, k.Sem()...)...)
		attempt := func(id string) []string {
			return SemAcquireArgs{Hold: id, LeaseMs: lease, Request: id, Mode: Take, Permits: "1", N: "1", FairWaitMs: wait,
				Join: true, ClaimMs: "3000"}.Strings()
		}
		require.Equal(t, int64(1), l.ints(SemAcquire, k.Sem(), attempt("A"))[0])
		require.Equal(t, int64(0), l.ints(SemAcquire, k.Sem(), attempt("B"))[0])
		pause()
		// its place refreshed without the hash's PEXPIREs (the holder's lease outlives it)
		calls(t, SemAcquire, k.Sem(), attempt("B"), 12, "a waiter's retry")
		look := func(id string) []string {
			return SemAcquireArgs{Hold: id, LeaseMs: lease, Request: id, Mode: Look, Permits: "1", N: "1", FairWaitMs: wait,
				Join: true, ClaimMs: "3000"}.Strings()
		}
		calls(t, SemAcquire, k.Sem(), look("B"), 6, "a waiter's check after it subscribed: EXISTS HMGET ZSCORE TIME ZRANGE LINDEX")
		// the grant's hold written with the permits in use (one HSET); no EXISTS of the queue
		calls(t, SemRelease, k.Sem(), SemReleaseArgs{Hold: "A"}.Strings(), 16, "a release that grants")
		r := l.ints(SemAcquire, k.Sem(), attempt("B"))
		assert.Equal(t, int64(1), r[0], "B was granted the permit")
	})
}
