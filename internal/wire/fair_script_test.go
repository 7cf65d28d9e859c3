package wire

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The queues' scripts run directly: the fair Mutex's (fair_acquire.lua, fair_release.lua,
// fair_leave.lua) with made-up owners, and a Semaphore's resolving attempt.

// fairLab runs the fair Mutex scripts on the lock "f" of a lab.
type fairLab struct {
	*lab
	k    Keys
	wait time.Duration // FairWaitTimeout passed to the scripts
}

func newFairLab(t *testing.T) *fairLab {
	l := newLab(t)
	f := &fairLab{lab: l, k: l.keys("f"), wait: 5 * time.Second}
	t.Cleanup(func() { l.do("DEL", f.k.Lock, f.k.Queue, f.k.Deadlines, f.k.Fence) })
	return f
}

// claimMs is the claim every waiter of these tests asks for, unless it asks for none.
const claimMs = "3000"

// acquire runs one attempt of owner's call req (its queue entry), asking for claim claimMs; mode
// is "wait" (join the queue) or "try".
func (f *fairLab) acquire(owner, req, mode string) []int64 {
	f.t.Helper()
	return f.acquireClaim(owner, req, mode, claimMs)
}

func (f *fairLab) acquireClaim(owner, req, mode, claim string) []int64 {
	f.t.Helper()
	return f.ints(FairAcquire, f.k.FairAcquire(), FairAcquireArgs{Owner: owner, LeaseMs: "10000", Request: req,
		Mode: Take, Fencing: true, FairWaitMs: strconv.FormatInt(f.wait.Milliseconds(), 10), Join: mode == "wait",
		ClaimMs: claim}.Strings())
}

func (f *fairLab) release(owner, request string) int64 {
	f.t.Helper()
	return f.ints(FairRelease, f.k.FairRelease(), FairReleaseArgs{Owner: owner, Request: request}.Strings())[0]
}

// leave removes owner's call req (asking for claim claimMs) from the queue.
func (f *fairLab) leave(owner, req string) int64 {
	f.t.Helper()
	n, err := f.exec(FairLeave, f.k.FairLeave(), FairLeaveArgs{Owner: owner, Request: req, ClaimMs: claimMs,
		Fencing: true}.Strings()).AsInt64()
	require.NoError(f.t, err)
	return n
}

// entry is the queue entry of owner's call req.
func entry(owner, req string) string { return owner + "\x00" + req + "\x00" + claimMs + "\x001" }

// queue returns the owners in the queue, in order.
func (f *fairLab) queue() []string {
	f.t.Helper()
	owners := []string{}
	for _, e := range f.list(f.k.Queue) {
		owner, _, _ := strings.Cut(e, "\x00")
		owners = append(owners, owner)
	}
	return owners
}

// deadline returns the deadline of queue entry e relative to the server's clock now (0 if it
// has none).
func (f *fairLab) deadline(e string) time.Duration {
	f.t.Helper()
	score := f.str("ZSCORE", f.k.Deadlines, e)
	if score == "" {
		return 0
	}
	ms, err := strconv.ParseFloat(score, 64)
	require.NoError(f.t, err)
	return time.Duration(int64(ms)-f.serverMs()) * time.Millisecond
}

// expectMessage fails unless the next message on the lock's channel (see lab.listen) is want.
func (f *fairLab) expectMessage(msgs <-chan string, want string) {
	f.t.Helper()
	expect(f.t, msgs, f.k.Channel+" "+want)
}

// TestFairScripts walks one fair Mutex through its scripts: joining, refreshing and leaving the
// queue, re-entry, releases that grant the head the lock (direct handoff) or wake it (no
// claim), purges of waiters that stopped polling, and the queue keys' expiry.
func TestFairScripts(t *testing.T) {
	f := newFairLab(t)
	msgs := f.listen(f.k.Channel)
	pttl := func() int64 { return f.int("PTTL", f.k.Lock) }

	// H takes the free lock; nobody queues.
	assert.Equal(t, []int64{1, 1, 1}, f.acquire("H", "scripttest0h1", "wait"), "acquired, hold 1, token 1")
	assert.Empty(t, f.queue())

	// A and B arrive; A heads the queue with a deadline of now + wait.
	r := f.acquire("A", "scripttest0a1", "wait")
	assert.Equal(t, int64(0), r[0])
	assert.InDelta(t, 10000, r[1], 100, "the holder's pttl")
	assert.Equal(t, int64(1), r[2], "A heads the queue")
	r = f.acquire("B", "scripttest0b1", "wait")
	assert.Equal(t, int64(0), r[0], "B waits")
	assert.Equal(t, int64(0), r[2], "B is not at the head")
	assert.Equal(t, []string{"A", "B"}, f.queue())
	assert.InDelta(t, f.wait.Milliseconds(), f.deadline(entry("A", "scripttest0a1")).Milliseconds(), 100)

	// A re-polls later: same place, deadline refreshed.
	before := f.deadline(entry("A", "scripttest0a1"))
	time.Sleep(30 * time.Millisecond)
	f.acquire("A", "scripttest0a1", "wait")
	assert.Equal(t, []string{"A", "B"}, f.queue())
	assert.Greater(t, f.deadline(entry("A", "scripttest0a1")), before-30*time.Millisecond)

	// A single attempt never joins.
	r = f.acquire("C", "scripttest0c1", "try")
	assert.Equal(t, int64(0), r[0])
	assert.Equal(t, []string{"A", "B"}, f.queue())

	// H re-enters: hold 2, same token, queue untouched.
	assert.Equal(t, []int64{1, 2, 1}, f.acquire("H", "scripttest0h2", "wait"))

	// A partial release publishes nothing; the full release grants the lock to the head, A,
	// with the next token and a lease of A's claim, and tells A so.
	assert.Equal(t, int64(1), f.release("H", "r1"))
	assert.Equal(t, int64(1), f.release("H", "r1"), "a repeated request is not counted twice")
	assert.Equal(t, int64(0), f.release("H", "r2"))
	f.expectMessage(msgs, "@A\x00scripttest0a1\x002\x00"+claimMs)
	assert.InDelta(t, 3000, pttl(), 100, "the grant's lease is A's claim")
	assert.Equal(t, []string{"B"}, f.queue())

	// B and C (try) cannot take it; A's call finds its grant, lease unchanged.
	assert.Equal(t, int64(0), f.acquire("B", "scripttest0b1", "wait")[0])
	assert.Equal(t, int64(0), f.acquire("C", "scripttest0c1", "try")[0])
	r = f.acquire("A", "scripttest0a1", "wait")
	require.Len(t, r, 4)
	assert.Equal(t, []int64{1, 1, 2}, r[:3], "A's grant: hold 1, token 2")
	assert.InDelta(t, 3000, r[3], 100, "with what is left of the claim")
	assert.Equal(t, []string{"B"}, f.queue())

	// A releases: B is granted the lock, and gives it back by leaving (cancelled as the grant
	// came): the lock is free and gone, as nobody else waits. Leaving again does nothing.
	assert.Equal(t, int64(0), f.release("A", "r3"))
	f.expectMessage(msgs, "@B\x00scripttest0b1\x003\x00"+claimMs)
	assert.Equal(t, int64(1), f.leave("B", "scripttest0b1"))
	assert.Equal(t, int64(0), f.leave("B", "scripttest0b1"), "leaving is idempotent")
	assert.Zero(t, f.int("EXISTS", f.k.Lock, f.k.Queue, f.k.Deadlines), "no lock, queue or deadline keys remain")

	// A waiter that stopped polling is purged from the middle of the queue once its deadline
	// passes; the live ones keep their order.
	assert.Equal(t, []int64{1, 1, 4}, f.acquire("H", "scripttest0h3", "wait"))
	f.acquire("D", "scripttest0d1", "wait")
	f.acquire("E", "scripttest0e1", "wait")
	f.acquire("G", "scripttest0g1", "wait")
	require.NoError(t, f.do("ZADD", f.k.Deadlines, "1", entry("E", "scripttest0e1")).Error())
	f.acquire("G", "scripttest0g1", "wait")
	assert.Equal(t, []string{"D", "G"}, f.queue(), "dead E purged from the middle")

	// D gives up while H holds: removed, nobody granted.
	assert.Equal(t, int64(1), f.leave("D", "scripttest0d1"))
	assert.Equal(t, []string{"G"}, f.queue())

	// H releases while the head G is dead: the release purges G and notifies nobody.
	require.NoError(t, f.do("ZADD", f.k.Deadlines, "1", entry("G", "scripttest0g1")).Error())
	assert.Equal(t, int64(0), f.release("H", "r4"))
	assert.Empty(t, f.queue())
	quiet(t, msgs)
	assert.Zero(t, f.int("EXISTS", f.k.Lock, f.k.Queue, f.k.Deadlines), "no lock, queue or deadline keys remain")

	// A waiter leaving from the head of a queue behind a free lock grants it to the next head.
	assert.Equal(t, []int64{1, 1, 5}, f.acquire("H", "scripttest0h4", "wait"))
	f.acquire("X", "scripttest0x1", "wait")
	f.acquire("Y", "scripttest0y1", "wait")
	require.NoError(t, f.do("DEL", f.k.Lock).Error()) // lease ran out
	f.leave("X", "scripttest0x1")
	f.expectMessage(msgs, "@Y\x00scripttest0y1\x006\x00"+claimMs)
	f.leave("Y", "scripttest0y1")

	// The owner re-entering elsewhere while granted: the grant given back leaves its other hold.
	assert.Equal(t, []int64{1, 1, 7}, f.acquire("H", "scripttest0h5", "wait"))
	f.acquire("K", "scripttest0k1", "wait")
	f.release("H", "r5")
	f.expectMessage(msgs, "@K\x00scripttest0k1\x008\x00"+claimMs)
	assert.Equal(t, []int64{1, 2, 8}, f.acquire("K", "scripttest1k2", "wait"), "K re-enters from another client")
	assert.Equal(t, int64(1), f.leave("K", "scripttest0k1"))
	assert.Equal(t, []int64{1, 2, 8}, f.acquire("K", "scripttest1k2", "wait"), "its hold stays (a replay)")
	assert.Equal(t, int64(0), f.release("K", "r6"))

	// A waiter that asks for no claim is woken, not granted, and takes the lock itself.
	assert.Equal(t, []int64{1, 1, 9}, f.acquire("H", "scripttest0h6", "wait"))
	assert.Equal(t, int64(0), f.acquireClaim("W", "scripttest0w1", "wait", "0")[0])
	assert.Equal(t, int64(0), f.release("H", "r7"))
	f.expectMessage(msgs, "@W")
	assert.Equal(t, []int64{1, 1, 10}, f.acquireClaim("W", "scripttest0w1", "wait", "0"))
	assert.Equal(t, int64(0), f.release("W", "r8"))

	// Queue keys expire on their own after the wait timeout.
	f.wait = 200 * time.Millisecond
	f.acquire("H", "scripttest0h7", "wait")
	f.acquire("Z", "scripttest0z1", "wait")
	assert.InDelta(t, 200, f.int("PTTL", f.k.Queue), 50)
}

// TestFairScripts_look: a waiter's look after it subscribed (mode Look) writes nothing when the
// lock is held by another owner and tells its pttl and whether the waiter heads the queue; says
// pttl -2 (a full attempt could succeed, or must join again) for a free lock, one the owner
// holds, or a caller without a place; and finds a grant made for its request, as a full
// attempt would.
func TestFairScripts_look(t *testing.T) {
	f := newFairLab(t)
	look := func(owner, req string) []int64 {
		t.Helper()
		return f.ints(FairAcquire, f.k.FairAcquire(), FairAcquireArgs{Owner: owner, LeaseMs: "10000", Request: req,
			Mode: Look, Fencing: true, FairWaitMs: strconv.FormatInt(f.wait.Milliseconds(), 10), Join: true,
			ClaimMs: claimMs}.Strings())
	}
	state := func() []string {
		t.Helper()
		out := []string{}
		for _, k := range []string{f.k.Lock, f.k.Queue, f.k.Deadlines, f.k.Fence} {
			out = append(out, f.str("DUMP", k), strconv.FormatInt(f.int("PEXPIRETIME", k), 10))
		}
		return out
	}

	assert.Equal(t, []int64{0, -2, 0}, look("A", "scripttest0a1"), "free: a full attempt could succeed")
	assert.Zero(t, f.int("EXISTS", f.k.Lock, f.k.Queue, f.k.Deadlines, f.k.Fence), "a look takes nothing")

	assert.Equal(t, []int64{1, 1, 1}, f.acquire("H", "scripttest0h1", "wait"))
	assert.Equal(t, int64(0), f.acquire("A", "scripttest0a1", "wait")[0])
	assert.Equal(t, int64(0), f.acquire("B", "scripttest0b1", "wait")[0])
	before := state()
	r := look("A", "scripttest0a1")
	assert.Equal(t, int64(0), r[0])
	assert.InDelta(t, 10000, r[1], 200, "the holder's pttl")
	assert.Equal(t, []int64{1, 0}, r[2:], "A heads the queue, and joined nothing")
	r = look("B", "scripttest0b1")
	assert.Equal(t, []int64{0, 0}, []int64{r[0], r[2]}, "B waits behind A")
	assert.Equal(t, before, state(), "looks write nothing")
	assert.Equal(t, []int64{0, -2, 0}, look("H", "scripttest0h9"), "the owner holds it: a full attempt re-enters")
	assert.Equal(t, before, state())
	assert.Equal(t, []int64{0, -2, 0}, look("C", "scripttest0c1"),
		"no place (a grant for it may have come and gone): a full attempt joins again")
	assert.Equal(t, before, state())

	// The release grants the lock to A; A's look finds the grant as its attempt would.
	assert.Equal(t, int64(0), f.release("H", "r1"))
	r = look("A", "scripttest0a1")
	require.Len(t, r, 4)
	assert.Equal(t, []int64{1, 1, 2}, r[:3], "A's grant: hold 1, token 2")
	assert.InDelta(t, 3000, r[3], 100, "with what is left of the claim")
	assert.Equal(t, []string{"B"}, f.queue())
	assert.Equal(t, int64(0), f.release("A", "r2"))
	assert.Equal(t, int64(1), f.leave("B", "scripttest0b1"))
}

// TestSemScripts_look: a Semaphore waiter's look after it subscribed (mode Look) writes nothing
// while the permits are out and its place is there, telling the first lease's end and whether
// it heads the queue; says pttl -2 when a full attempt could take permits (free, or a lease
// ended) or must join again (no place); and finds a hold granted to it, as a full attempt
// would.
func TestSemScripts_look(t *testing.T) {
	l := newLab(t)
	k := l.keys("semlook")
	t.Cleanup(func() { l.do(append([]string{"DEL"}, k.Sem()...)...) })
	args := func(id, lease string, mode Mode) []string {
		return SemAcquireArgs{Hold: id, LeaseMs: lease, Request: id, Mode: mode, Permits: "1", N: "1", FairWaitMs: "5000",
			Join: true, ClaimMs: claimMs}.Strings()
	}
	look := func(id string) []int64 { t.Helper(); return l.ints(SemAcquire, k.Sem(), args(id, "10000", Look)) }
	take := func(id, lease string) []int64 { t.Helper(); return l.ints(SemAcquire, k.Sem(), args(id, lease, Take)) }
	state := func() []string {
		t.Helper()
		out := []string{}
		for _, key := range k.Sem()[:4] {
			out = append(out, l.str("DUMP", key), strconv.FormatInt(l.int("PEXPIRETIME", key), 10))
		}
		return out
	}

	assert.Equal(t, []int64{0, -2, 0}, look("A"), "free: a full attempt could succeed")
	assert.Zero(t, l.int(append([]string{"EXISTS"}, k.Sem()[:4]...)...), "a look takes nothing")

	// X holds the permit alone (its lease the hash's expiry); A, not queued, has no place.
	require.Equal(t, int64(1), take("X", "10000")[0])
	before := state()
	assert.Equal(t, []int64{0, -2, 0}, look("A"), "no place: a full attempt joins")
	assert.Equal(t, before, state(), "a look writes nothing")
	require.Equal(t, int64(0), take("A", "10000")[0])
	require.Equal(t, int64(0), take("B", "10000")[0])
	before = state()
	r := look("A")
	assert.InDelta(t, 10000, r[1], 200, "X's lease, read from the leases")
	assert.Equal(t, []int64{0, 1, 0}, []int64{r[0], r[2], r[3]}, "A heads the queue")
	assert.Equal(t, []int64{0, 0}, []int64{look("B")[0], look("B")[2]}, "B is behind A")
	assert.Equal(t, []int64{0, -2, 0}, look("C"), "no place: a full attempt joins again")
	assert.Equal(t, before, state(), "looks write nothing")

	// X's release grants the permit to A; A's look finds its hold as a take would.
	require.Equal(t, int64(0), l.ints(SemRelease, k.Sem(), SemReleaseArgs{Hold: "X"}.Strings())[0])
	r = look("A")
	require.Len(t, r, 4)
	assert.Equal(t, []int64{1, 1, 0}, r[:3], "A holds the granted permit")

	// A's lease ends (its end set in the past): B's look says a take could succeed.
	require.NoError(t, l.do("ZADD", k.Leases, "1", "A").Error())
	assert.Equal(t, []int64{0, -2, 0}, look("B"), "a lease ended: a take gives its permit back")
	assert.Equal(t, int64(1), take("B", "10000")[0], "and B takes it")
	require.Equal(t, int64(0), l.ints(SemRelease, k.Sem(), SemReleaseArgs{Hold: "B"}.Strings())[0])
	assert.Zero(t, l.int(append([]string{"EXISTS"}, k.Sem()[:4]...)...), "nothing left")
}

// TestSemScripts_resolveStoresLapsedPermits: an attempt that only resolves a lost request
// drops holds whose lease ended, and must store the permits they gave back, or those permits
// stay out for as long as the semaphore is in use.
func TestSemScripts_resolveStoresLapsedPermits(t *testing.T) {
	l := newLab(t)
	k := l.keys("s")
	t.Cleanup(func() { l.do(append([]string{"DEL"}, k.Sem()...)...) })
	acquire := func(id string, mode Mode, lease string) []int64 {
		return l.ints(SemAcquire, k.Sem(), SemAcquireArgs{Hold: id, LeaseMs: lease, Request: id, Mode: mode,
			Permits: "2", N: "1", FairWaitMs: "5000", Join: true, ClaimMs: "0"}.Strings())
	}
	require.Equal(t, int64(1), acquire("semtestlapse", Take, "50")[0])
	require.Equal(t, int64(1), acquire("semtestkeeps", Take, "10000")[0])
	time.Sleep(80 * time.Millisecond) // the first hold's lease ends
	assert.Equal(t, []int64{0, -2, 0}, acquire("semtestresol", Resolve, "10000"), "never ran")
	assert.Equal(t, int64(1), l.int("HGET", k.Lock, FieldUsed), "the lapsed hold's permit came back")
	assert.Equal(t, int64(1), acquire("semtestthird", Take, "10000")[0], "so a new hold fits")
}
