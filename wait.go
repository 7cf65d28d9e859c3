package rlock

import (
	"context"
	"time"

	"github.com/rlock-go/rlock/internal/wire"
)

// waiter is one call trying to acquire a lock (Lock, RLock, Acquire and their Try forms).
// All its attempts carry one request id, so an attempt whose reply was lost is replayed, not
// repeated.
type waiter struct {
	lk       *lock
	sh       *shard // the client's state about the lock's name
	style    waitStyle
	r        request // owner, request id, access, permits, join (not a single attempt)
	ctx      context.Context
	cmd      context.Context // the Redis commands' context (values of the observer's; see detach)
	bounded  bool            // a Try form: give up at deadline
	deadline time.Time       //
	// end is when the call ends, if it has an end: its deadline, or ctx's if sooner (see bound).
	end   time.Time
	fresh bool // the owner was made for this call, so it holds nothing yet
	// lane is the owner's lane while this call holds its turn: after a successful attempt
	// (until the hold is registered) and after a lost reply (until an attempt learns the
	// outcome, or the call leaves and settles it).
	lane  *lane
	tried bool // an attempt was made: this call no longer keeps a courtesy window
	// peeked is the subscription that was live before the first attempt of a reader, and
	// woken its readers channel then (see queue).
	peeked  *subscription
	woken   chan struct{}
	blocked bool // an attempt found the lock held, or the call queued behind waiters
	// joins counts the attempts that put this call's entry in its queue (see attempt.joined);
	// any lost reply makes it unknown (2). A grant message is taken without asking Redis only
	// while it is 1 (see granted).
	joins int
	// queued: the call waited in its queue (a queued style), where it may hold a place.
	queued bool
	// lastErr is the transport error of the last attempt, if it could not reach Redis (nil
	// once an attempt got a reply): the error of a call that ends without a hold wraps it.
	lastErr error
	// answered: an attempt got a reply; lost: one got a transport error (it may have run).
	// Until one is lost, a later attempt knows the request has not run (request.answered).
	answered, lost bool
	// over: a Redis call of this call was left in flight (see bound.go), or its lane was not
	// free within its bound: its end has passed, and it makes no more attempts.
	over bool
}

// bound is the bound of the call's Redis calls: its end, or its context's. With SyncReplicas an
// attempt waits SyncTimeout for the replicas in Redis (WAIT), which its end then allows for.
func (w *waiter) bound() bound {
	b := bound{ctx: w.ctx, end: w.end}
	if o := w.lk.core.opts; o.SyncReplicas > 0 && !b.end.IsZero() {
		b.end = b.end.Add(o.SyncTimeout)
	}
	return b
}

// address is what a wake-up addressed to this waiter names (wakeAddressed).
func (w *waiter) address() string { return w.style.prefix + w.r.owner }

// try runs one acquire attempt that may take the lock.
func (w *waiter) try() (attempt, error) { return w.run(takeLock) }

// run runs one acquire attempt in mode, taking the owner's lane first if this call does not
// hold it. The attempt is a flight bounded by the call's end (see bound.go): one that Redis
// does not answer in time is left in flight with the lane's turn, and, once it returns,
// recorded on the lane for the settler (its hold, if it took one, is given back).
func (w *waiter) run(mode int) (attempt, error) {
	if err := w.takeTurn(); err != nil {
		if isTransport(err) {
			w.lastErr = attemptErr(err)
		}
		return attempt{}, err
	}
	w.tried = true
	w.r.mode = mode
	w.r.answered = w.answered && !w.lost
	r := w.r
	sh, lk, l := w.sh, w.lk, w.lane
	var a attempt
	var err error
	if ferr := lk.core.flyKept(w.bound(), w.cmd, func(ctx context.Context) { a, err = lk.tryOnce(ctx, r) },
		func() { sh.orphaned(l, lk, r, a, err) }); ferr != nil {
		w.lane, w.over, w.lastErr = nil, true, ferr
		return attempt{}, ferr
	}
	w.lastErr = nil
	if isTransport(err) {
		w.lastErr, w.lost = attemptErr(err), true
	} else if err == nil {
		w.answered = true
	}
	if err == nil && !a.acquired {
		w.blocked = true
	}
	switch {
	case err != nil:
		w.joins = 2 // it may have joined, and a replay would not say so
	case !a.acquired && a.joined:
		w.joins++
	}
	if err == nil && a.unreplicated != nil {
		err = a.unreplicated
		// Give the hold back; the call ends with err.
		if !sh.owe(within(0), w.cmd, w.lane, lk, r.access) {
			w.lane = nil // a flight has its turn
		}
		a.acquired = false
	}
	if err == nil && a.acquired || isTransport(err) {
		return a, err // keep the turn: to register the hold, or to replay the request
	}
	if w.lane != nil {
		sh.lanes.exit(w.lane)
		w.lane = nil
	}
	return a, err
}

// spin polls every interval, as Spring's RedisLockRegistry does (waiters that are not queued).
func (w *waiter) spin(interval time.Duration, err error) (attempt, error) {
	backoff := newBackoff()
	for {
		d := interval
		if err != nil {
			d = backoff.next()
		}
		if err := w.sleep(d, nil); err != nil {
			return attempt{}, err
		}
		var a attempt
		a, err = w.try()
		if err == nil && a.acquired {
			return a, nil
		}
		if err != nil && !isTransport(err) {
			return a, err
		}
	}
}

// pubsub is how a plain Mutex's waiter waits: it sleeps on the lock's shared subscription until
// an unlock message or the holder's lease bound, then tries again. The subscription's
// confirmation leaves a permit too, so an unlock published between the first attempt and the
// subscription is not missed.
func (w *waiter) pubsub(a attempt, err error) (attempt, error) {
	s := w.sh.subs.subscribe(w.lk.keys.Channel, w.seen(a, err))
	if s == nil {
		return a, ErrClosed
	}
	acquired := false
	defer func() { w.sh.subs.unsubscribe(s, !acquired) }()
	backoff := newBackoff()
	for {
		d := w.leaseBound(a.pttl)
		if err != nil {
			d = backoff.next()
		} else {
			s.noteHolder(d)
		}
		if err := w.sleep(d, s.wake); err != nil {
			return attempt{}, err
		}
		if d := w.sh.courtesy.left(w.lk.keys.Lock); d > 0 && !w.tried {
			// A new call woken early (by the subscription's confirmation) keeps the window.
			if err := w.sleep(d, nil); err != nil {
				return attempt{}, err
			}
		}
		a, err = w.try()
		if err == nil && a.acquired {
			acquired = true
			return a, nil
		}
		if err != nil && !isTransport(err) {
			return a, err
		}
	}
}

// queue waits for a lock whose waiters are queued (fair kinds, a writer holding back new
// readers, a semaphore), or woken some other way than one by one (readers): on a wake-up meant
// for it (PubSub) or a poll (Spin), at the holder's lease bound when nothing else wakes it
// sooner, and, if queued, at least every third of FairWaitTimeout to keep its place, which it
// leaves on any end but acquiring (see waiter.acquire), and every half of the claim a grant to
// it would carry (see lock.claimFor).
func (w *waiter) queue(a attempt, err error) (attempt, error) {
	c := w.lk.core
	acquired := false
	poll := time.Duration(1<<63 - 1)
	if w.style.queued {
		poll = c.opts.FairWaitTimeout / 3
		if claim := w.lk.claimFor(); claim > 0 {
			// A grant whose message is lost (a subscription that moved with its slot, a cut
			// connection) is found by a poll while at least half its claim is left, so the
			// hold it returns is not one whose lease ends before its first renewal lands.
			poll = min(poll, claim/2)
		}
	}
	// wake is what ends a sleep early: the waiter's own channel (addressed), the client's one
	// permit (wakeOne), or the readers channel, which a readers message closes and which is
	// taken again before each attempt, so a message after the attempt is not missed (the first
	// time round it was taken before the first attempt, or the subscription is new and its
	// confirmation wakes every reader).
	var s *subscription
	var wake chan struct{}
	var ad *addressee
	if sp, ok := w.lk.wait.(spinWait); ok {
		poll = min(poll, sp.interval)
	} else if w.r.join {
		if s = w.sh.subs.subscribe(w.lk.keys.Channel, w.seen(a, err)); s == nil {
			return a, ErrClosed
		}
		switch w.style.wake {
		case wakeAddressed:
			ad = &addressee{wake: make(chan struct{}, 1)}
			wake = ad.wake
			s.address(w.address(), ad, true)
		case wakeOne:
			wake = s.wake
		case wakeReaders:
			if wake = s.readers(); s == w.peeked {
				wake = w.woken
			}
		}
		defer func() {
			if w.style.wake == wakeAddressed {
				s.address(w.address(), ad, false)
			}
			w.sh.subs.unsubscribe(s, !acquired && w.style.wake == wakeOne)
		}()
	}
	// queued is when the last attempt that ran without acquiring was sent. A grant message may
	// be older than that attempt's reply (it comes on another connection), so it is taken as is
	// only when it must be newer (see granted); otherwise the next attempt asks Redis, which
	// finds the grant if it is still this call's.
	var queued time.Time
	if err == nil {
		queued = a.sent
	}
	// check: the subscription was not confirmed yet when this call took it, so the first
	// wake-up is most likely its confirmation, which asks only whether a release before it was
	// missed: a check answers that with a few reads, and a full attempt follows only if it
	// could succeed (see checkOnly).
	check := s != nil && w.style.checks && s.confirms.Load() == 0
	w.queued = w.style.queued
	backoff := newBackoff()
	for {
		if err != nil && !isTransport(err) {
			return a, err
		}
		d := poll
		switch {
		case err != nil:
			d = backoff.next()
		case a.head || !w.style.queued:
			d = min(d, w.leaseBound(a.pttl))
		}
		if err := w.sleep(d, wake); err != nil {
			return attempt{}, err
		}
		if s != nil && w.style.wake == wakeReaders {
			wake = s.readers()
		}
		if ad != nil && !queued.IsZero() {
			if g, ok := w.granted(s.grant(ad), queued); ok {
				if err := w.takeTurn(); err != nil {
					return attempt{}, err // leaving the queue gives the grant back
				}
				acquired = true
				return g, nil
			}
		}
		if check {
			check = false
			if a, err = w.run(checkOnly); err == nil && a.acquired {
				acquired = true
				return a, nil
			}
			if err == nil {
				// The look found the call's place there, or it answers 0 (see checkOnly): no
				// grant for it came before the look, as for an attempt (see granted).
				queued = a.sent
			}
			if err != nil || a.pttl != 0 {
				continue // it found the lock held (or could not tell): sleep as after an attempt
			}
		}
		a, err = w.try()
		if err == nil && a.acquired {
			acquired = true
			return a, nil
		}
		if err == nil {
			queued = a.sent
		}
	}
}

// seen is when the lock was last seen by an attempt that got a reply (a, err): when it was
// sent; zero if it got none.
func (w *waiter) seen(a attempt, err error) time.Time {
	if err != nil {
		return time.Time{}
	}
	return a.sent
}

// granted reads grant, a grant that came in a message addressed to this waiter (see
// wire.ParseMessage), and returns the attempt it amounts to if it is for this call's request and
// provably newer than the last attempt, sent at queued, that found the call waiting: the hold
// started after queued, with the grant's token and claim. Its count is unknown (0): the owner
// may have re-entered since, elsewhere. Otherwise the caller's next attempt decides.
//
// The proof: a grant removes the entry it grants. While only one attempt of this call has put
// its entry in the queue (joins == 1), the request has had one entry, so at most one grant,
// made after that attempt ran; and one made before a later attempt ran would have been found
// by it (acquired) or, gone by then, made it join again (joins 2). A grant from an earlier
// entry (a grant whose claim ran out while its message was on the way, then a new place) is
// never taken so. A grant whose claim would already have ended here is left to the attempt too.
// A look (checkOnly) counts as a later attempt because it finds grants as an attempt does and,
// when the call's place is gone, answers that a take must join again (pttl 0): any new kind of
// request here must do both.
func (w *waiter) granted(grant string, queued time.Time) (attempt, bool) {
	g, ok := wire.ParseGrant(grant)
	if !ok || g.Request != w.r.id || w.joins != 1 {
		// none, not ours to read (the next attempt finds the grant), another call's of the
		// same owner, or maybe stale
		return attempt{}, false
	}
	if !localEnd(queued, g.Claim).After(time.Now()) {
		return attempt{}, false
	}
	return attempt{acquired: true, token: g.Token, sent: queued, claim: g.Claim}, true
}

// takeTurn takes the owner's lane for an attempt, or for a hold that came without one (a
// grant), unless this call holds it already.
func (w *waiter) takeTurn() error {
	if w.lane != nil {
		return nil
	}
	l, err := w.sh.enterLane(w.bound(), w.cmd, w.lk, w.r.owner)
	if err != nil {
		if err == errNoReply || err == ErrClosed {
			w.over = true // the lane was not free, or its settling not done, within the bound
		}
		if w.ctx.Err() != nil {
			err = w.lk.errorf("waiting: %w", err)
		}
		return err
	}
	w.lane = l
	return nil
}

// leaseBound is the longest a waiter sleeps given the holder's remaining lease pttl: just past
// it, so a lost message or an expiry (which publishes nothing) costs at most one lease.
func (w *waiter) leaseBound(pttl time.Duration) time.Duration {
	if pttl < 0 {
		return w.lk.core.opts.WatchdogTimeout // a key without expiry, not made by this library
	}
	return pttl + time.Millisecond
}

// sleep waits for d (cut to the remaining wait), a permit on wake, ctx, or Close. It returns
// the call's error (see ended) at once when the wait has run out or the call is over, and when
// ctx or Close end the wait.
func (w *waiter) sleep(d time.Duration, wake <-chan struct{}) error {
	if w.over {
		return w.ended()
	}
	if w.bounded {
		left := time.Until(w.deadline)
		if left <= 0 {
			return w.ended()
		}
		d = min(d, left)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-wake:
	case <-w.ctx.Done():
		return w.ended()
	case <-w.lk.core.ctx.Done():
		return ErrClosed
	}
	return nil
}

// ended returns the error of a call that ends without a hold: ErrClosed, ctx's error, or
// ErrNotObtained, wrapping the last attempt's transport error too if it could not reach Redis,
// so that "Redis is away" reads apart from "someone else holds it".
func (w *waiter) ended() error {
	if w.lk.core.ctx.Err() != nil {
		return ErrClosed
	}
	format, base := "%w", ErrNotObtained
	if err := w.ctx.Err(); err != nil {
		format, base = "waiting: %w", err
	}
	if w.lastErr != nil {
		return w.lk.errorf(format+" (last attempt: %w)", base, w.lastErr)
	}
	return w.lk.errorf(format, base)
}
