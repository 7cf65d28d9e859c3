package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// The floor is the least any wake-then-acquire lock can do to hand a lock over: the release is
// one script that deletes the key and publishes on the lock's channel; a waiter, subscribed to
// the channel, runs SET key value NX PX lease when a message arrives (and every floorPoll as a
// safety net), nothing else. It is no usable lock (no renewal, no fairness, no fencing), and
// it runs only in the contended and ping-pong scenarios, where every other contender's handoff
// is shown as a ratio to it: a design that learns it holds the lock from the release message
// itself (direct handoff) can beat it; one that wakes and then asks cannot.

// floorPoll bounds a waiter's sleep when no message wakes it.
const floorPoll = 500 * time.Millisecond

// floorRelease deletes the key if it is still ours and publishes on the channel (KEYS[2]) with
// PUBLISH, or SPUBLISH when ARGV[2] is "s"; it returns the number of clients the message
// reached (on a cluster: on this node only, for PUBLISH), or -1 when the key was not ours.
var floorRelease = rueidis.NewLuaScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then
redis.call('DEL', KEYS[1])
if ARGV[2] == 's' then return redis.call('SPUBLISH', KEYS[2], '1') end
return redis.call('PUBLISH', KEYS[2], '1')
end
return -1`)

const floorCommon = "not a lock library: the least a wake-then-acquire handoff can do. Lock = SET NX PX 30000; " +
	"if held, wait on the key's channel (one subscription per process, kept open, each message wakes one " +
	"waiter of the process; poll every 500ms) and SET NX again. Release = one script: compare, DEL, %s. " +
	"No barging, by rlock PubSub's client-side rules (no commands): a Lock joins waiters of its process, and " +
	"holds back 2 release round trips (1-10ms) after its process's release woke another process%s. " +
	"Runs in the contended and ping-pong scenarios only"

var floorSpec = contenderSpec{
	ID:   "floor",
	Name: "floor: publish + SET NX",
	Settings: fmt.Sprintf(floorCommon, "PUBLISH (classic pub/sub: SUBSCRIBE; on a cluster the subscription is on any "+
		"node and the message crosses the cluster bus to every node)",
		" (on a cluster, where PUBLISH counts only the subscribers of its own node, after every release)"),
	Waits: true,
	Only:  []string{"contended", "pingpong"},
	New:   newFloor(false),
}

var floorShardedSpec = contenderSpec{
	ID:   "floor-spublish",
	Name: "floor: spublish + SET NX",
	Settings: fmt.Sprintf(floorCommon, "SPUBLISH (sharded pub/sub, Redis 7: SSUBSCRIBE on the master of the key's slot, "+
		"the message stays on that shard)", ""),
	Waits:    true,
	Only:     []string{"contended", "pingpong"},
	MinRedis: 7,
	New:      newFloor(true),
}

func init() { contenders = append(contenders, floorSpec, floorShardedSpec) }

// floor is one process's client: one rueidis client and one subscription per key waited on.
type floor struct {
	client  rueidis.Client
	prefix  string
	sharded bool // SSUBSCRIBE and SPUBLISH rather than SUBSCRIBE and PUBLISH
	// countsAll is false when a release's PUBLISH count may miss subscribers: classic pub/sub
	// on a cluster counts those of the node it ran on only.
	countsAll bool
	ctx       context.Context // ends the subscriptions
	cancel    context.CancelFunc

	mu       sync.Mutex
	subs     map[string]*floorSub
	yielding map[string]time.Time // key -> end of its courtesy window
}

func newFloor(sharded bool) func(cfg contenderConfig) (Contender, error) {
	return func(cfg contenderConfig) (Contender, error) {
		c, err := newRueidis(cfg.Addrs, nil)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		return &floor{client: c, prefix: cfg.KeyPrefix, sharded: sharded, countsAll: sharded || !cfg.Cluster,
			ctx: ctx, cancel: cancel, subs: map[string]*floorSub{}, yielding: map[string]time.Time{}}, nil
	}
}

func (f *floor) Close() {
	f.cancel()
	f.client.Close()
}

func (f *floor) Mutex(key string) Mutex {
	// One hash tag for the key and its channel: the release script declares both, so on a
	// cluster they must share a slot.
	k := "{" + f.prefix + ":" + key + "}"
	return &floorMutex{f: f, key: k, channel: k + ":ch", id: randomID()}
}

// floorSub is a process's subscription to one channel: each message wakes the waiter of this
// process that has waited longest, if any.
type floorSub struct {
	ready chan struct{} // closed once the subscription is confirmed (or gave up)

	mu      sync.Mutex
	waiters []chan struct{}
}

// sub returns the subscription to channel, subscribing (and waiting for the confirmation,
// at most 5s) on first use.
func (f *floor) sub(channel string) *floorSub {
	f.mu.Lock()
	s := f.subs[channel]
	if s == nil {
		s = &floorSub{ready: make(chan struct{})}
		f.subs[channel] = s
		var once sync.Once
		confirmed := func() { once.Do(func() { close(s.ready) }) }
		kind, cmd := "subscribe", f.client.B().Subscribe().Channel(channel).Build()
		if f.sharded {
			kind, cmd = "ssubscribe", f.client.B().Ssubscribe().Channel(channel).Build()
		}
		hook := rueidis.WithOnSubscriptionHook(f.ctx, func(ps rueidis.PubSubSubscription) {
			if ps.Kind == kind {
				confirmed()
			}
		})
		go func() {
			_ = f.client.Receive(hook, cmd, func(rueidis.PubSubMessage) { s.wakeOne() })
			confirmed()
		}()
		go func() {
			select {
			case <-s.ready:
			case <-time.After(5 * time.Second): // the poll covers a subscription that never came
				confirmed()
			}
		}()
	}
	f.mu.Unlock()
	<-s.ready
	return s
}

// wakeOne wakes the longest-waiting waiter.
func (s *floorSub) wakeOne() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.waiters) > 0 {
		permit(s.waiters[0])
		s.waiters = s.waiters[1:]
	}
}

// enqueue adds a waiter at the back, unless it is queued already.
func (s *floorSub) enqueue(w chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range s.waiters {
		if q == w {
			return
		}
	}
	s.waiters = append(s.waiters, w)
}

// leave takes a waiter out of the queue.
func (s *floorSub) leave(w chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, q := range s.waiters {
		if q == w {
			s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
			return
		}
	}
}

// permit posts one wake-up to ch without blocking.
func permit(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

type floorMutex struct {
	f       *floor
	key     string
	channel string
	id      string
	seq     uint64
}

func (m *floorMutex) Lock(ctx context.Context) (Hold, error) {
	m.seq++
	val := m.id + ":" + strconv.FormatUint(m.seq, 10)
	c := m.f.client
	set := func() (bool, error) {
		err := c.Do(ctx, c.B().Set().Key(m.key).Value(val).Nx().PxMilliseconds(baselineLease.Milliseconds()).Build()).Error()
		if rueidis.IsRedisNil(err) {
			return false, nil
		}
		return err == nil, err
	}
	var (
		s *floorSub
		w chan struct{}
	)
	join := func() { // subscribe (once per process and key) and queue up
		if s == nil {
			s, w = m.f.sub(m.channel), make(chan struct{}, 1)
		}
		s.enqueue(w)
	}
	defer func() {
		if s != nil {
			s.leave(w)
		}
	}()
	wait := func(d time.Duration, wake chan struct{}) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	// No barging (rlock PubSub's two rules, which cost no command): a Lock that follows a
	// release by this process that woke other processes holds back for the courtesy window
	// (deaf to messages: its own release's would wake it), so the woken waiter's SET NX is not
	// beaten by the releaser asking again; and a Lock that finds waiters of this process
	// queued joins them.
	if d := m.f.courtesyLeft(m.key); d > 0 {
		if err := wait(d, nil); err != nil {
			return Hold{}, err
		}
	}
	if m.f.queued(m.channel) {
		join()
		if err := wait(floorPoll, w); err != nil {
			return Hold{}, err
		}
	}
	for {
		if s != nil {
			s.enqueue(w) // before the attempt, so a release between the attempt and the wait wakes it
		}
		ok, err := set()
		if err != nil {
			return Hold{}, err
		}
		if ok {
			break
		}
		if s == nil {
			// Subscribed from the first wait on; a release before the subscription was
			// confirmed is caught by the attempt that follows at once.
			join()
			continue
		}
		if err := wait(floorPoll, w); err != nil {
			return Hold{}, err
		}
	}
	return Hold{Release: func(ctx context.Context) error {
		sent := time.Now()
		n, err := floorRelease.Exec(ctx, c, []string{m.key, m.channel}, []string{val, m.f.pubKind()}).AsInt64()
		if err == nil && n < 0 {
			err = errors.New("floor: lock was not held at release")
		}
		if err == nil {
			m.f.courtesy(m.channel, m.key, n, time.Since(sent))
		}
		return err
	}}, nil
}

// queued reports whether waiters of this process are queued on channel.
func (f *floor) queued(channel string) bool {
	f.mu.Lock()
	s := f.subs[channel]
	f.mu.Unlock()
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiters) > 0
}

// pubKind is the release script's ARGV[2]: "s" for SPUBLISH, "c" for PUBLISH.
func (f *floor) pubKind() string {
	if f.sharded {
		return "s"
	}
	return "c"
}

// courtesy opens key's courtesy window after a release whose message reached subscribed
// clients other than this one (after every release when the count may miss some, see
// countsAll): twice the release's round trip, 1ms to 10ms (as rlock's).
func (f *floor) courtesy(channel, key string, reached int64, rtt time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.subs[channel] != nil {
		reached-- // this process's own subscription
	}
	if reached > 0 || !f.countsAll {
		f.yielding[key] = time.Now().Add(min(max(2*rtt, time.Millisecond), 10*time.Millisecond))
	}
}

// courtesyLeft is what remains of key's courtesy window.
func (f *floor) courtesyLeft(key string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	until, ok := f.yielding[key]
	if !ok {
		return 0
	}
	left := time.Until(until)
	if left <= 0 {
		delete(f.yielding, key)
	}
	return left
}
