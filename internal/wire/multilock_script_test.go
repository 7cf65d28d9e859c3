package wire

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A MultiLock's group scripts called directly, with made-up owners and request ids: all or
// nothing, re-entry, replayed requests, fair members' queues, release and leave.

// group is a group of Mutexes (one hash slot: their names share a {tag}) of a lab.
type group struct {
	*lab
	names []string
	keys  []Keys
	specs []string
	fair  []bool
	fence []bool
}

// member is one Mutex of a group: its name, whether it is fair, its fencing and its lease.
type member struct {
	name    string
	fair    bool
	fencing bool
	leaseMs string
}

func newGroup(l *lab, members ...member) *group {
	g := &group{lab: l}
	for _, m := range members {
		g.names = append(g.names, m.name)
		g.keys = append(g.keys, l.keys(m.name))
		g.specs = append(g.specs, MemberSpec(m.leaseMs, m.fair, m.fencing))
		g.fair, g.fence = append(g.fair, m.fair), append(g.fence, m.fencing)
	}
	l.t.Cleanup(func() {
		for _, k := range g.keys {
			l.do("DEL", k.Lock, k.Queue, k.Deadlines, k.Fence)
		}
	})
	return g
}

// sub returns the group of g's members at indexes is.
func (g *group) sub(is ...int) *group {
	s := &group{lab: g.lab}
	for _, i := range is {
		s.names, s.keys = append(s.names, g.names[i]), append(s.keys, g.keys[i])
		s.specs, s.fair, s.fence = append(s.specs, g.specs[i]), append(s.fair, g.fair[i]), append(s.fence, g.fence[i])
	}
	return s
}

func (g *group) allKeys() []string {
	var keys []string
	for _, k := range g.keys {
		keys = append(keys, k.Member()...)
	}
	return keys
}

const multiWaitMs = "5000"

func (g *group) acquire(owner, req string, mode Mode, join bool) MultiAttempt {
	g.t.Helper()
	r := g.ints(MultiAcquire, g.allKeys(), MultiAcquireArgs{Owner: owner, Request: req, Mode: mode, FairWaitMs: multiWaitMs,
		Join: join, Members: g.specs}.Strings())
	a, err := ParseMultiAttempt(r, len(g.keys))
	require.NoError(g.t, err, "%v", r)
	return a
}

func (g *group) release(owner, req string) MultiReleased {
	g.t.Helper()
	r := g.ints(MultiRelease, g.allKeys(), MultiReleaseArgs{Owner: owner, Request: req, Message: UnlockMessage,
		Members: g.specs}.Strings())
	rel, err := ParseMultiRelease(r, len(g.keys))
	require.NoError(g.t, err, "%v", r)
	return rel
}

func (g *group) leave(owner, req string) int64 {
	g.t.Helper()
	n, err := g.exec(MultiLeave, g.allKeys(), MultiLeaveArgs{Owner: owner, Request: req, Members: g.specs}.Strings()).AsInt64()
	require.NoError(g.t, err)
	return n
}

// counts returns owner's hold count on every member (0: none).
func (g *group) counts(owner string) []int64 {
	g.t.Helper()
	out := make([]int64, len(g.keys))
	for i, k := range g.keys {
		if s := g.str("HGET", k.Lock, owner); s != "" {
			out[i], _ = strconv.ParseInt(s, 10, 64)
		}
	}
	return out
}

// attempted returns the counts and tokens of an acquired attempt.
func attempted(a MultiAttempt, n int) (counts, tokens []int64) {
	for i := 0; i < n; i++ {
		counts, tokens = append(counts, a.Count(i)), append(tokens, a.Token(i))
	}
	return counts, tokens
}

// queued returns the owners in member i's queue, in order.
func (g *group) queued(i int) []string {
	g.t.Helper()
	out := []string{}
	for _, e := range g.list(g.keys[i].Queue) {
		addr, _, _, _ := splitTestEntry(e)
		out = append(out, addr)
	}
	return out
}

// single runs a single Mutex's attempt (acquire.lua or fair_acquire.lua, waiting with a claim
// of 3s; fencing as the member's) of owner's call req on member i.
func (g *group) single(i int, owner, req string) []int64 {
	g.t.Helper()
	k := g.keys[i]
	if g.fair[i] {
		return g.ints(FairAcquire, k.FairAcquire(), FairAcquireArgs{Owner: owner, LeaseMs: "10000", Request: req, Mode: Take,
			Fencing: g.fence[i], FairWaitMs: multiWaitMs, Join: true, ClaimMs: "3000"}.Strings())
	}
	return g.ints(Acquire, k.Acquire(g.fence[i]), AcquireArgs{Owner: owner, LeaseMs: "10000", Request: req, Mode: Take}.Strings())
}

// unlock releases one hold of owner's on member i with a single Mutex's release script.
func (g *group) unlock(i int, owner, req string) []int64 {
	g.t.Helper()
	k := g.keys[i]
	if g.fair[i] {
		return g.ints(FairRelease, k.FairRelease(), FairReleaseArgs{Owner: owner, Request: req}.Strings())
	}
	return g.ints(Release, k.Release(), ReleaseArgs{Owner: owner, Request: req, Message: UnlockMessage}.Strings())
}

// fourMembers is a group of a plain member, a fair one, a fair one with fencing tokens and a
// plain one with fencing tokens (leases 10s, 20s, 30s, 40s).
func fourMembers(l *lab) *group {
	return newGroup(l, member{"{g}a", false, false, "10000"}, member{"{g}b", true, false, "20000"},
		member{"{g}c", true, true, "30000"}, member{"{g}d", false, true, "40000"})
}

// Every member taken in one script, each with its own lease and token; a request sent again
// counts nothing twice; resolve reports it; re-entry of members the owner holds.
func TestMultiScripts_takeReplayReenter(t *testing.T) {
	l := newLab(t)
	g := fourMembers(l)

	assert.Equal(t, MultiAttempt{Blocked: -1, PTTL: 0}, g.acquire("S", "rq000000000001", Resolve, true), "not run")
	a := g.acquire("S", "rq000000000001", Take, true)
	require.True(t, a.Acquired)
	counts, tokens := attempted(a, 4)
	assert.Equal(t, []int64{1, 1, 1, 1}, counts)
	assert.Equal(t, []int64{0, 0, 1, 1}, tokens, "tokens of the fenced members")
	for i, want := range []int64{10000, 20000, 30000, 40000} {
		assert.InDelta(t, want, l.int("PTTL", g.keys[i].Lock), 200, "member %d's own lease", i)
	}
	assert.Equal(t, []int64{1, 1, 1, 1}, g.counts("S"))

	// The same request again (a lost reply): nothing counted twice; resolve says it ran.
	for _, mode := range []Mode{Take, Resolve} {
		a = g.acquire("S", "rq000000000001", mode, true)
		require.True(t, a.Acquired, mode)
		counts, tokens = attempted(a, 4)
		assert.Equal(t, []int64{1, 1, 1, 1}, counts, mode)
		assert.Equal(t, []int64{0, 0, 1, 1}, tokens, mode)
		assert.Equal(t, []int64{1, 1, 1, 1}, g.counts("S"), mode)
	}

	// Another request re-enters all four.
	a = g.acquire("S", "rq000000000002", Take, true)
	counts, tokens = attempted(a, 4)
	assert.Equal(t, []int64{2, 2, 2, 2}, counts)
	assert.Equal(t, []int64{0, 0, 1, 1}, tokens, "a re-entry keeps the hold's token")

	// Release one hold of each, and again (a lost reply): released once.
	rel := g.release("S", "rl000000000001")
	assert.Equal(t, MultiReleased{1, 0, 1, 0, 1, 0, 1, 0}, rel)
	assert.Equal(t, rel, g.release("S", "rl000000000001"), "a repeat releases nothing more")
	assert.Equal(t, []int64{1, 1, 1, 1}, g.counts("S"))
	rel = g.release("S", "rl000000000002")
	assert.Equal(t, MultiReleased{0, 0, 0, 0, 0, 0, 0, 0}, rel)
	assert.Equal(t, MultiReleased{-1, 0, -1, 0, -1, 0, -1, 0}, g.release("S", "rl000000000002"),
		"a repeat of the last release: the owner holds none (the hashes, records included, are gone)")
	assert.Equal(t, []int64{0, 0, 0, 0}, g.counts("S"))

	// An owner that holds a and c alone (single Mutexes) takes the set: a and c re-entered,
	// with a lease never shortened (a: 10s alone, the set's 10s; c: held with 10s, the set's
	// 30s), b and d new.
	require.Equal(t, int64(1), g.single(0, "T", "rq000000000003")[0])
	require.Equal(t, int64(1), g.single(2, "T", "rq000000000004")[0])
	require.NoError(t, l.do("PEXPIRE", g.keys[0].Lock, "60000").Error())
	a = g.acquire("T", "rq000000000005", Take, true)
	require.True(t, a.Acquired)
	counts, tokens = attempted(a, 4)
	assert.Equal(t, []int64{2, 1, 2, 1}, counts)
	assert.Equal(t, []int64{0, 0, 2, 2}, tokens)
	assert.InDelta(t, 60000, l.int("PTTL", g.keys[0].Lock), 200, "a's longer lease kept")
	assert.InDelta(t, 30000, l.int("PTTL", g.keys[2].Lock), 200, "c's lease extended to the set's")
	assert.Equal(t, MultiReleased{1, 0, 0, 0, 1, 0, 0, 0}, g.release("T", "rl000000000003"), "the singles' holds stay")
	assert.Equal(t, int64(0), g.unlock(0, "T", "rl000000000004")[0])
	assert.Equal(t, int64(0), g.unlock(2, "T", "rl000000000005")[0])

	// A fresh owner (its id is the request id) writes no record; a replay still finds its holds.
	a = g.acquire("rq000000000006", "rq000000000006", Take, true)
	require.True(t, a.Acquired)
	for _, k := range g.keys {
		assert.Len(t, l.hash(k.Lock), 1, "only the hold: no record")
	}
	a = g.acquire("rq000000000006", "rq000000000006", Resolve, true)
	counts, _ = attempted(a, 4)
	assert.Equal(t, []int64{1, 1, 1, 1}, counts)
	// One member lost since (its lease ran out): a replay reads count 0 there.
	require.NoError(t, l.do("DEL", g.keys[1].Lock).Error())
	a = g.acquire("rq000000000006", "rq000000000006", Take, true)
	counts, _ = attempted(a, 4)
	assert.Equal(t, []int64{1, 0, 1, 1}, counts)
	assert.Equal(t, MultiReleased{0, 0, -1, 0, 0, 0, 0, 0}, g.release("rq000000000006", "rl000000000006"))
	assert.Equal(t, []string{}, keysBut(l.Keys(), ":fence"))
}

// keysBut returns keys without those ending in suffix.
func keysBut(keys []string, suffix string) []string {
	out := []string{}
	for _, k := range keys {
		if len(k) < len(suffix) || k[len(k)-len(suffix):] != suffix {
			out = append(out, k)
		}
	}
	return out
}

// When one member blocks, no hold changes: the set holds a place only in the queue of the first
// member that blocks, if that one is fair (with no claim), and is told when it may try again.
func TestMultiScripts_allOrNothing(t *testing.T) {
	l := newLab(t)
	g := fourMembers(l)
	msgs := l.listen(g.keys[0].Channel, g.keys[1].Channel, g.keys[2].Channel, g.keys[3].Channel)

	// X holds d (plain): the set is blocked by d, holds nothing and queues nowhere.
	require.Equal(t, int64(1), g.single(3, "X", "rq0000000000x1")[0])
	a := g.acquire("S", "rq000000000001", Take, true)
	assert.False(t, a.Acquired)
	assert.Equal(t, 3, a.Blocked, "d blocks")
	assert.InDelta(t, 10000, a.PTTL.Milliseconds(), 200)
	assert.False(t, a.Head, "d is plain")
	for i := 0; i < 3; i++ {
		assert.Zero(t, l.int("EXISTS", g.keys[i].Lock, g.keys[i].Queue, g.keys[i].Deadlines), "member %d untouched", i)
	}

	// Y holds c (fair): c blocks first now; the set queues there alone.
	require.Equal(t, int64(1), g.single(2, "Y", "rq0000000000y1")[0])
	a = g.acquire("S", "rq000000000001", Take, true)
	assert.Equal(t, 2, a.Blocked, "c blocks")
	assert.True(t, a.Head, "the set heads c's queue")
	assert.Equal(t, []string{}, g.queued(1))
	assert.Equal(t, []string{"S"}, g.queued(2))
	_, _, claim, extra := splitTestEntry(g.list(g.keys[2].Queue)[0])
	assert.Equal(t, "0", claim, "the set's entry asks for no claim")
	assert.Equal(t, "", extra)

	// A single fair caller takes b at once: the set holds no place there.
	r := g.single(1, "W", "rq0000000000w1")
	assert.Equal(t, int64(1), r[0], "b taken past the waiting set")

	// A try (join false) of another set blocks and joins nothing.
	a = g.acquire("U", "rq0000000000u1", Take, false)
	assert.Equal(t, 1, a.Blocked, "b blocks U")
	assert.Equal(t, []string{}, g.queued(1))
	assert.Equal(t, []string{"S"}, g.queued(2))

	// The set's next attempt finds b (fair, held by W) blocking first: it moves its place from c
	// to b.
	a = g.acquire("S", "rq000000000001", Take, true)
	assert.Equal(t, 1, a.Blocked, "b blocks")
	assert.Equal(t, []string{"S"}, g.queued(1))
	assert.Equal(t, []string{}, g.queued(2), "its place in c's queue is left")

	// W releases b: the set is woken ("@S"), b left free for it. Y and X release: c frees with
	// nobody to tell, d wakes its waiters ("0"). The set takes all four and leaves b's queue.
	assert.Equal(t, int64(0), g.unlock(1, "W", "rl0000000000w1")[0])
	expect(t, msgs, g.keys[1].Channel+" @S")
	assert.Zero(t, l.int("EXISTS", g.keys[1].Lock), "no grant: b is free")
	assert.Equal(t, int64(0), g.unlock(2, "Y", "rl0000000000y1")[0])
	assert.Equal(t, int64(0), g.unlock(3, "X", "rl0000000000x1")[0])
	expect(t, msgs, g.keys[3].Channel+" "+UnlockMessage)
	a = g.acquire("S", "rq000000000001", Take, true)
	require.True(t, a.Acquired)
	assert.Equal(t, []string{}, g.queued(1))

	// A single waiter of b queues behind the set's hold; the set's release grants it b.
	require.Equal(t, int64(0), g.single(1, "V", "rq0000000000v1")[0], "V queues on b")
	rel := g.release("S", "rl000000000001")
	assert.Equal(t, int64(0), rel.Left(1))
	expect(t, msgs, g.keys[0].Channel+" "+UnlockMessage)
	expect(t, msgs, g.keys[1].Channel+" @V\x00rq0000000000v1\x000\x003000")
	expect(t, msgs, g.keys[3].Channel+" "+UnlockMessage)
	quiet(t, msgs)
	assert.Equal(t, "rq0000000000v1", l.hash(g.keys[1].Lock)[FieldGrant], "V was granted b")
	assert.Equal(t, int64(0), g.unlock(1, "V", "rl0000000000v1")[0])
	assert.Equal(t, []string{}, keysBut(l.Keys(), ":fence"))
}

// A concurrent reader (one atomic read of every member) never sees the set hold some members
// and not others, while sets and single holders contend for them.
func TestMultiScripts_concurrentReaderSeesAllOrNothing(t *testing.T) {
	l := newLab(t)
	g := fourMembers(l)
	// The reader: which members each owner holds, in one read-only script.
	read := `local out = {}
for i = 1, #KEYS do out[i] = redis.call('hget', KEYS[i], ARGV[1]) or '' end
return out`
	// Two sets over the same members (one over three of them) and a single holder of b.
	sets := []*group{g, g.sub(0, 2, 3)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var partial, whole atomic.Int64
	for s, owner := range []string{"S1", "S2"} {
		var locks []string
		for _, k := range sets[s].keys {
			locks = append(locks, k.Lock)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				v, err := l.rc.Do(ctx, l.rc.B().EvalRo().Script(read).Numkeys(int64(len(locks))).Key(locks...).Arg(owner).Build()).AsStrSlice()
				if err != nil {
					continue
				}
				held := 0
				for _, s := range v {
					if s != "" {
						held++
					}
				}
				switch held {
				case 0:
				case len(locks):
					whole.Add(1)
				default:
					partial.Add(1)
				}
			}
		}()
	}
	// Each set, and the single holder, in a goroutine of its own: a call that takes and
	// releases, or gives up (leaves its queues), 200 times.
	var errs atomic.Int64
	var contenders sync.WaitGroup
	run := func(f func(round int) error) {
		contenders.Add(1)
		go func() {
			defer contenders.Done()
			for round := 0; round < 200; round++ {
				if f(round) != nil {
					errs.Add(1)
				}
			}
		}()
	}
	for s, owner := range []string{"S1", "S2"} {
		set := sets[s]
		run(func(round int) error {
			req := fmt.Sprintf("rq%02d%010d", s, round)
			r, err := l.exec(MultiAcquire, set.allKeys(), MultiAcquireArgs{Owner: owner, Request: req, Mode: Take,
				FairWaitMs: multiWaitMs, Join: true, Members: set.specs}.Strings()).AsIntSlice()
			if err != nil {
				return err
			}
			if r[0] == 1 {
				return l.exec(MultiRelease, set.allKeys(), MultiReleaseArgs{Owner: owner, Request: "rl" + req[2:],
					Message: UnlockMessage, Members: set.specs}.Strings()).Error()
			}
			return l.exec(MultiLeave, set.allKeys(), MultiLeaveArgs{Owner: owner, Request: req, Members: set.specs}.Strings()).Error()
		})
	}
	b := g.keys[1]
	run(func(round int) error {
		req := fmt.Sprintf("rqxx%010d", round)
		r, err := FairAcquire.Ints(l.exec(FairAcquire, b.FairAcquire(), FairAcquireArgs{Owner: "X", LeaseMs: "10000",
			Request: req, Mode: Take, FairWaitMs: multiWaitMs, Join: true, ClaimMs: "0"}.Strings()))
		if err != nil {
			return err
		}
		if r[0] == 1 {
			return l.exec(FairRelease, b.FairRelease(), FairReleaseArgs{Owner: "X", Request: "rl" + req[2:]}.Strings()).Error()
		}
		return l.exec(FairLeave, b.FairLeave(), FairLeaveArgs{Owner: "X", Request: req, ClaimMs: "0"}.Strings()).Error()
	})
	contenders.Wait()
	cancel()
	wg.Wait()
	assert.Zero(t, errs.Load(), "calls that failed")
	assert.Zero(t, partial.Load(), "a reader saw a set hold some members and not others")
	assert.Positive(t, whole.Load(), "the reader saw a set hold every member")
	t.Logf("reads with every member held: %d", whole.Load())
}

// The deadlock of a set that queued on every fair member: H holds fair a alone, the set {a, b}
// blocks on a, and H then takes b (nesting in the global order). The set holds no place in b's
// queue, so H takes b at once; when a frees, the set moves its place to b (handing a on to the
// next waiter, here W, granted it), and takes both once H is done.
func TestMultiScripts_nestedHolderNoDeadlock(t *testing.T) {
	l := newLab(t)
	g := newGroup(l, member{"{n}a", true, false, "10000"}, member{"{n}b", true, false, "10000"})
	msgs := l.listen(g.keys[0].Channel, g.keys[1].Channel)

	require.Equal(t, int64(1), g.single(0, "H", "rq0000000000h1")[0])
	a := g.acquire("S", "rq000000000001", Take, true)
	assert.Equal(t, 0, a.Blocked)
	assert.True(t, a.Head)
	assert.Positive(t, a.PTTL)
	require.Equal(t, int64(0), g.single(0, "W", "rq0000000000w1")[0], "W queues on a")
	assert.Equal(t, []string{"S", "W"}, g.queued(0))
	assert.Equal(t, []string{}, g.queued(1))

	r := g.single(1, "H", "rq0000000000h2")
	require.Equal(t, int64(1), r[0], "H takes b at once: the set does not wait there")

	// H releases a: the set (its head) is woken, a left free for it. Its attempt finds b held:
	// it leaves a's queue, handing a on to W (granted), and queues on b.
	assert.Equal(t, int64(0), g.unlock(0, "H", "rl0000000000h1")[0])
	expect(t, msgs, g.keys[0].Channel+" @S")
	a = g.acquire("S", "rq000000000001", Take, true)
	assert.Equal(t, 1, a.Blocked, "b blocks")
	assert.True(t, a.Head)
	expect(t, msgs, g.keys[0].Channel+" @W\x00rq0000000000w1\x000\x003000")
	assert.Equal(t, "rq0000000000w1", l.hash(g.keys[0].Lock)[FieldGrant], "W was granted a")
	assert.Equal(t, []string{}, g.queued(0))
	assert.Equal(t, []string{"S"}, g.queued(1))

	// H releases b: the set is woken; a is W's now, so it moves its place back to a, leaving b
	// free with nobody queued.
	assert.Equal(t, int64(0), g.unlock(1, "H", "rl0000000000h2")[0])
	expect(t, msgs, g.keys[1].Channel+" @S")
	a = g.acquire("S", "rq000000000001", Take, true)
	assert.Equal(t, 0, a.Blocked)
	assert.Equal(t, []string{"S"}, g.queued(0))
	assert.Equal(t, []string{}, g.queued(1))
	assert.Zero(t, l.int("EXISTS", g.keys[1].Lock, g.keys[1].Queue, g.keys[1].Deadlines), "b free, no queue")

	// W releases a: the set takes both.
	assert.Equal(t, int64(0), g.unlock(0, "W", "rl0000000000w1")[0])
	expect(t, msgs, g.keys[0].Channel+" @S")
	require.True(t, g.acquire("S", "rq000000000001", Take, true).Acquired)
	g.release("S", "rl000000000001")
	quiet(t, msgs)
	assert.Equal(t, []string{}, keysBut(l.Keys(), ":fence"))
}

// Sets over overlapping fair members, all given in the group's order (the library's, the same
// for every client), each holding a place only where it is blocked: every set gets its turn.
func TestMultiScripts_fairQueueOrder(t *testing.T) {
	l := newLab(t)
	g := newGroup(l, member{"{q}a", true, false, "10000"}, member{"{q}b", true, false, "10000"},
		member{"{q}c", true, false, "10000"})
	msgs := l.listen(g.keys[0].Channel, g.keys[1].Channel, g.keys[2].Channel)
	ab, bc := g.sub(0, 1), g.sub(1, 2)

	// X holds a, Y holds b. S1 and S2 {a,b} queue on a; S3 {b,c} on b.
	require.Equal(t, int64(1), g.single(0, "X", "rq0000000000x1")[0])
	require.Equal(t, int64(1), g.single(1, "Y", "rq0000000000y1")[0])
	a := ab.acquire("S1", "rq00000000s1r1", Take, true)
	assert.Equal(t, 0, a.Blocked)
	assert.True(t, a.Head, "S1 heads a's queue")
	a = ab.acquire("S2", "rq00000000s2r1", Take, true)
	assert.Equal(t, 0, a.Blocked)
	assert.False(t, a.Head)
	a = bc.acquire("S3", "rq00000000s3r1", Take, true)
	assert.Equal(t, 0, a.Blocked)
	assert.Equal(t, []string{"S1", "S2"}, g.queued(0))
	assert.Equal(t, []string{"S3"}, g.queued(1))
	assert.Equal(t, []string{}, g.queued(2))

	// Refreshes keep the places.
	for i := 0; i < 3; i++ {
		ab.acquire("S2", "rq00000000s2r1", Take, true)
		ab.acquire("S1", "rq00000000s1r1", Take, true)
	}
	assert.Equal(t, []string{"S1", "S2"}, g.queued(0))

	// X releases a: S1 (its head) is only woken. Blocked on b, it moves there (behind S3),
	// handing a on: S2 is woken, and moves to b too.
	assert.Equal(t, int64(0), g.unlock(0, "X", "rl0000000000x1")[0])
	expect(t, msgs, g.keys[0].Channel+" @S1")
	a = ab.acquire("S1", "rq00000000s1r1", Take, true)
	assert.Equal(t, 1, a.Blocked, "b, held by Y")
	assert.False(t, a.Head, "S3 is ahead")
	expect(t, msgs, g.keys[0].Channel+" @S2")
	assert.Equal(t, 1, ab.acquire("S2", "rq00000000s2r1", Take, true).Blocked)
	assert.Equal(t, []string{}, g.queued(0))
	assert.Equal(t, []string{"S3", "S1", "S2"}, g.queued(1))

	// Y releases b: S3, S1, S2 in turn.
	assert.Equal(t, int64(0), g.unlock(1, "Y", "rl0000000000y1")[0])
	expect(t, msgs, g.keys[1].Channel+" @S3")
	assert.Equal(t, 1, ab.acquire("S1", "rq00000000s1r1", Take, true).Blocked, "S3 is ahead")
	require.True(t, bc.acquire("S3", "rq00000000s3r1", Take, true).Acquired)
	bc.release("S3", "rl00000000s3r1")
	expect(t, msgs, g.keys[1].Channel+" @S1")
	require.True(t, ab.acquire("S1", "rq00000000s1r1", Take, true).Acquired)
	assert.Equal(t, 0, ab.acquire("S2", "rq00000000s2r1", Take, true).Blocked, "a, held by S1")
	assert.Equal(t, []string{"S2"}, g.queued(0))
	assert.Equal(t, []string{}, g.queued(1))
	ab.release("S1", "rl00000000s1r1")
	expect(t, msgs, g.keys[0].Channel+" @S2")
	require.True(t, ab.acquire("S2", "rq00000000s2r1", Take, true).Acquired)
	ab.release("S2", "rl00000000s2r1")
	quiet(t, msgs)
	assert.Equal(t, []string{}, keysBut(l.Keys(), ":fence"))
}

// A set that gives up leaves every fair queue of the group; a member left free goes to its
// next live waiter. Leaving twice changes nothing.
func TestMultiScripts_leave(t *testing.T) {
	l := newLab(t)
	g := fourMembers(l)
	msgs := l.listen(g.keys[2].Channel)

	// Y holds c; the set waits at the head of c's queue, W behind it. Y releases: the set is
	// woken, c left free for it.
	require.Equal(t, int64(1), g.single(2, "Y", "rq0000000000y1")[0])
	require.Equal(t, 2, g.acquire("S", "rq000000000001", Take, true).Blocked)
	r := g.single(2, "W", "rq0000000000w1")
	require.Equal(t, int64(0), r[0])
	assert.Equal(t, int64(0), g.unlock(2, "Y", "rl0000000000y1")[0])
	expect(t, msgs, g.keys[2].Channel+" @S")

	// The set gives up: c, free, goes to W with the next token (c has fencing tokens).
	assert.Equal(t, int64(1), g.leave("S", "rq000000000001"), "it was in one queue")
	expect(t, msgs, g.keys[2].Channel+" @W\x00rq0000000000w1\x002\x003000")
	assert.Equal(t, []string{}, g.queued(2))
	assert.Equal(t, int64(0), g.leave("S", "rq000000000001"), "idempotent")
	quiet(t, msgs)
	assert.Equal(t, int64(0), g.unlock(2, "W", "rl0000000000w1")[0])
}

// A member of another kind, or a key of the wrong type, raises with no hold changed; so does
// a bad fencing counter of a member the set would take.
func TestMultiScripts_invalidChangesNothing(t *testing.T) {
	l := newLab(t)
	g := fourMembers(l)

	// d is an RWMutex: the set raises WRONGTYPE, a, b and c stay free and unqueued.
	rw := g.keys[3]
	require.NoError(t, l.exec(RWAcquire, rw.RWAcquire(), RWAcquireArgs{"R", "10000", "R", Take, Write, false, "5000",
		true, false, "3000", ""}.Strings()).Error())
	err := l.exec(MultiAcquire, g.allKeys(), MultiAcquireArgs{"S", "rq000000000001", Take, multiWaitMs, true, "", g.specs}.Strings()).Error()
	assert.ErrorContains(t, err, "WRONGTYPE")
	for i := 0; i < 3; i++ {
		assert.Zero(t, l.int("EXISTS", g.keys[i].Lock, g.keys[i].Queue, g.keys[i].Deadlines), "member %d untouched", i)
	}
	require.NoError(t, l.do("DEL", rw.Lock, rw.Leases).Error())

	// c's counter is bad: raises before anything is written.
	require.NoError(t, l.do("SET", g.keys[2].Fence, "x").Error())
	err = l.exec(MultiAcquire, g.allKeys(), MultiAcquireArgs{"S", "rq000000000002", Take, multiWaitMs, true, "", g.specs}.Strings()).Error()
	assert.ErrorContains(t, err, "fencing counter")
	for i := 0; i < 4; i++ {
		assert.Zero(t, l.int("EXISTS", g.keys[i].Lock, g.keys[i].Queue), "member %d untouched", i)
	}
	require.NoError(t, l.do("DEL", g.keys[2].Fence).Error())

	// Held, then a member's queue key of the wrong type: the release raises with every hold kept.
	require.True(t, g.acquire("S", "rq000000000003", Take, true).Acquired)
	require.NoError(t, l.do("SET", g.keys[2].Queue, "x").Error())
	err = l.exec(MultiRelease, g.allKeys(), MultiReleaseArgs{"S", "rl000000000001", UnlockMessage, g.specs}.Strings()).Error()
	assert.ErrorContains(t, err, "WRONGTYPE")
	assert.Equal(t, []int64{1, 1, 1, 1}, g.counts("S"))
	require.NoError(t, l.do("DEL", g.keys[2].Queue).Error())
	assert.Equal(t, MultiReleased{0, 0, 0, 0, 0, 0, 0, 0}, g.release("S", "rl000000000001"))
}
