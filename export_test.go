package rlock

import (
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock/internal/wire"
)

// What the package's external tests (package rlock_test) may see of its insides.

// NewSharded is New for tests: the client waits through sharded pub/sub (SSUBSCRIBE and
// SPUBLISH) as it does on a cluster, here on any Redis 7 server.
func NewSharded(client rueidis.Client, opts Options) (*Client, error) {
	c, err := New(client, opts)
	if err == nil {
		c.sharded = true
	}
	return c, err
}

// SetQuietEvery sets how often c logs a failure that goes on (quietEvery, 10s) to every; call
// it before c's first hold.
func SetQuietEvery(c *Client, every time.Duration) { c.log.every = every }

// ReapGrace is reapGrace: how long the reaper leaves a fixed-lease hold's contexts to their
// deadlines.
const ReapGrace = reapGrace

// LockOtherShard locks the mutex of the shard of a lock name of c whose shard is not that of
// the lock called name, and returns its unlock.
func LockOtherShard(c *Client, name string) (unlock func()) {
	own := c.shards.of(wire.LockKey(c.opts.KeyPrefix, name))
	var other *shard
	for i := 0; other == nil || other == own; i++ {
		other = c.shards.of(wire.LockKey(c.opts.KeyPrefix, "other"+strconv.Itoa(i)))
	}
	other.mu.Lock()
	return other.mu.Unlock
}

// PerNameState returns c's hold records, and how much per-name state it keeps besides: lanes,
// subscriptions and arriving fair waiters.
func PerNameState(c *Client) (records int64, left int) {
	c.shards.each(func(sh *shard) {
		left += len(sh.holds.m) + len(sh.lanes.m) + len(sh.subs.m) + len(sh.subs.arrivals.m)
	})
	return c.shards.records.Load(), left
}

// ShardsFree reports whether the mutex of every shard of c could be taken within d: it is
// false when one was held for longer.
func ShardsFree(c *Client, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for i := range c.shards.s {
		mu := &c.shards.s[i].mu
		for !mu.TryLock() {
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(time.Millisecond)
		}
		mu.Unlock()
	}
	return true
}

// LocalWaiters returns how many calls of m's client wait on the subscription to m's channel.
func LocalWaiters(m *Mutex) int {
	m.sh.mu.Lock()
	defer m.sh.mu.Unlock()
	if s := m.sh.subs.m[m.keys.Channel]; s != nil {
		return s.refs
	}
	return 0
}

// OpenCourtesy opens m's courtesy window in its client for d, as a release that woke other
// clients' waiters would.
func OpenCourtesy(m *Mutex, d time.Duration) {
	cw := &m.sh.courtesy
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.until == nil {
		cw.until = make(map[string]time.Time)
	}
	cw.until[m.keys.Lock] = time.Now().Add(d)
}

// LanesLeft describes c's lanes that have work left or are in use: for a test that found keys
// left behind.
func LanesLeft(c *Client) []string {
	var out []string
	c.shards.each(func(sh *shard) {
		for hk, l := range sh.lanes.m {
			out = append(out, fmt.Sprintf("%s/%s refs=%d turn=%d work=%v lost=%q leaves=%d owed=%v unlock=%+v spreads=%d holdrec=%v",
				hk.key, hk.owner, l.refs, len(l.turn), l.work(), l.lostAcquire.id, len(l.leaves), l.owed, l.unlock,
				len(l.spreads), sh.holds.get(hk) != nil))
		}
		for hk := range sh.holds.m {
			if sh.lanes.m[hk] == nil {
				out = append(out, fmt.Sprintf("%s/%s hold record without lane", hk.key, hk.owner))
			}
		}
	})
	return out
}

// SetKeptSubs sets how long c keeps a subscription after its last waiter left (subLinger) and
// how many it keeps at most (maxIdleSubs); call it before c's first wait.
func SetKeptSubs(c *Client, linger time.Duration, most int) {
	c.shards.idle.linger, c.shards.idle.max = linger, most
}

// KeptSubs returns how many subscriptions c keeps without waiters.
func KeptSubs(c *Client) int {
	c.shards.idle.mu.Lock()
	defer c.shards.idle.mu.Unlock()
	return c.shards.idle.l.Len()
}
