package rlock

import (
	"sync"
	"time"
)

// The client's state about lock names lives in shards, chosen by the lock's key (see shardOf),
// each with a mutex of its own: calls on names in different shards never wait for each other,
// and a shard's mutex is never held across a Redis call or while another shard's is held.
// Everything about one name (its holds and lanes, its subscription, courtesy window and
// arriving fair waiters) is in one shard, so the checks that read several of these for one
// name see them at one moment. Scans over every name (the watchdog, the reaper, the node
// checks, Close) take the shards one at a time.

// shardCount is the number of shards of a Client: a power of two.
const shardCount = 256

// shard is the state of the lock names that hash to it. Every field but obs is guarded by mu.
type shard struct {
	mu       sync.Mutex
	holds    map[holdKey]*hold        // this process's holds, by lock key and owner
	lanes    map[holdKey]*lane        // request lanes in use or with work left (see lane.go)
	subs     map[string]*subscription // live subscriptions by channel
	retiring map[string]chan struct{} // channel -> closed when its old subscription is gone
	yielding map[string]time.Time     // lock key -> end of its courtesy window (see courtesy)
	arrivals map[holdKey]int          // fair waiters that may miss a wake-up, by channel and owner (see arrive)
	events   []Event                  // for the observer, delivered once mu is released (see unlockAndDeliver)
	spare    *lane                    // a forgotten lane that laneOf reuses (saves two allocations)
	obs      Observer                 // the client's Observer; nil: none

	_ [64]byte // keeps neighbouring shards' mutexes off one cache line
}

// shardOf returns the shard of the lock whose key is key (FNV-1a).
func (c *Client) shardOf(key string) *shard {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return &c.shards[h&(shardCount-1)]
}

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

// each runs f on every shard in turn, with its mutex held, delivering the events f queued
// once it is released.
func (c *Client) each(f func(sh *shard)) {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		f(sh)
		sh.unlockAndDeliver()
	}
}
