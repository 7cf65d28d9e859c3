package wire

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The election's scripts called directly, with made-up candidates, on the suite's deployment:
// the leader record and term written with the hold in one script, FIFO candidates, direct
// handoff, terms from the counter and the clock, the term checks of resign and proclaim, the
// leader channel's messages, and kinds kept apart.

// election runs the election scripts on one name of a lab.
type election struct {
	*lab
	k Keys
}

func newElection(l *lab, name string) *election { return &election{lab: l, k: l.keys(name)} }

const (
	elLeaseMs = "10000"
	elClaimMs = "3000"
)

// campaign runs one attempt of candidate cand with value.
func (e *election) campaign(cand, value string, mode Mode, join bool) []int64 {
	e.t.Helper()
	return e.ints(Campaign, e.k.Election(), CampaignArgs{Candidate: cand, LeaseMs: elLeaseMs, Mode: mode,
		FairWaitMs: "5000", Join: join, ClaimMs: elClaimMs, Value: value}.Strings())
}

func (e *election) resign(cand string, term int64) TermCheck {
	e.t.Helper()
	tc, err := ParseTermCheck(e.ints(Resign, e.k.Election(), ResignArgs{Candidate: cand, Term: term}.Strings()))
	require.NoError(e.t, err)
	return tc
}

func (e *election) proclaim(cand string, term int64, value string) TermCheck {
	e.t.Helper()
	tc, err := ParseTermCheck(e.ints(Proclaim, e.k.Election(), ProclaimArgs{Candidate: cand, Term: term, Value: value}.Strings()))
	require.NoError(e.t, err)
	return tc
}

func (e *election) leave(cand, value string) int64 {
	e.t.Helper()
	n, err := e.exec(ElectionLeave, e.k.Election(), ElectionLeaveArgs{Candidate: cand, ClaimMs: elClaimMs, Value: value}.Strings()).AsInt64()
	require.NoError(e.t, err)
	return n
}

func (e *election) force() int64 {
	e.t.Helper()
	n, err := e.exec(ElectionForceUnlock, e.k.Election(), nil).AsInt64()
	require.NoError(e.t, err)
	return n
}

func (e *election) leader() Leadership {
	e.t.Helper()
	v, err := e.exec(ReadLeader, e.k.Leadership(), nil).ToArray()
	require.NoError(e.t, err)
	l, err := ParseLeadership(v)
	require.NoError(e.t, err)
	return l
}

func (e *election) state(kind string) StateReply {
	e.t.Helper()
	v, err := e.exec(ReadState, e.k.State(), StateArgs{Kind: kind}.Strings()).ToArray()
	require.NoError(e.t, err)
	st, err := ParseState(v)
	require.NoError(e.t, err)
	return st
}

// candidates returns the candidate ids in the queue, in order.
func (e *election) candidates() []string {
	e.t.Helper()
	out := []string{}
	for _, entry := range e.list(e.k.Queue) {
		addr, _, _, _ := splitTestEntry(entry)
		out = append(out, addr)
	}
	return out
}

// splitTestEntry splits a queue entry as queue.lua's splitEntry does.
func splitTestEntry(e string) (addr, req, claim, extra string) {
	parts := [4]string{}
	for i := 0; i < 3; i++ {
		j := 0
		for j < len(e) && e[j] != 0 {
			j++
		}
		parts[i] = e[:j]
		if j == len(e) {
			return parts[0], parts[1], parts[2], ""
		}
		e = e[j+1:]
	}
	return parts[0], parts[1], parts[2], e
}

// record returns the leader record in the election's hash: the holder's count (by candidate),
// and the kind, value, term and grant fields.
func (e *election) record() map[string]string { return e.hash(e.k.Lock) }

func (e *election) cleanup() {
	e.t.Cleanup(func() {
		e.do("DEL", e.k.Lock, e.k.Queue, e.k.Deadlines, e.k.Fence)
	})
}

// Candidates lead in the order they began to campaign; a resign hands the lead to the next one
// in the same script, its record and term written before the script returns; observers hear of
// every leader, proclaim and vacancy; stale terms change nothing.
func TestElectionScripts_fifoHandoffAndTerms(t *testing.T) {
	l := newLab(t)
	e := newElection(l, "el")
	e.cleanup()
	msgs := l.listen(e.k.Channel, e.k.Leader)
	ch, lc := e.k.Channel+" ", e.k.Leader+" "

	assert.Equal(t, Leadership{}, e.leader(), "never used: nobody leads")
	before := l.serverMs()
	r := e.campaign("candA", "host-a", Take, true)
	require.Len(t, r, 3)
	assert.Equal(t, []int64{1, 1}, r[:2], "A leads")
	t1 := r[2]
	assert.GreaterOrEqual(t, t1, before, "a term is never below the server's clock in ms")
	expect(t, msgs, lc+"leader "+strconv.FormatInt(t1, 10)+" 10000 host-a")
	assert.Equal(t, map[string]string{"candA": "1", FieldKind: "el", FieldValue: "host-a", FieldTerm: strconv.FormatInt(t1, 10)},
		e.record(), "the hold and the leader record, in one hash")
	assert.Equal(t, strconv.FormatInt(t1, 10), l.str("GET", e.k.Fence), "the counter keeps the last term")
	ld := e.leader()
	assert.Equal(t, t1, ld.Term)
	assert.Equal(t, "host-a", ld.Value)
	assert.InDelta(t, 10000, ld.Lease.Milliseconds(), 200)

	// B and C queue in arrival order; D's single attempt does not queue.
	assert.Equal(t, []int64{0, 10000, 1, 1}, clampPTTL(e.campaign("candB", "host-b", Take, true)))
	assert.Equal(t, []int64{0, 10000, 0, 1}, clampPTTL(e.campaign("candC", "", Take, true)))
	assert.Equal(t, []int64{0, 10000, 0, 0}, clampPTTL(e.campaign("candD", "host-d", Take, false)))
	assert.Equal(t, []string{"candB", "candC"}, e.candidates())
	st := e.state("")
	assert.Equal(t, "election", st.Kind, "told from the hash")
	assert.Equal(t, t1, st.Token, "Token: the last term")
	require.Len(t, st.Holders, 1)
	assert.Equal(t, "candA", st.Holders[0].Owner)
	require.Len(t, st.Waiters, 2)
	assert.Equal(t, "candB", st.Waiters[0].Owner)
	assert.Equal(t, "candC", st.Waiters[1].Owner)

	// A resigns: B leads when the script returns, with a larger term and a lease of its claim,
	// and is told so on the lock's channel; observers hear of B.
	rs := e.resign("candA", t1)
	assert.True(t, rs.Current)
	assert.Equal(t, int64(1), rs.Told, "B's wake-up reached this test's subscription")
	rec := e.record()
	t2, err := strconv.ParseInt(rec[FieldTerm], 10, 64)
	require.NoError(t, err)
	assert.Greater(t, t2, t1)
	assert.Equal(t, map[string]string{"candB": "1", FieldGrant: "candB", FieldKind: "el", FieldValue: "host-b",
		FieldTerm: strconv.FormatInt(t2, 10)}, rec, "B's record, written by A's resign")
	assert.InDelta(t, 3000, l.int("PTTL", e.k.Lock), 200, "the grant's lease is B's claim")
	expect(t, msgs, ch+"@candB\x00candB\x00"+strconv.FormatInt(t2, 10)+"\x003000")
	expect(t, msgs, lc+"leader "+strconv.FormatInt(t2, 10)+" 3000 host-b")
	assert.Equal(t, []string{"candC"}, e.candidates())

	// B's next attempt finds that it leads.
	r = e.campaign("candB", "host-b", Take, true)
	require.Len(t, r, 4)
	assert.Equal(t, []int64{1, 1, t2}, r[:3])
	assert.InDelta(t, 3000, r[3], 200)

	// A's term is stale: resign and proclaim change nothing and tell nobody.
	assert.Equal(t, TermCheck{Term: t2}, e.resign("candA", t1))
	assert.Equal(t, TermCheck{Term: t2}, e.proclaim("candA", t1, "evil"))
	assert.Equal(t, TermCheck{Term: t2}, e.resign("candB", t1), "B with A's term")
	assert.Equal(t, TermCheck{Term: t2}, e.proclaim("candB", t2-1, "evil"))
	assert.Equal(t, rec, e.record(), "nothing changed")
	quiet(t, msgs)

	// B proclaims: a new value, the same term.
	pc := e.proclaim("candB", t2, "host-b2")
	assert.True(t, pc.Current)
	assert.Equal(t, "host-b2", e.record()[FieldValue])
	assert.Equal(t, strconv.FormatInt(t2, 10), e.record()[FieldTerm])
	m := <-msgs
	ev, ok := ParseLeaderMessage(m[len(lc):])
	require.True(t, ok, m)
	assert.Equal(t, LeaderEvent{Kind: Proclaimed, Term: t2, Lease: ev.Lease, Value: "host-b2"}, ev)
	assert.InDelta(t, 3000, ev.Lease.Milliseconds(), 200)

	// B resigns: C leads (FIFO), its empty value written; C resigns: nobody is next.
	assert.True(t, e.resign("candB", t2).Current)
	t3, _ := strconv.ParseInt(e.record()[FieldTerm], 10, 64)
	assert.Greater(t, t3, t2)
	assert.Equal(t, "", e.record()[FieldValue])
	expect(t, msgs, ch+"@candC\x00candC\x00"+strconv.FormatInt(t3, 10)+"\x003000")
	expect(t, msgs, lc+"leader "+strconv.FormatInt(t3, 10)+" 3000 ")
	assert.Equal(t, TermCheck{Current: true}, e.resign("candC", t3))
	expect(t, msgs, lc+"vacant "+strconv.FormatInt(t3, 10))
	assert.Equal(t, Leadership{}, e.leader(), "vacant")
	assert.Equal(t, TermCheck{}, e.resign("candC", t3), "a retried resign: nobody leads")
	quiet(t, msgs)
	st = e.state("election")
	assert.Empty(t, st.Holders)
	assert.Empty(t, st.Waiters)
	assert.Equal(t, t3, st.Token)
	assert.Equal(t, []string{e.k.Fence}, l.Keys(), "only the counter of terms remains")
}

// clampPTTL rounds an attempt's pttl (r[1]) up to the lease when it is within 200ms of it.
func clampPTTL(r []int64) []int64 {
	if len(r) > 1 && r[0] == 0 && r[1] > 9800 && r[1] <= 10000 {
		r[1] = 10000
	}
	return r
}

// A term is the counter plus one or the server's clock, whichever is larger: a counter below
// the clock (a failover to a replica that missed the last grants, a restart without
// persistence) gives the clock; one above it gives the counter plus one.
func TestElectionScripts_termClockFloor(t *testing.T) {
	l := newLab(t)
	e := newElection(l, "clock")
	e.cleanup()

	// No counter: the clock.
	before := l.serverMs()
	r := e.campaign("c1", "v", Take, true)
	assert.GreaterOrEqual(t, r[2], before)
	assert.LessOrEqual(t, r[2], l.serverMs())
	require.True(t, e.resign("c1", r[2]).Current)

	// A counter below the clock (as after a failover to a lagging replica): the clock.
	require.NoError(t, l.do("SET", e.k.Fence, "5").Error())
	before = l.serverMs()
	r = e.campaign("c2", "v", Take, true)
	assert.GreaterOrEqual(t, r[2], before)
	assert.Equal(t, strconv.FormatInt(r[2], 10), l.str("GET", e.k.Fence))

	// A handoff with the counter below the clock: the clock too, and above the last term.
	last := r[2]
	e.campaign("c3", "v", Take, true)
	require.NoError(t, l.do("SET", e.k.Fence, "5").Error())
	before = l.serverMs()
	require.True(t, e.resign("c2", last).Current)
	t3, _ := strconv.ParseInt(e.record()[FieldTerm], 10, 64)
	assert.GreaterOrEqual(t, t3, before)
	require.True(t, e.resign("c3", t3).Current)

	// A counter above the clock: the counter plus one, on a take and on a handoff.
	ahead := l.serverMs() + 1e9
	require.NoError(t, l.do("SET", e.k.Fence, strconv.FormatInt(ahead, 10)).Error())
	r = e.campaign("c4", "v", Take, true)
	assert.Equal(t, ahead+1, r[2])
	e.campaign("c5", "v", Take, true)
	require.True(t, e.resign("c4", ahead+1).Current)
	assert.Equal(t, strconv.FormatInt(ahead+2, 10), e.record()[FieldTerm])
	assert.Equal(t, strconv.FormatInt(ahead+2, 10), l.str("GET", e.k.Fence))

	// Terms only rise over many handoffs in one millisecond or many.
	prev := ahead + 2
	holder := "c5"
	for i := 0; i < 20; i++ {
		next := "n" + strconv.Itoa(i)
		e.campaign(next, "v", Take, true)
		require.True(t, e.resign(holder, prev).Current)
		term, _ := strconv.ParseInt(e.record()[FieldTerm], 10, 64)
		assert.Greater(t, term, prev)
		prev, holder = term, next
	}
	require.True(t, e.resign(holder, prev).Current)
}

// A bad counter of terms, a key of the wrong type or a lock of another kind raise with nothing
// changed; the Mutex, RWMutex and Semaphore scripts refuse an election's hash, and the
// election's scripts refuse theirs.
func TestElectionScripts_invalidChangesNothing(t *testing.T) {
	l := newLab(t)
	e := newElection(l, "bad")
	e.cleanup()

	for _, v := range []string{"not-a-number", "9223372036854775807"} {
		require.NoError(t, l.do("SET", e.k.Fence, v).Error())
		err := e.exec(Campaign, e.k.Election(), CampaignArgs{Candidate: "c", LeaseMs: elLeaseMs, Mode: Take,
			FairWaitMs: "5000", Join: true, ClaimMs: elClaimMs, Value: "v"}.Strings()).Error()
		assert.ErrorContains(t, err, "fencing counter", v)
		assert.Zero(t, l.int("EXISTS", e.k.Lock, e.k.Queue, e.k.Deadlines), "nothing written")
	}
	require.NoError(t, l.do("DEL", e.k.Fence).Error())

	// An election's hash refused by the other kinds' scripts.
	r := e.campaign("el1", "v", Take, true)
	require.Equal(t, int64(1), r[0])
	before := e.record()
	wrongType := func(name string, res rueidis.RedisResult) {
		t.Helper()
		assert.ErrorContains(t, res.Error(), "WRONGTYPE", name)
	}
	k := e.k
	wrongType("acquire", e.exec(Acquire, k.Acquire(true), AcquireArgs{"o", "10000", "o", Take, ""}.Strings()))
	wrongType("fair acquire", e.exec(FairAcquire, k.FairAcquire(), FairAcquireArgs{"o", "10000", "o", Take, true, "5000", true, "3000", ""}.Strings()))
	wrongType("release", e.exec(Release, k.Release(), ReleaseArgs{"el1", "rq0000000001", "0"}.Strings()))
	wrongType("fair release", e.exec(FairRelease, k.FairRelease(), FairReleaseArgs{"el1", "rq0000000001"}.Strings()))
	wrongType("fair leave", e.exec(FairLeave, k.FairLeave(), FairLeaveArgs{"el1", "el1", "3000", true, ""}.Strings()))
	wrongType("force unlock", e.exec(ForceUnlock, k.ForceUnlock(true), ForceUnlockArgs{Message: "@", Fair: true}.Strings()))
	wrongType("inspect", e.exec(Inspect, k.Inspect(), InspectArgs{"el1"}.Strings()))
	wrongType("rw acquire", e.exec(RWAcquire, k.RWAcquire(), RWAcquireArgs{"o", "10000", "o", Take, Write, false, "5000", true, true, "3000", ""}.Strings()))
	wrongType("sem acquire", e.exec(SemAcquire, k.Sem(), SemAcquireArgs{"o", "10000", "o", Take, "2", "1", "5000", true, "3000", ""}.Strings()))
	wrongType("state as a mutex", e.exec(ReadState, k.State(), StateArgs{"fair_mutex"}.Strings()))
	wrongType("multi acquire", e.exec(MultiAcquire, k.Member(), MultiAcquireArgs{"o", "o", Take, "5000", true, "",
		[]string{MemberSpec("10000", true, false)}}.Strings()))
	assert.Equal(t, before, e.record(), "the election unchanged")
	ld := e.leader()
	assert.Equal(t, r[2], ld.Term)
	assert.Equal(t, "v", ld.Value)
	require.True(t, e.resign("el1", r[2]).Current)

	// A Mutex's hash, a fair one's and an RWMutex's refused by the election's scripts.
	for _, other := range []struct {
		name string
		take func() rueidis.RedisResult
	}{
		{"mutex", func() rueidis.RedisResult {
			return e.exec(Acquire, k.Acquire(false), AcquireArgs{"m", "10000", "m", Take, ""}.Strings())
		}},
		{"fair mutex", func() rueidis.RedisResult {
			return e.exec(FairAcquire, k.FairAcquire(), FairAcquireArgs{"m", "10000", "m", Take, false, "5000", true, "3000", ""}.Strings())
		}},
		{"rw mutex", func() rueidis.RedisResult {
			return e.exec(RWAcquire, k.RWAcquire(), RWAcquireArgs{"m", "10000", "m", Take, Write, false, "5000", true, false, "3000", ""}.Strings())
		}},
	} {
		require.NoError(t, other.take().Error(), other.name)
		hash := e.record()
		wrongType(other.name+": campaign", e.exec(Campaign, k.Election(), CampaignArgs{"c", elLeaseMs, Take, "5000", true, elClaimMs, "v", ""}.Strings()))
		wrongType(other.name+": resign", e.exec(Resign, k.Election(), ResignArgs{"m", 1}.Strings()))
		wrongType(other.name+": proclaim", e.exec(Proclaim, k.Election(), ProclaimArgs{"m", 1, "v"}.Strings()))
		wrongType(other.name+": leave", e.exec(ElectionLeave, k.Election(), ElectionLeaveArgs{"m", elClaimMs, "v", ""}.Strings()))
		wrongType(other.name+": leader", e.exec(ReadLeader, k.Leadership(), nil))
		wrongType(other.name+": force", e.exec(ElectionForceUnlock, k.Election(), nil))
		wrongType(other.name+": state", e.exec(ReadState, k.State(), StateArgs{"election"}.Strings()))
		assert.Equal(t, hash, e.record(), "%s: unchanged", other.name)
		assert.Empty(t, e.list(k.Queue), "%s: no candidate queued", other.name)
		require.NoError(t, l.do("DEL", k.Lock, k.Leases).Error())
	}
}

// A candidate that gives up leaves the queue; the lead it had (handed to it or taken, known or
// not) is given back to the next candidate, or observers hear of the vacancy; a free election
// goes to the live head. Resolve reports whether an attempt whose reply was lost took the lead.
func TestElectionScripts_leaveResolveForce(t *testing.T) {
	l := newLab(t)
	e := newElection(l, "leave")
	e.cleanup()
	msgs := l.listen(e.k.Leader)
	lc := e.k.Leader + " "

	// Resolve: nothing ran, then the take ran; a take replayed after a lost reply holds once.
	assert.Equal(t, []int64{0, -2, 0}, e.campaign("A", "a", Resolve, true))
	r := e.campaign("A", "a", Take, true)
	tA := r[2]
	expect(t, msgs, lc+"leader "+strconv.FormatInt(tA, 10)+" 10000 a")
	assert.Equal(t, []int64{1, 1, tA}, e.campaign("A", "a", Resolve, true))
	assert.Equal(t, []int64{1, 1, tA}, e.campaign("A", "a", Take, true), "the take again: the same term")
	assert.Equal(t, "1", e.record()["A"])
	quiet(t, msgs)

	// B and C queue; D queues and leaves: removed, nothing else moves.
	e.campaign("B", "b", Take, true)
	e.campaign("C", "c", Take, true)
	e.campaign("D", "d", Take, true)
	assert.Equal(t, int64(1), e.leave("D", "d"))
	assert.Equal(t, int64(0), e.leave("D", "d"), "idempotent")
	assert.Equal(t, []string{"B", "C"}, e.candidates())

	// A resigns; B is handed the lead but gives up before it learns of it: C leads.
	require.True(t, e.resign("A", tA).Current)
	tB, _ := strconv.ParseInt(e.record()[FieldTerm], 10, 64)
	expect(t, msgs, lc+"leader "+strconv.FormatInt(tB, 10)+" 3000 b")
	assert.Equal(t, int64(1), e.leave("B", "b"))
	tC, _ := strconv.ParseInt(e.record()[FieldTerm], 10, 64)
	assert.Greater(t, tC, tB)
	assert.Equal(t, "c", e.record()[FieldValue])
	expect(t, msgs, lc+"leader "+strconv.FormatInt(tC, 10)+" 3000 c")

	// C, having taken the lead (its reply lost), gives up: nobody is next.
	assert.Equal(t, int64(1), e.leave("C", "c"))
	expect(t, msgs, lc+"vacant "+strconv.FormatInt(tC, 10))
	assert.Zero(t, l.int("EXISTS", e.k.Lock, e.k.Queue, e.k.Deadlines))

	// A leader whose lease ran out (its hash gone, nobody told) with candidates queued: a
	// candidate that leaves hands the free election to the next live one.
	r = e.campaign("E", "e", Take, true)
	e.campaign("F", "f", Take, true)
	e.campaign("G", "g", Take, true)
	expect(t, msgs, lc+"leader "+strconv.FormatInt(r[2], 10)+" 10000 e")
	require.NoError(t, l.do("DEL", e.k.Lock).Error())
	assert.Equal(t, int64(1), e.leave("F", "f"))
	assert.Equal(t, "1", e.record()["G"])
	tG, _ := strconv.ParseInt(e.record()[FieldTerm], 10, 64)
	expect(t, msgs, lc+"leader "+strconv.FormatInt(tG, 10)+" 3000 g")

	// Forced out: the next candidate leads; forced again: vacant; forced on a vacant one: nothing.
	e.campaign("H", "h", Take, true)
	assert.Equal(t, int64(1), e.force())
	tH, _ := strconv.ParseInt(e.record()[FieldTerm], 10, 64)
	assert.Greater(t, tH, tG)
	expect(t, msgs, lc+"leader "+strconv.FormatInt(tH, 10)+" 3000 h")
	assert.Equal(t, int64(1), e.force())
	expect(t, msgs, lc+"vacant "+strconv.FormatInt(tH, 10))
	assert.Equal(t, int64(0), e.force())
	quiet(t, msgs)
	assert.Equal(t, TermCheck{}, e.resign("H", tH))
}

// The leader's record expires with its hold: Leader reads a leader exactly while a hold exists,
// and a renewal (renew.lua, as a Mutex's) extends both.
func TestElectionScripts_recordLivesWithTheHold(t *testing.T) {
	l := newLab(t)
	e := newElection(l, "lease")
	e.cleanup()
	r := e.ints(Campaign, e.k.Election(), CampaignArgs{Candidate: "A", LeaseMs: "300", Mode: Take, FairWaitMs: "5000",
		Join: true, ClaimMs: elClaimMs, Value: "a"}.Strings())
	require.Equal(t, int64(1), r[0])
	ok, err := e.exec(Renew, e.k.Renew(false), RenewArgs{LeaseMs: "600", Owners: []string{"A"}}.Strings()).AsIntSlice()
	require.NoError(t, err)
	assert.Equal(t, []int64{1}, ok)
	held, err := e.exec(Check, e.k.Renew(false), CheckArgs{Kind: CheckMutex, Owners: []string{"A", "B"}}.Strings()).AsIntSlice()
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 0}, held)
	assert.InDelta(t, 600, e.leader().Lease.Milliseconds(), 100)
	time.Sleep(700 * time.Millisecond)
	assert.Equal(t, Leadership{}, e.leader(), "the lease ran out: nobody leads")
	assert.Equal(t, TermCheck{}, e.resign("A", r[2]), "a lapsed term: not current")
	assert.Equal(t, TermCheck{}, e.proclaim("A", r[2], "x"))
	assert.Zero(t, l.int("EXISTS", e.k.Lock))
}
