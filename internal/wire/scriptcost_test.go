package wire

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The calls inside Redis (every redis.call, as the root's scriptcost_test.go counts them) of
// the election's and the MultiLock's scripts on their usual paths stay within these budgets.
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
		acquire := MultiAcquireArgs{"S", "rq000000000001", Take, multiWaitMs, true, g.specs}.Strings()
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
				take := l.calls(MultiAcquire, g.allKeys(), MultiAcquireArgs{"S", "rq000000000001", Take, multiWaitMs, true, g.specs}.Strings())
				assert.LessOrEqual(t, take, c.take*int64(n), "a group acquire of free members")
				rel := l.calls(MultiRelease, g.allKeys(), MultiReleaseArgs{"S", "rl000000000001", UnlockMessage, g.specs}.Strings())
				assert.LessOrEqual(t, rel, c.release*int64(n), "a group release of the last holds, nobody waiting")
				t.Logf("%d members, %s: acquire %d calls, release %d", n, c.name, take, rel)
			})
		}
	}
}
