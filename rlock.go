package rlock

import (
	"github.com/redis/rueidis"
)

// Client makes mutexes on one Redis deployment and owns the goroutines behind them: the
// watchdog, the reaper that ends holds whose lease ran out, and one subscription per lock name
// that has local waiters (kept for about a second after the last leaves). While it has holds
// it also keeps one idle connection to each node, which costs Redis nothing; when that
// connection drops (the server restarted or was killed, or a failover demoted it), every hold
// is checked as soon as the node answers again, instead of at the next renewal a third of a
// lease later: a hold that Redis no longer has ends at once with [ErrLockLost], one that
// survived goes on. It is safe for concurrent use. Create it with
// [New] and release it with [Client.Close].
type Client struct {
	core
	shards    shards // the state of lock names (see shards.go)
	settler   settler
	watchdog  watchdog
	reaper    reaper
	watchers  watchers
	closeDone chan struct{} // closed when the first Close has finished
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
	c := &Client{closeDone: make(chan struct{})}
	c.core.init(client, opts)
	c.shards.init(&c.core)
	c.watchdog.init(&c.core, &c.shards)
	c.reaper.init(&c.core, &c.shards, &c.watchdog)
	c.watchers.init(&c.core, &c.shards, &c.watchdog)
	c.settler = settler{&c.core, &c.shards}
	c.wg.Add(4)
	go c.settler.run()
	go c.watchdog.run()
	go c.reaper.run()
	go c.watchers.run()
	return c, nil
}

// Close stops the watchdog, the reaper, the node watchers and every subscription and returns
// once all goroutines of c have exited. Waiting Lock and TryLock calls return [ErrClosed];
// hold contexts are cancelled with cause ErrClosed (an [Observer] gets EventHoldEnded for
// each). Locks still held are not released: without renewal they expire within their lease.
// What calls left to settle (a queue place given up, a hold to give back, a release whose
// reply was lost) is settled before it returns, within 200ms in all; what is not lapses in
// Redis by itself. Close is idempotent, safe to call concurrently (every call returns once the first has
// finished), and always returns nil.
func (c *Client) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		<-c.closeDone
		return nil
	}
	c.cancel()
	// Taking every shard's mutex after closed is set also waits out any subscribe or register
	// that saw the client open: its wg.Add or hold is in before wg.Wait and this sweep.
	c.shards.each(func(sh *shard) {
		sh.subs.cancelAll()
		sh.endAll(ErrClosed)
	})
	c.closeGate() // no flight starts from here on (see startFlight)
	c.wg.Wait()
	c.settler.settleLeft()
	close(c.closeDone)
	return nil
}
