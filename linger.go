package rlock

import (
	"container/list"
	"sync"
	"time"
)

// Kept subscriptions. When the last waiter of a lock leaves, its subscription is kept for
// subLinger, so a waiter that comes again soon (a worker loop, a ping-pong between processes)
// pays no SUBSCRIBE, and no UNSUBSCRIBE when it leaves. A client keeps at most maxIdleSubs of
// them, the least recently idle dropped first; each costs its map entry and goroutine in the
// client, and a channel in Redis. Each is unsubscribed by a timer (time.AfterFunc, counted in
// the client's WaitGroup until its function ran or it was stopped), and at once by Close.

// Kept subscriptions' defaults.
const (
	subLinger   = time.Second
	maxIdleSubs = 1000
)

// idleSubs is a client's kept subscriptions, least recently idle first, shared by its shards.
// Its list and each subscription's elem are guarded by mu, which is taken under a shard's
// mutex (never the other way round).
type idleSubs struct {
	mu     sync.Mutex
	l      list.List // of idleEntry
	linger time.Duration
	max    int
}

// idleEntry is a kept subscription, the table it is in and its idle period (gen).
type idleEntry struct {
	s   *subscription
	t   *subTable
	gen uint64
}

// keep makes s, whose last waiter left, idle: it is unsubscribed after the linger, or sooner
// if the client keeps too many. It reports false when s is not to be kept (the client is
// closing, or keeps none), and the caller retires it. Called with t.mu held.
func (t *subTable) keep(s *subscription) bool {
	c, idle := t.c, t.idle
	if idle == nil || idle.max <= 0 || idle.linger <= 0 || c.closed.Load() || s.ctx.Err() != nil {
		return false
	}
	s.gen++
	e := idleEntry{s: s, t: t, gen: s.gen}
	c.wg.Add(1)
	s.timer = time.AfterFunc(idle.linger, func() { t.expire(e) })
	idle.mu.Lock()
	s.elem = idle.l.PushBack(e)
	var victim *idleEntry
	if idle.l.Len() > idle.max {
		v := idle.l.Remove(idle.l.Front()).(idleEntry)
		v.s.elem = nil
		victim = &v
	}
	idle.mu.Unlock()
	if victim != nil {
		// Its shard's mutex may not be taken under this one: its own function retires it.
		c.wg.Add(1)
		time.AfterFunc(0, func() { victim.t.expire(*victim) })
	}
	return true
}

// reuse takes s, kept idle, back for a waiter. Called with t.mu held.
func (t *subTable) reuse(s *subscription) {
	s.gen++
	t.unkeep(s)
}

// unkeep stops s's linger timer and takes it off the idle list, if it is kept. Called with
// t.mu held.
func (t *subTable) unkeep(s *subscription) {
	if s.timer != nil && s.timer.Stop() {
		t.c.wg.Done() // its function will not run
	}
	s.timer = nil
	if t.idle == nil {
		return
	}
	t.idle.mu.Lock()
	if s.elem != nil {
		t.idle.l.Remove(s.elem)
		s.elem = nil
	}
	t.idle.mu.Unlock()
}

// expire retires e's subscription if it is still idle in e's period: its linger ended, or the
// client keeps too many.
func (t *subTable) expire(e idleEntry) {
	defer t.c.wg.Done()
	t.mu.Lock()
	defer t.mu.Unlock()
	s := e.s
	if s.gen != e.gen || s.refs > 0 || s.ctx.Err() != nil {
		return
	}
	t.unkeep(s) // evicted, its linger timer is still set; or it fired
	t.retire(s)
}
