package rlock

// A fair mutex hands the lock out in the order waiters arrived. Beside the lock hash it keeps
// a queue (list) of waiting owners and their deadlines (sorted set), all changed only by the
// fair_*.lua scripts:
//
//   - A waiter joins the queue with its first attempt and refreshes its deadline (server time
//     plus FairWaitTimeout) with every later attempt, at least every third of the timeout, so a
//     live waiter never loses its place however long it waits. A waiter that stops polling
//     (crashed, partitioned) is purged from wherever it stands once its deadline passes, so it
//     delays the others by at most FairWaitTimeout plus one poll. Redisson instead lets a dead
//     waiter stall the queue for its threadWaitTime (5 minutes), and purges only the head.
//   - The lock is taken only by the head of the queue (or anyone, when nobody waits); a
//     single-attempt TryLock never joins, so it fails while others wait even if the lock is
//     momentarily free.
//   - A release wakes only the head, with a message addressed to its owner on the lock's one
//     channel; the other waiters sleep until their refresh, so wake-ups and commands per
//     acquisition do not grow with the number of waiters. The head also wakes at the holder's
//     lease end, which publishes nothing.
//   - A waiter that gives up (cancelled, timed out, client closed) removes its entry before
//     returning and wakes the next head if the lock is free.

// NewFairMutex returns the fair mutex called name: the same API and options as
// [Client.NewMutex] (reentrancy, leases, watchdog, loss, fencing), but waiters acquire it in
// arrival order. It does not touch Redis; invalid arguments are reported by every method.
// All mutexes of one name must be fair, or none.
func (c *Client) NewFairMutex(name string, opts ...MutexOption) *Mutex {
	m := c.NewMutex(name, opts...)
	m.fair = true
	return m
}

// fair waits in the queue of a fair mutex until an attempt takes the lock: on its addressed
// wake-up (PubSub) or poll (Spin), at the holder's lease end when it heads the queue, and at
// least every third of FairWaitTimeout to keep its place. It leaves the queue on any other end.
func (w *waiter) fair(a attempt, err error) (attempt, error) {
	c := w.m.c
	acquired := false
	defer func() {
		if !acquired && w.join {
			w.leaveQueue()
		}
	}()
	poll := c.opts.FairWaitTimeout / 3
	if s, ok := w.m.wait.(spinWait); ok {
		poll = min(poll, s.interval)
	}
	var wake chan struct{}
	if _, ok := w.m.wait.(pubSubWait); ok && w.join {
		s := c.subscribe(w.m.keys.channel)
		if s == nil {
			return a, ErrClosed
		}
		wake = make(chan struct{}, 1)
		s.address(w.owner, wake)
		defer func() {
			s.address(w.owner, nil)
			c.unsubscribe(s, false)
		}()
	}
	backoff := newBackoff()
	for {
		if err != nil && !isTransport(err) {
			return a, err
		}
		d := poll
		switch {
		case err != nil:
			d = backoff.next()
		case a.head:
			d = min(d, w.m.leaseBound(a.pttl))
		}
		if err := w.sleep(d, wake); err != nil {
			return attempt{}, err
		}
		a, err = w.try()
		if err == nil && a.acquired {
			acquired = true
			return a, nil
		}
	}
}

// leaveQueue removes the waiter from the fair queue, retrying transport errors for a few
// seconds; an entry it cannot remove expires FairWaitTimeout after the waiter's last poll.
func (w *waiter) leaveQueue() {
	m := w.m
	keys := []string{m.keys.lock, m.keys.queue, m.keys.deadlines, m.keys.channel}
	args := []string{w.owner, addressedPrefix}
	err := retryTransport(releaseBudget, func() error {
		return fairLeaveScript.Exec(detach(w.cmd), m.c.rc, keys, args).Error()
	})
	switch {
	case isTransport(err):
		m.c.opts.Logger.Warn("rlock: leaving the fair queue failed; the entry expires by itself",
			"lock", m.name, "error", err)
	case err != nil:
		m.c.opts.Logger.Warn("rlock: leaving the fair queue failed", "lock", m.name, "error", err)
	}
}
