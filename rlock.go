package rlock

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// Client makes mutexes on one Redis deployment and owns the goroutines behind them: the
// watchdog, the reaper that ends holds whose lease ran out, and one subscription per lock name
// that has local waiters. While it has holds it also keeps one idle connection to each node,
// which costs Redis nothing; when that connection drops (the server restarted or was killed, or
// a failover demoted it), every hold is checked as soon as the node answers again, instead of
// at the next renewal a third of a lease later: a hold that Redis no longer has ends at once
// with [ErrLockLost], one that survived goes on. It is safe for concurrent use. Create it with
// [New] and release it with [Client.Close].
type Client struct {
	rc         rueidis.Client
	cluster    bool // group multi-key commands by slot
	sharded    bool // wake-ups by sharded pub/sub (SPUBLISH, SSUBSCRIBE): on a cluster
	opts       Options
	obs        Observer      // opts.Observer; nil: none
	leaseMs    string        // opts.WatchdogTimeout in whole milliseconds, as Redis gets it
	lease      time.Duration // the same, as a duration
	fairWaitMs string        // opts.FairWaitTimeout in milliseconds
	id         string        // random, prefixes this client's request ids (idLen bytes)
	// graceMs is Options.RestartGrace in milliseconds (0: none); gracedScripts caches the
	// scripts' variants for it by the SHA-1 of the original (see Client.script).
	graceMs       int64
	gracedScripts sync.Map
	seq           atomic.Uint64 // request id counter

	ctx       context.Context // done once Close starts
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closed    atomic.Bool
	closeDone chan struct{} // closed when the first Close has finished
	reap      chan struct{} // wakes the reaper: a hold expires before reapAt
	soon      chan struct{} // wakes the watchdog: claimed holds are to be renewed at soonAt
	recheck   chan struct{} // wakes the watchdog: check every hold now (see watchers.go)
	verify    chan struct{} // wakes the node watchers' manager: check every hold, read-only
	watchKick chan struct{} // wakes the node watchers' manager: holds or nodes changed

	shards [shardCount]shard // the state of lock names (see shards.go)
	nholds atomic.Int64      // hold records in every shard (the node watchers run while there are any)
	// noticed counts the watchers' notices (see watchers.go): an acquisition that saw it change
	// while it ran has the holds checked again once its hold is registered.
	noticed atomic.Uint64
	// watching is set while the node watchers' manager keeps its watchers for as long as
	// nholds > 0: a first hold then needs no kick (see watchServers).
	watching atomic.Bool
	// reapAt is when the reaper wakes next (UnixNano); 0: only when kicked, or scanning (see
	// reaper). soonAt is when the watchdog renews claimed holds (UnixNano); 0: not planned.
	reapAt atomic.Int64
	soonAt atomic.Int64
}

// New returns a Client that locks through client. It validates opts (negative durations,
// durations too short to mean anything and a KeyPrefix with braces are errors wrapping
// [ErrInvalid]) and starts the watchdog and reaper goroutines. It does not take ownership of
// client: [Client.Close] leaves it open.
func New(client rueidis.Client, opts Options) (*Client, error) {
	if client == nil {
		return nil, invalidf("nil rueidis client")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{
		rc:        client,
		cluster:   client.Mode() == rueidis.ClientModeCluster,
		sharded:   client.Mode() == rueidis.ClientModeCluster,
		opts:      opts,
		obs:       opts.Observer,
		lease:     opts.WatchdogTimeout.Truncate(time.Millisecond),
		id:        NewOwnerID()[:idLen],
		ctx:       ctx,
		cancel:    cancel,
		closeDone: make(chan struct{}),
		reap:      make(chan struct{}, 1),
		soon:      make(chan struct{}, 1),
		recheck:   make(chan struct{}, 1),
		verify:    make(chan struct{}, 1),
		watchKick: make(chan struct{}, 1),
	}
	for i := range c.shards {
		c.shards[i].obs = c.obs
	}
	c.leaseMs = strconv.FormatInt(c.lease.Milliseconds(), 10)
	if opts.RestartGrace > 0 {
		c.graceMs = opts.RestartGrace.Milliseconds()
	}
	c.fairWaitMs = strconv.FormatInt(opts.FairWaitTimeout.Milliseconds(), 10)
	c.wg.Add(3)
	go c.watchdog()
	go c.reaper()
	go c.watchServers()
	return c, nil
}

// Close stops the watchdog, the reaper, the node watchers and every subscription and returns
// once all goroutines of c have exited. Waiting Lock and TryLock calls return [ErrClosed];
// hold contexts are cancelled with cause ErrClosed (an [Observer] gets EventHoldEnded for
// each). Locks still held are not released: without renewal they expire within their lease.
// Close is idempotent, safe to call concurrently (every call returns once the first has
// finished), and always returns nil.
func (c *Client) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		<-c.closeDone
		return nil
	}
	c.cancel()
	// Taking every shard's mutex after closed is set also waits out any subscribe or register
	// that saw the client open: its wg.Add or hold is in before wg.Wait and this sweep.
	c.each(func(sh *shard) {
		for _, s := range sh.subs {
			s.cancel() // its waiters see c.ctx end and let go of it
		}
		for _, h := range sh.holds {
			sh.holdEnded(h, ErrClosed)
			h.end(ErrClosed)
		}
		c.nholds.Add(-int64(len(sh.holds)))
		sh.holds = nil
	})
	c.wg.Wait()
	close(c.closeDone)
	return nil
}
