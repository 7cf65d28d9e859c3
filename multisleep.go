package rlock

// A MultiLock call's sleeps: on the member that blocks its set, as a waiter of that member's
// lock (arrive, listen), bounded by the holder's lease and the call's end.

import (
	"time"

	"github.com/rlock-go/rlock/internal/wire"
)

// arrive makes the set an arriving waiter on the channel of every fair member of group g (see
// arrivals), until depart: an addressed wake-up sent before it listens on that member is kept.
func (w *setWaiter) arrive(g int) {
	if w.arrived == g {
		return
	}
	w.depart()
	w.arrived = g
	ml := w.ml
	for i := ml.groups[g].from; i < ml.groups[g].to; i++ {
		if ml.fair[i] {
			m := ml.members[i]
			m.sh.subs.arrive(m.keys.Channel, w.owner, 1)
		}
	}
}

// depart ends the arrival of arrive.
func (w *setWaiter) depart() {
	g := w.arrived
	if g < 0 {
		return
	}
	w.arrived = -1
	ml := w.ml
	for i := ml.groups[g].from; i < ml.groups[g].to; i++ {
		if ml.fair[i] {
			m := ml.members[i]
			m.sh.subs.arrive(m.keys.Channel, w.owner, -1)
		}
	}
}

// wait sleeps after an attempt a of group g found it blocked (or failed in transport: err)
// until the blocking member may be free: a wake-up on its channel (its own wait strategy:
// PubSub wakes, Spin polls), its holder's lease end (a fair member's: when the set heads its
// queue), the refresh of the set's place in its queue (every third of FairWaitTimeout), or a
// back-off after err. It returns ErrNotObtained when a TryLock's wait has run out, ctx's error
// or ErrClosed.
func (w *setWaiter) wait(g int, a wire.MultiAttempt, err error) error {
	ml := w.ml
	c := ml.c
	if err != nil {
		return w.sleep(w.backoff.next(), nil, attemptErr(err))
	}
	w.backoff = newBackoff()
	b := w.blocker(g, a)
	m := ml.members[b]
	d := time.Duration(1<<63 - 1)
	queued := ml.fair[b] && w.queued == g
	if queued {
		d = c.opts.FairWaitTimeout / 3
	}
	spin, spins := m.wait.(spinWait)
	if spins {
		d = min(d, spin.interval)
	}
	if !ml.fair[b] || a.Head {
		d = min(d, leaseBound(c, a.PTTL))
	}
	var wake <-chan struct{}
	if !spins {
		if wake = w.listen(b, queued); wake == nil {
			return ErrClosed
		}
	}
	return w.sleep(d, wake, nil)
}

// leaseBound is the longest the set sleeps given the holder's remaining lease pttl (see
// waiter.leaseBound).
func leaseBound(c *Client, pttl time.Duration) time.Duration {
	if pttl < 0 {
		return c.opts.WatchdogTimeout
	}
	return pttl + time.Millisecond
}

// listen returns what wakes the set waiting on member b: its subscription's wake-up for a
// plain member, its address there for a fair one it is queued on (queued). The subscription is
// kept while the set waits on b; nil once the client is closed.
func (w *setWaiter) listen(b int, queued bool) <-chan struct{} {
	if w.on != b {
		w.stopListening()
		m := w.ml.members[b]
		if w.sub = m.sh.subs.subscribe(m.keys.Channel, time.Time{}); w.sub == nil {
			return nil
		}
		w.on = b
	}
	if !w.ml.fair[b] {
		return w.sub.wake
	}
	if w.ad == nil && queued {
		w.ad = &addressee{wake: make(chan struct{}, 1)}
		w.sub.address(w.owner, w.ad, true)
	}
	if w.ad == nil {
		return w.sub.wake
	}
	return w.ad.wake
}

// stopListening drops the subscription of the member the set waited on. A plain member's
// wake-up the set may have taken is handed on to its other waiters here, unless the set holds
// that member now.
func (w *setWaiter) stopListening() {
	if w.sub == nil {
		return
	}
	b := w.on
	m := w.ml.members[b]
	if w.ad != nil {
		w.sub.address(w.owner, w.ad, false)
		w.ad = nil
	}
	m.sh.subs.unsubscribe(w.sub, !w.ml.fair[b] && w.recs[b] == nil)
	w.sub, w.on = nil, -1
}

// sleep waits for d (cut to a TryLock's remaining wait), a permit on wake, ctx, or Close. It
// returns ErrNotObtained at once when the wait has run out, and ctx's error or ErrClosed when
// those end the wait; last (nil: none), the last attempt's transport error, is wrapped too.
func (w *setWaiter) sleep(d time.Duration, wake <-chan struct{}, last error) error {
	ml := w.ml
	if w.bounded {
		left := time.Until(w.deadline)
		if left <= 0 && last != nil {
			return ml.errorf("%w (last attempt: %w)", ErrNotObtained, last)
		} else if left <= 0 {
			return ml.errorf("%w", ErrNotObtained)
		}
		d = min(d, left)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-wake:
	case <-w.ctx.Done():
		if last != nil {
			return ml.errorf("waiting: %w (last attempt: %w)", w.ctx.Err(), last)
		}
		return ml.errorf("waiting: %w", w.ctx.Err())
	case <-ml.c.ctx.Done():
		return ErrClosed
	}
	return nil
}
