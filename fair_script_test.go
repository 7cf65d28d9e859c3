package rlock

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fairScripts calls the fair scripts directly with made-up owners and reads the queue state.
type fairScripts struct {
	t    *testing.T
	rc   rueidis.Client
	keys lockKeys
	wait time.Duration // FairWaitTimeout passed to the scripts
	seq  int           // request ids
	// sharded: the scripts publish with SPUBLISH and messages subscribes with SSUBSCRIBE, as
	// on a cluster
	sharded bool
}

// script returns s's variant for f's deployment.
func (f *fairScripts) script(s luaScript) luaVariant {
	if f.sharded {
		return s.sharded
	}
	return s.classic
}

func newFairScripts(t *testing.T) *fairScripts {
	rc := testRueidis(t)
	f := &fairScripts{t: t, rc: rc, keys: newLockKeys("rlscript"+NewOwnerID()[:8], "f"), wait: 5 * time.Second,
		sharded: rc.Mode() == rueidis.ClientModeCluster}
	t.Cleanup(func() {
		rc.Do(context.Background(), rc.B().Del().Key(f.keys.lock, f.keys.queue, f.keys.deadlines, f.keys.fence).Build())
	})
	return f
}

func (f *fairScripts) acquire(owner, mode string) []int64 {
	f.t.Helper()
	f.seq++
	req := "scripttest00" + strconv.Itoa(f.seq) // a fresh request: the first 12 bytes name the client
	r, err := f.script(fairAcquireScript).Exec(context.Background(), f.rc,
		[]string{f.keys.lock, f.keys.queue, f.keys.deadlines, f.keys.fence},
		[]string{owner, "10000", req, "take", "1", strconv.FormatInt(f.wait.Milliseconds(), 10), mode}).AsIntSlice()
	require.NoError(f.t, err)
	return r
}

func (f *fairScripts) release(owner, request string) int64 {
	f.t.Helper()
	r, err := f.script(releaseScript).Exec(context.Background(), f.rc,
		[]string{f.keys.lock, f.keys.channel, f.keys.queue, f.keys.deadlines},
		[]string{owner, request, addressedPrefix, "1"}).AsIntSlice()
	require.NoError(f.t, err)
	return r[0]
}

func (f *fairScripts) leave(owner string) int64 {
	f.t.Helper()
	n, err := f.script(fairLeaveScript).Exec(context.Background(), f.rc,
		[]string{f.keys.lock, f.keys.queue, f.keys.deadlines, f.keys.channel},
		[]string{owner, addressedPrefix}).AsInt64()
	require.NoError(f.t, err)
	return n
}

func (f *fairScripts) queue() []string {
	f.t.Helper()
	q, err := f.rc.Do(context.Background(), f.rc.B().Lrange().Key(f.keys.queue).Start(0).Stop(-1).Build()).AsStrSlice()
	require.NoError(f.t, err)
	return q
}

// deadline returns owner's deadline relative to the server's clock now (0 if it has none).
func (f *fairScripts) deadline(owner string) time.Duration {
	f.t.Helper()
	score, err := f.rc.Do(context.Background(), f.rc.B().Zscore().Key(f.keys.deadlines).Member(owner).Build()).AsFloat64()
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
		sub := f.rc.B().Subscribe().Channel(f.keys.channel).Build()
		if f.sharded {
			sub = f.rc.B().Ssubscribe().Channel(f.keys.channel).Build()
		}
		_ = f.rc.Receive(hook, sub, func(m rueidis.PubSubMessage) { ch <- m.Message })
	}()
	f.t.Cleanup(func() {
		cancel()
		<-done
		unsub := f.rc.B().Unsubscribe().Channel(f.keys.channel).Build()
		if f.sharded {
			unsub = f.rc.B().Sunsubscribe().Channel(f.keys.channel).Build()
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

	// H takes the free lock; nobody queues.
	assert.Equal(t, []int64{1, 1, 1}, f.acquire("H", "wait"), "acquired, hold 1, token 1")
	assert.Empty(t, f.queue())

	// A and B arrive; A heads the queue with a deadline of now + wait.
	r := f.acquire("A", "wait")
	assert.Equal(t, int64(0), r[0])
	assert.InDelta(t, 10000, r[1], 100, "the holder's pttl")
	assert.Equal(t, int64(1), r[2], "A heads the queue")
	r = f.acquire("B", "wait")
	assert.Equal(t, int64(0), r[0], "B waits")
	assert.Equal(t, int64(0), r[2], "B is not at the head")
	assert.Equal(t, []string{"A", "B"}, f.queue())
	assert.InDelta(t, f.wait.Milliseconds(), f.deadline("A").Milliseconds(), 100)

	// A re-polls later: same place, deadline refreshed.
	before := f.deadline("A")
	time.Sleep(30 * time.Millisecond)
	f.acquire("A", "wait")
	assert.Equal(t, []string{"A", "B"}, f.queue())
	assert.Greater(t, f.deadline("A"), before-30*time.Millisecond)

	// A single attempt never joins.
	r = f.acquire("C", "try")
	assert.Equal(t, int64(0), r[0])
	assert.Equal(t, []string{"A", "B"}, f.queue())

	// H re-enters: hold 2, same token, queue untouched.
	assert.Equal(t, []int64{1, 2, 1}, f.acquire("H", "wait"))

	// A partial release publishes nothing; the full release notifies only the head, A.
	assert.Equal(t, int64(1), f.release("H", "r1"))
	assert.Equal(t, int64(1), f.release("H", "r1"), "a repeated request is not counted twice")
	assert.Equal(t, int64(0), f.release("H", "r2"))
	expectMessage(t, msgs, "@A")

	// The lock is free, but B is not the head: B and C (try) cannot take it.
	assert.Equal(t, []int64{0, -2, 0}, f.acquire("B", "wait"))
	assert.Equal(t, []int64{0, -2, 0}, f.acquire("C", "try"))
	assert.Equal(t, []string{"A", "B"}, f.queue())

	// The head takes it: it leaves the queue and its deadline goes.
	assert.Equal(t, []int64{1, 1, 2}, f.acquire("A", "wait"))
	assert.Equal(t, []string{"B"}, f.queue())
	assert.Zero(t, f.deadline("A"))

	// A waiter that stopped polling is purged from the middle of the queue once its deadline
	// passes; the live ones keep their order.
	f.acquire("D", "wait")
	f.acquire("E", "wait")
	require.NoError(t, f.rc.Do(context.Background(), f.rc.B().Zadd().Key(f.keys.deadlines).ScoreMember().ScoreMember(1, "D").Build()).Error())
	f.acquire("E", "wait")
	assert.Equal(t, []string{"B", "E"}, f.queue(), "dead D purged from the middle")

	// B gives up: removed, and since the lock is held nobody is woken.
	assert.Equal(t, int64(1), f.leave("B"))
	assert.Equal(t, int64(0), f.leave("B"), "leaving is idempotent")
	assert.Equal(t, []string{"E"}, f.queue())

	// A releases while the head E is dead: the release purges E and notifies nobody.
	require.NoError(t, f.rc.Do(context.Background(), f.rc.B().Zadd().Key(f.keys.deadlines).ScoreMember().ScoreMember(1, "E").Build()).Error())
	assert.Equal(t, int64(0), f.release("A", "r3"))
	assert.Empty(t, f.queue())
	select {
	case m := <-msgs:
		t.Fatalf("unexpected message %q", m)
	case <-time.After(50 * time.Millisecond):
	}
	n, err := f.rc.Do(context.Background(), f.rc.B().Exists().Key(f.keys.lock, f.keys.queue, f.keys.deadlines).Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "no lock, queue or deadline keys remain")

	// A waiter leaving from the head of a queue behind a free lock wakes the next head.
	assert.Equal(t, []int64{1, 1, 3}, f.acquire("H", "wait"))
	f.acquire("X", "wait")
	f.acquire("Y", "wait")
	require.NoError(t, f.rc.Do(context.Background(), f.rc.B().Del().Key(f.keys.lock).Build()).Error()) // lease ran out
	f.leave("X")
	expectMessage(t, msgs, "@Y")
	f.leave("Y")

	// Queue keys expire on their own after the wait timeout.
	f.wait = 200 * time.Millisecond
	f.acquire("H", "wait")
	f.acquire("Z", "wait")
	ttl, err := f.rc.Do(context.Background(), f.rc.B().Pttl().Key(f.keys.queue).Build()).AsInt64()
	require.NoError(t, err)
	assert.InDelta(t, 200, ttl, 50)
}
