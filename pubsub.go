package rlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// subs is a shard's subscriptions: this client's one subscription per lock channel, shared by
// all local waiters of that lock and reference-counted; each runs on rueidis' multiplexed
// pub/sub, so it costs no connection of its own. Its fields, and each subscription's refs and
// holderEnd, are guarded by mu, the shard's mutex.
type subTable struct {
	mu       *sync.Mutex
	c        *core
	m        map[string]*subscription // live subscriptions by channel
	retiring map[string]chan struct{} // channel -> closed when its old subscription is gone
	arrivals arrivals                 // fair waiters that may miss a wake-up (see arrivals)
	idle     *idleSubs                // the client's kept subscriptions (see linger.go)
}

// subscribe returns the shared subscription to channel with one more reference, starting it if
// this is the first and none is kept (see linger.go). A kept one's wake-up that came before
// since (when the caller's last attempt was sent; zero: unknown) is dropped: that attempt saw
// the lock after it. It returns nil once the client is closed.
func (t *subTable) subscribe(channel string, since time.Time) *subscription {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.c.closed.Load() {
		return nil
	}
	if s := t.m[channel]; s != nil && s.refs == 0 && s.confirms.Load() > 1 {
		// Kept, but its connection broke meanwhile: rueidis subscribes again by itself, later
		// and later after each break, so a fresh subscription serves a new waiter sooner.
		t.unkeep(s)
		t.retire(s) // (removes it from t.m)
	} else if s != nil {
		if s.refs == 0 {
			t.reuse(s)
			s.dropStale(since)
		}
		s.refs++
		return s
	}
	s := &subscription{channel: channel, shardMu: t.mu, arrivals: &t.arrivals, refs: 1,
		wake: make(chan struct{}, 1), done: make(chan struct{}), born: time.Now()}
	// Not derived from the client's context: a child of a cancellable context is registered
	// under that context's mutex, one for the whole client. Close cancels it (see cancelAll).
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if t.m == nil {
		t.m = make(map[string]*subscription)
	}
	t.m[channel] = s
	prev := t.retiring[channel]
	t.c.wg.Add(1)
	go t.run(s, prev)
	return s
}

// unsubscribe drops one reference to s; after the last one the subscription is kept for a
// while (see linger.go), or ends. A waiter leaving without the lock hands a permit on, in case
// it had taken the one meant for the next waiter.
func (t *subTable) unsubscribe(s *subscription, handOn bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s.refs--; s.refs > 0 {
		if handOn {
			permit(s.wake)
		}
		return
	}
	if !t.keep(s) {
		t.retire(s)
	}
}

// retire ends s, which has no waiters: a new subscription to its channel starts once it is
// gone. Called with t.mu held.
func (t *subTable) retire(s *subscription) {
	if t.m[s.channel] == s {
		delete(t.m, s.channel)
	}
	if t.retiring == nil {
		t.retiring = make(map[string]chan struct{})
	}
	t.retiring[s.channel] = s.done
	s.cancel()
}

// cancelAll ends every subscription: the client is closing, and their waiters see it end and
// let go of them. Called with t.mu held.
func (t *subTable) cancelAll() {
	for _, s := range t.m {
		t.unkeep(s)
		s.cancel()
	}
}

// waiting reports whether this client has waiters on channel, and the holder's lease bound
// as the last of them saw it (see subscription.noteHolder). Called with t.mu held.
func (t *subTable) waiting(channel string) (bool, time.Time) {
	s := t.m[channel]
	if s == nil || s.refs == 0 {
		return false, time.Time{}
	}
	return true, s.holderEnd
}

// subscribed reports whether this client has a subscription to channel, waiters or none (see
// linger.go): a message on channel reaches it. Called with t.mu held.
func (t *subTable) subscribed(channel string) bool { return t.m[channel] != nil }

// arrive counts (delta 1) or uncounts (-1) a fair waiter of this client for owner on channel
// that may miss an addressed wake-up (see arrivals).
func (t *subTable) arrive(channel, owner string, delta int) {
	t.mu.Lock()
	gone := t.arrivals.add(channel, owner, delta)
	s := t.m[channel]
	t.mu.Unlock()
	if gone && s != nil {
		s.forget(owner)
	}
}

// peekReaders returns channel's live subscription, if any, and its readers channel, without
// taking a reference (see waiter.queue).
func (t *subTable) peekReaders(channel string) (*subscription, chan struct{}) {
	t.mu.Lock()
	s := t.m[channel]
	t.mu.Unlock()
	if s == nil {
		return nil, nil
	}
	return s, s.readers()
}

// run keeps s subscribed until its context ends, re-subscribing after connection
// failures, then unsubscribes on the server. It starts only after the previous subscription to
// the same channel has unsubscribed, whose confirmation would otherwise cancel this one.
func (t *subTable) run(s *subscription, prev <-chan struct{}) {
	c := t.c
	defer c.wg.Done()
	defer func() {
		t.mu.Lock()
		if t.retiring[s.channel] == s.done {
			delete(t.retiring, s.channel)
		}
		t.mu.Unlock()
		close(s.done)
	}()
	if prev != nil {
		select {
		case <-prev:
		case <-s.ctx.Done():
			return
		}
	}
	hookCtx := rueidis.WithOnSubscriptionHook(s.ctx, func(ps rueidis.PubSubSubscription) {
		if ps.Kind == "subscribe" || ps.Kind == "ssubscribe" {
			s.confirmed()
		}
	})
	// On a cluster the channel is a sharded one: SSUBSCRIBE carries the lock's slot, so rueidis
	// sends it (and SUNSUBSCRIBE) to the node that owns the lock, where SPUBLISH delivers.
	// (rueidis recycles a command once it completes: each call gets a new one.)
	subscribe := func() rueidis.Completed {
		if c.sharded {
			return c.rc.B().Ssubscribe().Channel(s.channel).Build()
		}
		return c.rc.B().Subscribe().Channel(s.channel).Build()
	}
	// Ending Receive only drops rueidis' local handler; the server keeps the subscription
	// until told otherwise. It is told on the very connection that subscribed (the hook runs
	// as Receive returns), since after a failover or a slot migration the lock's slot may map
	// to another node than the one that holds the subscription. The command is pinned (never
	// recycled by rueidis): rueidis may complete an UNSUBSCRIBE from another unsubscribe
	// notification while its pipe is still writing it, and recycling it then is a data race
	// (seen under -race with connection kills).
	unsubscribe := func(b rueidis.Builder) rueidis.Completed {
		if c.sharded {
			return b.Sunsubscribe().Channel(s.channel).Build().Pin()
		}
		return b.Unsubscribe().Channel(s.channel).Build().Pin()
	}
	unsubscribed := false
	hookCtx = rueidis.WithOnReceiveReturnHook(hookCtx, func(err error, cc rueidis.CommandClient) error {
		if s.ctx.Err() == nil {
			return err // not ending: subscribe again below
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		uerr := cc.Do(ctx, unsubscribe(cc.B())).Error()
		if re, ok := rueidis.IsRedisErr(uerr); ok && c.sharded {
			if _, moved := re.IsMoved(); moved {
				// Redis 8 refuses SUNSUBSCRIBE of a channel whose slot the node does not own
				// with a MOVED, even on the connection subscribed to it there: a replica takes
				// an SSUBSCRIBE (e.g. sent by a stale slot map just after a failover) but lets
				// it go only in READONLY mode (Redis 7.0 and Valkey 8 do not ask). READWRITE
				// puts the connection back; the three go out together in one pipeline.
				res := cc.DoMulti(ctx, cc.B().Readonly().Build(), unsubscribe(cc.B()), cc.B().Readwrite().Build())
				uerr = res[1].Error()
			}
		}
		unsubscribed = uerr == nil
		return err
	})
	backoff := 10 * time.Millisecond
	for s.ctx.Err() == nil {
		err := c.rc.Receive(hookCtx, subscribe(), func(msg rueidis.PubSubMessage) { s.deliver(msg.Message) })
		if s.ctx.Err() != nil {
			break
		}
		if errors.Is(err, rueidis.ErrClosing) {
			// The rueidis client is closed; waiters fall back to polling at the lease bound.
			c.opts.Logger.Warn("rlock: subscription ended: rueidis client closed", "channel", s.channel)
			return
		}
		// The connection broke (or the server refused): messages may be lost meanwhile, which
		// the waiters' lease-bounded sleeps cover. Subscribe again.
		c.opts.Logger.Debug("rlock: subscription interrupted; resubscribing", "channel", s.channel, "error", err)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
		}
		backoff = min(2*backoff, time.Second)
	}
	if unsubscribed {
		return
	}
	// The hook did not get through (Receive ended without a connection, or the client
	// closed): ask through the client, in case a connection still holds the subscription.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := c.rc.Do(ctx, unsubscribe(c.rc.B())).Error(); err != nil {
		c.opts.Logger.Debug("rlock: unsubscribe failed", "channel", s.channel, "error", err)
	}
}
