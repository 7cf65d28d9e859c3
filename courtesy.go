package rlock

import "time"

// Barging. Without care, a holder that releases and at once asks again (a worker loop) wins
// the race against the waiters it just woke, which have a message to receive before they can
// try: the same few workers get the lock over and over, and every woken waiter spends a losing
// attempt. Two rules stop that for PubSub mutexes (Spin is left as Spring has it, for
// comparison; a fair mutex queues anyway):
//
//   - A Lock on a lock that already has waiters in this client joins them instead of trying
//     first; they are woken one per unlock message in the order they blocked. Re-entry must
//     not wait, so an owner that may hold the lock through another process (one that came
//     with the context) first re-enters if it can, leaving a free lock alone; an owner made
//     for this call holds nothing and joins at once, sleeping at most until the holder's lease
//     ends as the other waiters last saw it.
//   - After this client's release wakes waiters of other clients, its new Lock calls on that
//     lock hold back (before their first attempt) for a courtesy window of about two round
//     trips (1-10ms), long enough for a woken waiter elsewhere to get its attempt in. Waiters
//     that had already tried, which that release may just have woken, do not hold back.
//
// An owner that holds the lock in this process always tries at once.

// Courtesy window bounds.
const (
	minCourtesy = time.Millisecond
	maxCourtesy = 10 * time.Millisecond
)

// courtesy opens lk's courtesy window after a release whose message reached woken clients,
// if some of them are not this one; rtt is the release's round trip.
func (lk *lock) courtesy(woken int64, rtt time.Duration) {
	sh := lk.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if s := sh.subs[lk.keys.Channel]; s != nil && s.refs > 0 {
		woken-- // this client's own subscription
	}
	if woken > 0 {
		if sh.yielding == nil {
			sh.yielding = make(map[string]time.Time)
		}
		sh.yielding[lk.keys.Lock] = time.Now().Add(min(max(2*rtt, minCourtesy), maxCourtesy))
	}
}

// courtesyLeft is what remains of lk's courtesy window.
func (lk *lock) courtesyLeft() time.Duration {
	lk.sh.mu.Lock()
	defer lk.sh.mu.Unlock()
	return lk.courtesyLeftLocked()
}

// courtesyLeftLocked is courtesyLeft called with lk's shard's mutex held.
func (lk *lock) courtesyLeftLocked() time.Duration {
	sh := lk.sh
	until, ok := sh.yielding[lk.keys.Lock]
	if !ok {
		return 0
	}
	left := time.Until(until)
	if left <= 0 {
		delete(sh.yielding, lk.keys.Lock)
	}
	return left
}

// What a new Lock does first (see Barging).
const (
	yieldNo    = iota // try at once
	yieldWait         // wait (at most the returned time, a permit may come sooner), then try
	yieldQueue        // yieldWait behind this client's waiters
	yieldProbe        // re-enter if the owner holds the lock, else wait as yieldQueue
)

// yield decides how w starts: see Barging.
func (w *waiter) yield() (time.Duration, int) {
	if !w.r.join || w.style != (waitStyle{wake: wakeOne}) {
		return 0, yieldNo
	}
	if _, ok := w.lk.wait.(pubSubWait); !ok {
		return 0, yieldNo
	}
	sh := w.lk.sh
	sh.mu.Lock()
	_, holds := sh.holds[holdKey{w.lk.keys.Lock, w.r.owner}]
	s := sh.subs[w.lk.keys.Channel]
	waiters := s != nil && s.refs > 0
	var holderEnd time.Time
	if waiters {
		holderEnd = s.holderEnd
	}
	var courtesy time.Duration
	if !holds && !waiters {
		courtesy = w.lk.courtesyLeftLocked()
	}
	sh.mu.Unlock()
	switch {
	case holds:
		return 0, yieldNo
	case waiters && w.fresh:
		return max(time.Until(holderEnd), time.Millisecond), yieldQueue
	case waiters:
		return 0, yieldProbe
	case courtesy > 0:
		return courtesy, yieldWait
	}
	return 0, yieldNo
}
