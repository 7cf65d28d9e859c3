package rlock

import (
	"context"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// Restarts and failovers. A server that restarts without its data, or a failover to a replica
// that lacked a hold, forgets holds this process still believes in. The renewals would find
// out, but only a third of a lease later; meanwhile another client may take the lock. So while
// this client has holds, a watcher per node keeps an idle dedicated connection to it, which
// costs Redis nothing while all is well: a restarted or killed server, or a demoted master
// whose clients Sentinel kills, closes it. The watcher then has every hold checked at once
// (watchdog holds are renewed, fixed-lease holds checked), again and again every
// recheckInterval until a check gets through, which is as soon as the new process (or the new
// primary) answers. A hold it no longer has ends with ErrLockLost; one an in-sync replica kept
// goes on.
//
// A watcher connects only after the first hold, so a server can restart between a grant and
// its watcher's first connection; a node can fail over before its watcher reached it, to a
// replica watched all along; and a check can run between the grant of an acquisition under way
// and its registration. So every change a watcher sees is a notice (see notice): each of its
// connections that answers, the first one included, each that closes, the first try of a new
// watcher that fails, and a watcher dropped because its node left the deployment; and an
// acquisition that saw a notice while it ran has the holds checked again once its own is
// registered (see lock.acquire). But a closed connection, these checks are read-only (the
// watchers' manager runs check.lua for every hold, watchdog holds too; see verifyHolds), again
// every recheckInterval until one gets through. A notice costs one check script per group of
// holds; the watchers linger (watchLinger), so a client that locks in turn pays it once, not
// per acquisition.

// recheckInterval is how often a check after a lost connection is tried until it gets through.
const recheckInterval = 100 * time.Millisecond

// watchLinger is how long the watchers stay after the last hold ended, so that a client
// locking and unlocking in turn does not open and close connections each time.
func (c *Client) watchLinger() time.Duration { return max(c.lease, time.Second) }

// kickWatch makes the node watcher manager look at the holds and the nodes at once.
func (c *Client) kickWatch() {
	select {
	case c.watchKick <- struct{}{}:
	default:
	}
}

// notice counts a change of the nodes a watcher saw (see Client.noticed) and has every hold
// checked: after a closed connection by the watchdog, which renews the watchdog holds
// (checkNow), else read-only (verifyNow). The count goes first: an acquisition that reads it
// after registering its hold and finds it unchanged registered before this, so the check sees
// the hold.
func (c *Client) notice(closed bool) {
	c.noticed.Add(1)
	if closed {
		c.checkNow()
	} else {
		c.verifyNow()
	}
}

// verifyNow makes the watchers' manager check every hold at once, read-only (verifyHolds), and
// again every recheckInterval until a check gets through.
func (c *Client) verifyNow() {
	select {
	case c.verify <- struct{}{}:
	default:
	}
}

// checkNow makes the watchdog check every hold at once, and again every recheckInterval until a
// check gets through.
func (c *Client) checkNow() {
	select {
	case c.recheck <- struct{}{}:
	default:
	}
}

// watchServers is the Client's goroutine that runs a watcher (watchNode) per node of the
// deployment while this client has holds, and for watchLinger after it found the last one
// ended. While it has watchers it looks at the holds and nodes every second: only a first
// hold while it has none kicks it.
func (c *Client) watchServers() {
	defer c.wg.Done()
	type watcher struct {
		stop context.CancelFunc
		done chan struct{}
	}
	watchers := make(map[string]watcher)
	stop := func(addr string) {
		w := watchers[addr]
		w.stop()
		<-w.done
		delete(watchers, addr)
	}
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	retry := time.NewTimer(time.Hour) // the next try of a check that did not get through
	retry.Stop()
	defer retry.Stop()
	checks := 0 // checks in a row that did not get through
	var idleSince time.Time
	for {
		select {
		case <-c.ctx.Done():
			for addr := range watchers {
				stop(addr)
			}
			return
		case <-c.verify:
			retry.Stop()
			if checks = c.verifyHolds(checks); checks > 0 {
				retry.Reset(recheckInterval)
			}
			continue
		case <-retry.C:
			if checks = c.verifyHolds(checks); checks > 0 {
				retry.Reset(recheckInterval)
			}
			continue
		case <-c.watchKick:
		case <-t.C:
		}
		n := c.nholds.Load()
		next := time.Hour
		switch {
		case n > 0:
			idleSince = time.Time{}
			nodes := c.rc.Nodes()
			for addr := range watchers {
				if _, ok := nodes[addr]; !ok {
					// A node that left the deployment (a failed master whose slots another
					// serves) closes no connection of a watcher that never reached it.
					stop(addr)
					c.notice(false)
				}
			}
			for addr, node := range nodes {
				if _, ok := watchers[addr]; !ok {
					ctx, cancel := context.WithCancel(c.ctx)
					w := watcher{cancel, make(chan struct{})}
					watchers[addr] = w
					go func() {
						defer close(w.done)
						c.watchNode(ctx, node)
					}()
				}
			}
			// The nodes change with failovers and resharding: look again now and then. Holds
			// come and go without kicks from here on (see Client.watching).
			c.watching.Store(true)
			next = time.Second
		case len(watchers) == 0 || !idleSince.IsZero() && time.Since(idleSince) >= c.watchLinger():
			// A first hold registered after this store kicks; one registered before it is in
			// nholds below (atomics are sequentially consistent).
			c.watching.Store(false)
			if c.nholds.Load() > 0 {
				c.watching.Store(true)
				next = 0 // look again at once
				break
			}
			for addr := range watchers {
				stop(addr)
			}
		case idleSince.IsZero():
			idleSince = time.Now()
			next = time.Second
		default:
			next = min(c.watchLinger()-time.Since(idleSince), time.Second)
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(next)
	}
}

// watchNode keeps a dedicated connection to node until ctx ends, and gives a notice (see
// notice) each time a connection answers PING (the first one too), each time an established one
// closes (it then also makes the manager look at the nodes again), and when its first try
// fails. It connects again after a failure, 10ms doubling to 1s between tries.
func (c *Client) watchNode(ctx context.Context, node rueidis.Client) {
	b := newBackoff()
	first := true
	lost := false // a connection of this watcher closed, and none answered since
	for ctx.Err() == nil {
		d, release := node.Dedicate()
		var once sync.Once
		closed := d.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: func(rueidis.PubSubMessage) {}})
		err := d.Do(ctx, d.B().Ping().Build()).Error()
		if ctx.Err() != nil {
			once.Do(release)
			return
		}
		if err != nil {
			once.Do(release)
			if first {
				// A node killed before this watcher reached it: the check is tried again until
				// it gets through, on the node when it is back, or on the replica that took over.
				c.notice(false)
			}
			first = false
			select {
			case <-ctx.Done():
			case <-time.After(min(b.next(), time.Second)):
			}
			continue
		}
		// The node answers: a process that restarted since a hold's grant (before this
		// connection) no longer has it. After a closed connection, the holds are renewed.
		c.notice(lost)
		first, lost = false, false
		b = newBackoff()
		select {
		case <-ctx.Done():
		case <-closed:
			if ctx.Err() == nil {
				lost = true
				c.notice(true)
				c.kickWatch()
			}
		}
		once.Do(release)
	}
}
