package rlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock/internal/wire"
)

// subscription is this client's one subscription to a lock channel, shared by all local
// waiters of that lock and reference-counted under the mutex of the lock's shard. It runs on
// rueidis' multiplexed pub/sub, so it costs no connection of its own.
type subscription struct {
	c         *Client
	sh        *shard // the lock's shard, where the subscription is recorded
	channel   string
	refs      int       // guarded by sh.mu
	holderEnd time.Time // the holder's lease bound as a waiter last saw it; guarded by sh.mu

	// wake is the per-name waiter semaphore: an unlock message, or a (re)confirmed
	// subscription after which messages may have been missed, leaves one permit, and one
	// waiter takes it. Extra permits are dropped; a spare one only causes one more attempt.
	wake chan struct{}

	mu sync.Mutex
	// all is closed (and replaced) by a readers message or a (re)confirmation: it wakes every
	// waiting reader (see readers).
	all chan struct{}
	// addressed maps an address to its waiters (queued waiters; calls of one owner share it).
	addressed map[string][]*addressee
	// unclaimed remembers addressed messages (their grants, "" for none), and confirmations,
	// for queued waiters of this client that are between their first attempt and their
	// registration (see shard.arrive).
	unclaimed map[string]string

	ctx    context.Context // cancelled when the last waiter leaves or the client closes
	cancel context.CancelFunc
	done   chan struct{} // closed once unsubscribed and the goroutine exited
}

// addressee is a queued waiter that messages address: its wake-up, and the last grant that
// came for it (guarded by subscription.mu).
type addressee struct {
	wake  chan struct{}
	grant string
}

// grant returns and forgets the last grant that came for a, or "".
func (s *subscription) grant(a *addressee) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := a.grant
	a.grant = ""
	return g
}

// permit posts one wake-up to ch without blocking.
func permit(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// deliver handles a message on the channel (see wire.ParseMessage). It runs on rueidis'
// reader and must not block.
func (s *subscription) deliver(msg string) {
	kind, addr, grant := wire.ParseMessage(msg)
	if kind != wire.WakeAddressed {
		if kind == wire.WakeReaders {
			s.wakeReaders()
		}
		permit(s.wake)
		return
	}
	if s.tell(addr, grant) || !s.sh.arriving(s.channel, addr) {
		return
	}
	s.mu.Lock()
	if len(s.addressed[addr]) == 0 {
		if s.unclaimed == nil {
			s.unclaimed = make(map[string]string)
		}
		s.unclaimed[addr] = grant
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.tell(addr, grant)
}

// tell wakes every waiter at addr (each checks whether a grant is its own), leaving them
// grant if it is not "", and reports whether there was one.
func (s *subscription) tell(addr, grant string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	as := s.addressed[addr]
	for _, a := range as {
		if grant != "" {
			a.grant = grant
		}
		permit(a.wake)
	}
	return len(as) > 0
}

// arrive counts (delta 1) or uncounts (-1) a fair waiter of this client for owner on channel
// that may miss an addressed wake-up: from before its first attempt until it leaves. Messages
// for owners that are not arriving here are for other clients, and are dropped. sh is the
// shard of the channel's lock.
func (sh *shard) arrive(channel, owner string, delta int) {
	k := holdKey{channel, owner}
	sh.mu.Lock()
	if sh.arrivals == nil {
		sh.arrivals = make(map[holdKey]int)
	}
	sh.arrivals[k] += delta
	gone := sh.arrivals[k] <= 0
	if gone {
		delete(sh.arrivals, k)
	}
	s := sh.subs[channel]
	sh.mu.Unlock()
	if gone && s != nil {
		s.mu.Lock()
		delete(s.unclaimed, owner)
		s.mu.Unlock()
	}
}

// arrivingOn returns the addresses of the fair waiters arriving on channel (see arrive).
func (sh *shard) arrivingOn(channel string) []string {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var addrs []string
	for k := range sh.arrivals {
		if k.key == channel {
			addrs = append(addrs, k.owner)
		}
	}
	return addrs
}

// arriving reports whether a fair waiter for owner on channel is arriving (see arrive).
func (sh *shard) arriving(channel, owner string) bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.arrivals[holdKey{channel, owner}] > 0
}

// confirmed runs when Redis confirms the subscription: an unlock published before that was
// missed, so one waiter (each addressed one, for fair waiters) must try again. So must a queued
// waiter that is arriving but not registered yet (its first attempt's reply is on its way): a
// grant made for it before the subscription was missed too, so it is left a wake-up that its
// registration takes (see address).
func (s *subscription) confirmed() {
	permit(s.wake)
	s.wakeReaders()
	arriving := s.sh.arrivingOn(s.channel)
	s.mu.Lock()
	for _, as := range s.addressed {
		for _, a := range as {
			permit(a.wake)
		}
	}
	for _, addr := range arriving {
		if _, ok := s.unclaimed[addr]; !ok && len(s.addressed[addr]) == 0 {
			if s.unclaimed == nil {
				s.unclaimed = make(map[string]string)
			}
			s.unclaimed[addr] = ""
		}
	}
	s.mu.Unlock()
}

// readers returns the channel that the next readers message closes. A reader takes it before
// an attempt and sleeps on it after, so a message in between is not missed.
func (s *subscription) readers() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.all == nil {
		s.all = make(chan struct{})
	}
	return s.all
}

// wakeReaders wakes every reader sleeping on the channel readers returned.
func (s *subscription) wakeReaders() {
	s.mu.Lock()
	if s.all != nil {
		close(s.all)
		s.all = nil
	}
	s.mu.Unlock()
}

// peekReaders returns channel's live subscription, if any, and its readers channel, without
// taking a reference (see waiter.queue). sh is the shard of the channel's lock.
func (sh *shard) peekReaders(channel string) (*subscription, chan struct{}) {
	sh.mu.Lock()
	s := sh.subs[channel]
	sh.mu.Unlock()
	if s == nil {
		return nil, nil
	}
	return s, s.readers()
}

// address registers (add) or removes the queued waiter a at addr.
func (s *subscription) address(addr string, a *addressee, add bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		as := s.addressed[addr]
		for i, x := range as {
			if x == a {
				as = append(as[:i], as[i+1:]...)
				break
			}
		}
		if len(as) == 0 {
			delete(s.addressed, addr)
		} else {
			s.addressed[addr] = as
		}
		return
	}
	if s.addressed == nil {
		s.addressed = make(map[string][]*addressee)
	}
	s.addressed[addr] = append(s.addressed[addr], a)
	if grant, missed := s.unclaimed[addr]; missed {
		delete(s.unclaimed, addr)
		if grant != "" {
			a.grant = grant
		}
		permit(a.wake)
	}
}

// subscribe returns the shared subscription to channel with one more reference, starting it if
// this is the first. sh is the shard of the channel's lock. It returns nil once the client is
// closed.
func (c *Client) subscribe(sh *shard, channel string) *subscription {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if c.closed.Load() {
		return nil
	}
	if s := sh.subs[channel]; s != nil {
		s.refs++
		return s
	}
	s := &subscription{c: c, sh: sh, channel: channel, refs: 1, wake: make(chan struct{}, 1), done: make(chan struct{})}
	// Not derived from c.ctx: a child of a cancellable context is registered under that
	// context's mutex, one for the whole client. Close cancels it in its sweep of the shards.
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if sh.subs == nil {
		sh.subs = make(map[string]*subscription)
	}
	sh.subs[channel] = s
	prev := sh.retiring[channel]
	c.wg.Add(1)
	go c.runSubscription(s, prev)
	return s
}

// unsubscribe drops one reference to s; the last one ends the subscription. A waiter leaving
// without the lock hands a permit on, in case it had taken the one meant for the next waiter.
func (c *Client) unsubscribe(s *subscription, handOn bool) {
	sh := s.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if s.refs--; s.refs > 0 {
		if handOn {
			permit(s.wake)
		}
		return
	}
	if sh.subs[s.channel] == s {
		delete(sh.subs, s.channel)
	}
	if sh.retiring == nil {
		sh.retiring = make(map[string]chan struct{})
	}
	sh.retiring[s.channel] = s.done
	s.cancel()
}

// runSubscription keeps s subscribed until its context ends, re-subscribing after connection
// failures, then unsubscribes on the server. It starts only after the previous subscription to
// the same channel has unsubscribed, whose confirmation would otherwise cancel this one.
func (c *Client) runSubscription(s *subscription, prev <-chan struct{}) {
	defer c.wg.Done()
	defer func() {
		s.sh.mu.Lock()
		if s.sh.retiring[s.channel] == s.done {
			delete(s.sh.retiring, s.channel)
		}
		s.sh.mu.Unlock()
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

// noteHolder records, for waiters that join s later, that the holder's lease bound is d from
// now.
func (s *subscription) noteHolder(d time.Duration) {
	s.sh.mu.Lock()
	s.holderEnd = time.Now().Add(d)
	s.sh.mu.Unlock()
}
