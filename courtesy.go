package rlock

import (
	"sync"
	"time"
)

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
// A plain RWMutex's writers keep the second rule (a write release opens the window; a new Lock
// holds back, then tries and waits as a queued writer), not the first: they wait in their own
// set in Redis, which holds back new readers.
//
// An owner that holds the lock in this process always tries at once.

// Courtesy window bounds.
const (
	minCourtesy = time.Millisecond
	maxCourtesy = 10 * time.Millisecond
)

// courtesy is a shard's courtesy windows, and the barging rules that read them with the
// shard's hold records and subscriptions. It is guarded by mu, the shard's mutex.
type courtesy struct {
	mu    *sync.Mutex
	holds *holdTable           // an owner that holds the lock here tries at once
	subs  *subTable            // this client's waiters
	until map[string]time.Time // lock key -> end of its courtesy window
}

// open opens lk's courtesy window after a release whose message reached woken clients, if some
// of them are not this one; rtt is the release's round trip. Windows that ended are dropped.
func (cw *courtesy) open(lk *lock, woken int64, rtt time.Duration) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.subs.subscribed(lk.keys.Channel) {
		woken-- // this client's own subscription, with waiters or kept (see linger.go)
	}
	if woken <= 0 {
		return
	}
	now := time.Now()
	for key, until := range cw.until {
		if now.After(until) {
			delete(cw.until, key)
		}
	}
	if cw.until == nil {
		cw.until = make(map[string]time.Time)
	}
	cw.until[lk.keys.Lock] = now.Add(min(max(2*rtt, minCourtesy), maxCourtesy))
}

// left is what remains of the courtesy window of the lock whose key is key.
func (cw *courtesy) left(key string) time.Duration {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	return cw.leftLocked(key)
}

// leftLocked is left called with cw.mu held.
func (cw *courtesy) leftLocked(key string) time.Duration {
	until, ok := cw.until[key]
	if !ok {
		return 0
	}
	left := time.Until(until)
	if left <= 0 {
		delete(cw.until, key)
	}
	return left
}

// What a new Lock does first (see Barging).
const (
	yieldNo    = iota // try at once
	yieldWait         // wait (at most the returned time, a permit may come sooner), then try
	yieldQueue        // yieldWait behind this client's waiters
	yieldProbe        // re-enter if the owner holds the lock, else wait as yieldQueue
	yieldBack         // hold back for the returned time (a plain RWMutex writer), then try
)

// firstMove decides how a call of r on lk, whose waiters wait in style, starts: see Barging.
// fresh: r's owner was made for this call, so it holds nothing yet.
func (cw *courtesy) firstMove(lk *lock, style waitStyle, r request, fresh bool) (time.Duration, int) {
	if !r.join || !style.barging() && !style.courteous() {
		return 0, yieldNo
	}
	if _, ok := lk.wait.(pubSubWait); !ok {
		return 0, yieldNo
	}
	if style.courteous() {
		cw.mu.Lock()
		var courtesy time.Duration
		if cw.holds.get(holdKey{lk.keys.Lock, r.owner}) == nil {
			courtesy = cw.leftLocked(lk.keys.Lock)
		}
		cw.mu.Unlock()
		if courtesy > 0 {
			return courtesy, yieldBack
		}
		return 0, yieldNo
	}
	cw.mu.Lock()
	holds := cw.holds.get(holdKey{lk.keys.Lock, r.owner}) != nil
	waiters, holderEnd := cw.subs.waiting(lk.keys.Channel)
	var courtesy time.Duration
	if !holds && !waiters {
		courtesy = cw.leftLocked(lk.keys.Lock)
	}
	cw.mu.Unlock()
	switch {
	case holds:
		return 0, yieldNo
	case waiters && fresh:
		return max(time.Until(holderEnd), time.Millisecond), yieldQueue
	case waiters:
		return 0, yieldProbe
	case courtesy > 0:
		return courtesy, yieldWait
	}
	return 0, yieldNo
}
