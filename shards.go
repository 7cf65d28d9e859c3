package rlock

import (
	"sync"
	"sync/atomic"
)

// The client's state about lock names lives in shards, chosen by the lock's key (see
// shards.of), each with a mutex of its own: calls on names in different shards never wait for
// each other, and a shard's mutex is never held across a Redis call or while another shard's
// is held. Everything about one name (its hold records and lanes, its subscription, courtesy
// window and arriving fair waiters) is in one shard, so the checks that read several of these
// for one name see them at one moment. Scans over every name (the watchdog, the reaper, the
// node checks, Close) take the shards one at a time.

// shardCount is the number of shards of a Client: a power of two.
const shardCount = 256

// shards is a Client's state about lock names.
type shards struct {
	c *core
	s [shardCount]shard
	// records counts the hold records of every shard: the node watchers run while there are
	// any.
	records atomic.Int64
	idle    idleSubs // the kept subscriptions of every shard (see linger.go)
}

// shard is the state of the lock names that hash to it, built from the parts that own it.
// Every field but c, obs and records is guarded by mu, which each part shares.
type shard struct {
	mu       sync.Mutex
	c        *core
	holds    holdTable // this process's hold records (see hold.go, records.go)
	lanes    laneTable // request lanes (see lane.go, settle.go)
	subs     subTable  // subscriptions (see pubsub.go, wakeup.go)
	courtesy courtesy  // courtesy windows (see courtesy.go)
	obs      Observer  // the client's Observer; nil: none
	events   []Event   // for obs, delivered once mu is released (see unlockAndDeliver)
	records  *atomic.Int64

	_ [64]byte // keeps neighbouring shards' mutexes off one cache line
}

// init builds every shard of s for the client of c.
func (s *shards) init(c *core) {
	s.c = c
	s.idle.linger, s.idle.max = subLinger, maxIdleSubs
	for i := range s.s {
		sh := &s.s[i]
		sh.c, sh.obs, sh.records = c, c.obs, &s.records
		sh.lanes = laneTable{mu: &sh.mu, c: c, holds: &sh.holds}
		sh.subs = subTable{mu: &sh.mu, c: c, arrivals: arrivals{mu: &sh.mu}, idle: &s.idle}
		sh.courtesy = courtesy{mu: &sh.mu, holds: &sh.holds, subs: &sh.subs}
	}
}

// of returns the shard of the lock whose key is key (FNV-1a).
func (s *shards) of(key string) *shard {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return &s.s[h&(shardCount-1)]
}

// each runs f on every shard in turn, with its mutex held, delivering the events f queued
// once it is released.
func (s *shards) each(f func(sh *shard)) {
	for i := range s.s {
		sh := &s.s[i]
		sh.mu.Lock()
		f(sh)
		sh.unlockAndDeliver()
	}
}

// report queues ev for the observer. Called with sh.mu held.
func (sh *shard) report(ev Event) { sh.events = append(sh.events, ev) }

// unlockAndDeliver releases sh.mu, then delivers the observer events queued while it was
// held, in the order they were queued.
func (sh *shard) unlockAndDeliver() {
	if len(sh.events) == 0 {
		sh.mu.Unlock()
		return
	}
	events := sh.events
	sh.events = nil
	sh.mu.Unlock()
	for _, ev := range events {
		sh.obs.Event(ev)
	}
}
