package rlock

import (
	"context"
	"sync"
	"sync/atomic"
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
// registered (see locker.acquire). But a closed connection, these checks are read-only (the
// watchers' manager runs check.lua for every hold, watchdog holds too; see checker.verify), again
// every recheckInterval until one gets through. A notice costs one check script per group of
// holds; the watchers linger (watchLinger), so a client that locks in turn pays it once, not
// per acquisition.

// watchers is the Client's goroutine that runs a watcher (watchNode) per node of the
// deployment while this client has holds, and for watchLinger after it found the last one
// ended. While it has watchers it looks at the holds and nodes every second: only a first
// hold while it has none kicks it.
type watchers struct {
	c       *core
	shards  *shards
	checker checker
	wd      *watchdog     // checks every hold after a closed connection (see notice)
	verify  chan struct{} // wakes it: check every hold, read-only
	kick    chan struct{} // wakes it: holds or nodes changed
	// noticed counts the watchers' notices: an acquisition that saw it change while it ran has
	// the holds checked again once its hold is registered.
	noticed atomic.Uint64
	// watching is set while it keeps its watchers for as long as the client has hold records:
	// a first record then needs no kick (see firstHold).
	watching atomic.Bool
}

// init sets w up for the client of c, whose state is s and whose watchdog is wd.
func (ws *watchers) init(c *core, s *shards, wd *watchdog) {
	ws.c, ws.shards, ws.checker, ws.wd = c, s, checker{c, s}, wd
	ws.verify, ws.kick = make(chan struct{}, 1), make(chan struct{}, 1)
}

// watchLinger is how long the watchers stay after the last hold ended, so that a client
// locking and unlocking in turn does not open and close connections each time.
func (ws *watchers) watchLinger() time.Duration { return max(ws.c.lease, time.Second) }

// firstHold tells the watchers that the client has its first hold record: the manager looks at
// once, unless it keeps its watchers anyway.
func (ws *watchers) firstHold() {
	if !ws.watching.Load() {
		ws.kickNow() // the manager keeps no watchers, or is about to stop them
	}
}

// notices returns the count of notices so far (see noticed).
func (ws *watchers) notices() uint64 { return ws.noticed.Load() }

// kickNow makes the manager look at the holds and the nodes at once.
func (ws *watchers) kickNow() {
	select {
	case ws.kick <- struct{}{}:
	default:
	}
}

// notice counts a change of the nodes a watcher saw (see noticed) and has every hold
// checked: after a closed connection by the watchdog, which renews the watchdog holds
// (checkNow), else read-only (verifyNow). The count goes first: an acquisition that reads it
// after registering its hold and finds it unchanged registered before this, so the check sees
// the hold.
func (ws *watchers) notice(closed bool) {
	ws.noticed.Add(1)
	if closed {
		ws.wd.checkNow()
	} else {
		ws.verifyNow()
	}
}

// verifyNow makes the manager check every hold at once, read-only (see checker.verify), and
// again every recheckInterval until a check gets through.
func (ws *watchers) verifyNow() {
	select {
	case ws.verify <- struct{}{}:
	default:
	}
}

// run is the manager goroutine; it returns when the client closes.
func (ws *watchers) run() {
	c := ws.c
	defer c.wg.Done()
	type watcher struct {
		stop context.CancelFunc
		done chan struct{}
	}
	running := make(map[string]watcher)
	stop := func(addr string) {
		w := running[addr]
		w.stop()
		<-w.done
		delete(running, addr)
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
			for addr := range running {
				stop(addr)
			}
			return
		case <-ws.verify:
			retry.Stop()
			if checks = ws.checker.verify(checks); checks > 0 {
				retry.Reset(recheckInterval)
			}
			continue
		case <-retry.C:
			if checks = ws.checker.verify(checks); checks > 0 {
				retry.Reset(recheckInterval)
			}
			continue
		case <-ws.kick:
		case <-t.C:
		}
		n := ws.shards.records.Load()
		next := time.Hour
		switch {
		case n > 0:
			idleSince = time.Time{}
			nodes := c.rc.Nodes()
			for addr := range running {
				if _, ok := nodes[addr]; !ok {
					// A node that left the deployment (a failed master whose slots another
					// serves) closes no connection of a watcher that never reached it.
					stop(addr)
					ws.notice(false)
				}
			}
			for addr, node := range nodes {
				if _, ok := running[addr]; !ok {
					ctx, cancel := context.WithCancel(c.ctx)
					w := watcher{cancel, make(chan struct{})}
					running[addr] = w
					go func() {
						defer close(w.done)
						ws.watchNode(ctx, node)
					}()
				}
			}
			// The nodes change with failovers and resharding: look again now and then. Holds
			// come and go without kicks from here on (see watching).
			ws.watching.Store(true)
			next = time.Second
		case len(running) == 0 || !idleSince.IsZero() && time.Since(idleSince) >= ws.watchLinger():
			// A first hold registered after this store kicks; one registered before it is in
			// the records count below (atomics are sequentially consistent).
			ws.watching.Store(false)
			if ws.shards.records.Load() > 0 {
				ws.watching.Store(true)
				next = 0 // look again at once
				break
			}
			for addr := range running {
				stop(addr)
			}
		case idleSince.IsZero():
			idleSince = time.Now()
			next = time.Second
		default:
			next = min(ws.watchLinger()-time.Since(idleSince), time.Second)
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
func (ws *watchers) watchNode(ctx context.Context, node rueidis.Client) {
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
				ws.notice(false)
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
		ws.notice(lost)
		first, lost = false, false
		b = newBackoff()
		select {
		case <-ctx.Done():
		case <-closed:
			if ctx.Err() == nil {
				lost = true
				ws.notice(true)
				ws.kickNow()
			}
		}
		once.Do(release)
	}
}
