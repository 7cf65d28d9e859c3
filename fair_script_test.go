package rlock

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock/internal/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fairScripts calls the fair scripts directly with made-up owners and reads the queue state.
type fairScripts struct {
	t    *testing.T
	rc   rueidis.Client
	keys wire.Keys
	wait time.Duration // FairWaitTimeout passed to the scripts
	// sharded: the scripts publish with SPUBLISH and messages subscribes with SSUBSCRIBE, as
	// on a cluster
	sharded bool
}

// script returns s's variant for f's deployment.
func (f *fairScripts) script(s wire.Script) wire.Variant { return s.For(f.sharded) }

func newFairScripts(t *testing.T) *fairScripts {
	rc := testRueidis(t)
	f := &fairScripts{t: t, rc: rc, keys: wire.NewKeys("rlscript"+NewOwnerID()[:8], "f"), wait: 5 * time.Second,
		sharded: rc.Mode() == rueidis.ClientModeCluster}
	t.Cleanup(func() {
		rc.Do(context.Background(), rc.B().Del().Key(f.keys.Lock, f.keys.Queue, f.keys.Deadlines, f.keys.Fence).Build())
	})
	return f
}

// claimMs is the claim every waiter of these tests asks for, unless it asks for none.
const claimMs = "3000"

// acquire runs one attempt of owner's call req (its queue entry), asking for claim claim.
func (f *fairScripts) acquire(owner, req, mode string) []int64 {
	f.t.Helper()
	return f.acquireClaim(owner, req, mode, claimMs)
}

func (f *fairScripts) acquireClaim(owner, req, mode, claim string) []int64 {
	f.t.Helper()
	r, err := f.script(wire.FairAcquire).Exec(context.Background(), f.rc,
		[]string{f.keys.Lock, f.keys.Queue, f.keys.Deadlines, f.keys.Fence},
		[]string{owner, "10000", req, "take", "1", strconv.FormatInt(f.wait.Milliseconds(), 10), mode, claim}).AsIntSlice()
	require.NoError(f.t, err)
	return r
}

func (f *fairScripts) release(owner, request string) int64 {
	f.t.Helper()
	r, err := f.script(wire.FairRelease).Exec(context.Background(), f.rc,
		[]string{f.keys.Lock, f.keys.Channel, f.keys.Queue, f.keys.Deadlines, f.keys.Fence},
		[]string{owner, request}).AsIntSlice()
	require.NoError(f.t, err)
	return r[0]
}

// leave removes owner's call req (asking for claim claimMs) from the queue.
func (f *fairScripts) leave(owner, req string) int64 {
	f.t.Helper()
	n, err := f.script(wire.FairLeave).Exec(context.Background(), f.rc,
		[]string{f.keys.Lock, f.keys.Queue, f.keys.Deadlines, f.keys.Channel, f.keys.Fence},
		[]string{owner, req, claimMs, "1"}).AsInt64()
	require.NoError(f.t, err)
	return n
}

// entry is the queue entry of owner's call req.
func entry(owner, req string) string { return owner + "\x00" + req + "\x00" + claimMs + "\x001" }

// queue returns the owners in the queue, in order.
func (f *fairScripts) queue() []string {
	f.t.Helper()
	q, err := f.rc.Do(context.Background(), f.rc.B().Lrange().Key(f.keys.Queue).Start(0).Stop(-1).Build()).AsStrSlice()
	require.NoError(f.t, err)
	owners := []string{}
	for _, e := range q {
		owner, _, _ := strings.Cut(e, "\x00")
		owners = append(owners, owner)
	}
	return owners
}

// deadline returns the deadline of queue entry e relative to the server's clock now (0 if it
// has none).
func (f *fairScripts) deadline(e string) time.Duration {
	f.t.Helper()
	score, err := f.rc.Do(context.Background(), f.rc.B().Zscore().Key(f.keys.Deadlines).Member(e).Build()).AsFloat64()
	if rueidis.IsRedisNil(err) {
		return 0
	}
	require.NoError(f.t, err)
	now, err := f.rc.Do(context.Background(), f.rc.B().Time().Build()).AsStrSlice()
	require.NoError(f.t, err)
	sec, _ := strconv.ParseInt(now[0], 10, 64)
	usec, _ := strconv.ParseInt(now[1], 10, 64)
	return time.Duration(int64(score)-(sec*1000+usec/1000)) * time.Millisecond
}

// messages subscribes to the lock's channel and returns what arrives there.
func (f *fairScripts) messages() <-chan string {
	ch := make(chan string, 16)
	ready := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		hook := rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
			if s.Kind == "subscribe" || s.Kind == "ssubscribe" {
				close(ready)
			}
		})
		sub := f.rc.B().Subscribe().Channel(f.keys.Channel).Build()
		if f.sharded {
			sub = f.rc.B().Ssubscribe().Channel(f.keys.Channel).Build()
		}
		_ = f.rc.Receive(hook, sub, func(m rueidis.PubSubMessage) { ch <- m.Message })
	}()
	f.t.Cleanup(func() {
		cancel()
		<-done
		unsub := f.rc.B().Unsubscribe().Channel(f.keys.Channel).Build()
		if f.sharded {
			unsub = f.rc.B().Sunsubscribe().Channel(f.keys.Channel).Build()
		}
		f.rc.Do(context.Background(), unsub)
	})
	<-ready
	return ch
}

func expectMessage(t *testing.T, ch <-chan string, want string) {
	t.Helper()
	select {
	case got := <-ch:
		assert.Equal(t, want, got)
	case <-time.After(time.Second):
		t.Fatalf("no message %q", want)
	}
}

func TestFairScripts(t *testing.T) {
	f := newFairScripts(t)
	msgs := f.messages()
	pttl := func() int64 {
		n, err := f.rc.Do(context.Background(), f.rc.B().Pttl().Key(f.keys.Lock).Build()).AsInt64()
		require.NoError(t, err)
		return n
	}

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
	expectMessage(t, msgs, "@A\x00scripttest0a1\x002\x00"+claimMs)
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
	expectMessage(t, msgs, "@B\x00scripttest0b1\x003\x00"+claimMs)
	assert.Equal(t, int64(1), f.leave("B", "scripttest0b1"))
	assert.Equal(t, int64(0), f.leave("B", "scripttest0b1"), "leaving is idempotent")
	n, err := f.rc.Do(context.Background(), f.rc.B().Exists().Key(f.keys.Lock, f.keys.Queue, f.keys.Deadlines).Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "no lock, queue or deadline keys remain")

	// A waiter that stopped polling is purged from the middle of the queue once its deadline
	// passes; the live ones keep their order.
	assert.Equal(t, []int64{1, 1, 4}, f.acquire("H", "scripttest0h3", "wait"))
	f.acquire("D", "scripttest0d1", "wait")
	f.acquire("E", "scripttest0e1", "wait")
	f.acquire("G", "scripttest0g1", "wait")
	require.NoError(t, f.rc.Do(context.Background(), f.rc.B().Zadd().Key(f.keys.Deadlines).ScoreMember().ScoreMember(1, entry("E", "scripttest0e1")).Build()).Error())
	f.acquire("G", "scripttest0g1", "wait")
	assert.Equal(t, []string{"D", "G"}, f.queue(), "dead E purged from the middle")

	// D gives up while H holds: removed, nobody granted.
	assert.Equal(t, int64(1), f.leave("D", "scripttest0d1"))
	assert.Equal(t, []string{"G"}, f.queue())

	// H releases while the head G is dead: the release purges G and notifies nobody.
	require.NoError(t, f.rc.Do(context.Background(), f.rc.B().Zadd().Key(f.keys.Deadlines).ScoreMember().ScoreMember(1, entry("G", "scripttest0g1")).Build()).Error())
	assert.Equal(t, int64(0), f.release("H", "r4"))
	assert.Empty(t, f.queue())
	select {
	case m := <-msgs:
		t.Fatalf("unexpected message %q", m)
	case <-time.After(50 * time.Millisecond):
	}
	n, err = f.rc.Do(context.Background(), f.rc.B().Exists().Key(f.keys.Lock, f.keys.Queue, f.keys.Deadlines).Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "no lock, queue or deadline keys remain")

	// A waiter leaving from the head of a queue behind a free lock grants it to the next head.
	assert.Equal(t, []int64{1, 1, 5}, f.acquire("H", "scripttest0h4", "wait"))
	f.acquire("X", "scripttest0x1", "wait")
	f.acquire("Y", "scripttest0y1", "wait")
	require.NoError(t, f.rc.Do(context.Background(), f.rc.B().Del().Key(f.keys.Lock).Build()).Error()) // lease ran out
	f.leave("X", "scripttest0x1")
	expectMessage(t, msgs, "@Y\x00scripttest0y1\x006\x00"+claimMs)
	f.leave("Y", "scripttest0y1")

	// The owner re-entering elsewhere while granted: the grant given back leaves its other hold.
	assert.Equal(t, []int64{1, 1, 7}, f.acquire("H", "scripttest0h5", "wait"))
	f.acquire("K", "scripttest0k1", "wait")
	f.release("H", "r5")
	expectMessage(t, msgs, "@K\x00scripttest0k1\x008\x00"+claimMs)
	assert.Equal(t, []int64{1, 2, 8}, f.acquire("K", "scripttest1k2", "wait"), "K re-enters from another client")
	assert.Equal(t, int64(1), f.leave("K", "scripttest0k1"))
	assert.Equal(t, []int64{1, 2, 8}, f.acquire("K", "scripttest1k2", "wait"), "its hold stays (a replay)")
	assert.Equal(t, int64(0), f.release("K", "r6"))

	// A waiter that asks for no claim is woken, not granted, and takes the lock itself.
	assert.Equal(t, []int64{1, 1, 9}, f.acquire("H", "scripttest0h6", "wait"))
	assert.Equal(t, int64(0), f.acquireClaim("W", "scripttest0w1", "wait", "0")[0])
	assert.Equal(t, int64(0), f.release("H", "r7"))
	expectMessage(t, msgs, "@W")
	assert.Equal(t, []int64{1, 1, 10}, f.acquireClaim("W", "scripttest0w1", "wait", "0"))
	assert.Equal(t, int64(0), f.release("W", "r8"))

	// Queue keys expire on their own after the wait timeout.
	f.wait = 200 * time.Millisecond
	f.acquire("H", "scripttest0h7", "wait")
	f.acquire("Z", "scripttest0z1", "wait")
	ttl, err := f.rc.Do(context.Background(), f.rc.B().Pttl().Key(f.keys.Queue).Build()).AsInt64()
	require.NoError(t, err)
	assert.InDelta(t, 200, ttl, 50)
}

// TestSemScripts_resolveStoresLapsedPermits: an attempt that only resolves a lost request
// drops holds whose lease ended, and must store the permits they gave back, or those permits
// stay out for as long as the semaphore is in use.
func TestSemScripts_resolveStoresLapsedPermits(t *testing.T) {
	f := newFairScripts(t)
	keys := []string{f.keys.Lock, f.keys.Leases, f.keys.Queue, f.keys.Deadlines, f.keys.Channel}
	t.Cleanup(func() { f.rc.Do(context.Background(), f.rc.B().Del().Key(keys...).Build()) })
	acquire := func(id, mode, lease string) []int64 {
		r, err := f.script(wire.SemAcquire).Exec(context.Background(), f.rc, keys,
			[]string{id, lease, id, mode, "2", "1", "5000", "wait", "0"}).AsIntSlice()
		require.NoError(t, err)
		return r
	}
	require.Equal(t, int64(1), acquire("semtestlapse", "take", "50")[0])
	require.Equal(t, int64(1), acquire("semtestkeeps", "take", "10000")[0])
	time.Sleep(80 * time.Millisecond) // the first hold's lease ends
	assert.Equal(t, []int64{0, -2, 0}, acquire("semtestresol", "resolve", "10000"), "never ran")
	used, err := f.rc.Do(context.Background(), f.rc.B().Hget().Key(f.keys.Lock).Field(wire.FieldUsed).Build()).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(1), used, "the lapsed hold's permit came back")
	assert.Equal(t, int64(1), acquire("semtestthird", "take", "10000")[0], "so a new hold fits")
}
