package rlock

import (
	"container/list"
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlock-go/rlock/internal/wire"
)

// How messages on a lock's channel (see wire.ParseMessage) wake this client's waiters: an
// unlock message ("0") leaves one permit that one waiter takes, a readers message wakes every
// waiting reader, an addressed message (a fair waiter's grant or turn) wakes the waiters at
// that address, and a (re)confirmed subscription, after which messages may have been missed,
// wakes one waiter of each sort. The subscriptions themselves are in pubsub.go.

// subscription is this client's one subscription to a lock channel, shared by all local
// waiters of that lock and reference-counted under the mutex of the lock's shard. It runs on
// rueidis' multiplexed pub/sub, so it costs no connection of its own.
type subscription struct {
	channel   string
	shardMu   *sync.Mutex // the mutex of the lock's shard: guards refs and holderEnd
	arrivals  *arrivals   // the shard's arriving fair waiters
	refs      int         // waiters using it
	holderEnd time.Time   // the holder's lease bound as a waiter last saw it

	// wake is the per-name waiter semaphore: an unlock message, or a (re)confirmed
	// subscription after which messages may have been missed, leaves one permit, and one
	// waiter takes it. Extra permits are dropped; a spare one only causes one more attempt.
	wake chan struct{}

	// confirms counts the server's confirmations of s: more than one means its connection
	// broke and rueidis subscribed again (see subscribe).
	confirms atomic.Int32

	mu sync.Mutex
	// all is closed (and replaced) by a readers message or a (re)confirmation: it wakes every
	// waiting reader (see readers).
	all chan struct{}
	// addressed maps an address to its waiters (queued waiters; calls of one owner share it).
	addressed map[string][]*addressee
	// unclaimed remembers addressed messages (their grants, "" for none), and confirmations,
	// for queued waiters of this client that are between their first attempt and their
	// registration (see arrivals).
	unclaimed map[string]string
	// observers get every message and confirmation of an election's leader channel instead
	// (see observe.go); observed is set when the first registers.
	observers []*observation
	observed  atomic.Bool

	// wakeAt is when the last permit was left on wake, in nanoseconds from born (guarded by
	// mu): a waiter that takes s back from idle drops an older permit (see dropStale).
	wakeAt int64
	born   time.Time

	// While s is kept without waiters (see linger.go): its idle period, ended by reuse (gen,
	// guarded by shardMu), its linger timer (guarded by shardMu) and its place in the client's
	// idle list (guarded by idleSubs.mu).
	gen   uint64
	timer *time.Timer
	elem  *list.Element

	ctx    context.Context // cancelled when it is retired or the client closes
	cancel context.CancelFunc
	done   chan struct{} // closed once unsubscribed and the goroutine exited
}

// wakeOne leaves one permit on wake, noting when.
func (s *subscription) wakeOne() {
	s.mu.Lock()
	s.wakeAt = int64(time.Since(s.born))
	permit(s.wake)
	s.mu.Unlock()
}

// dropStale drops the permit left on wake before since (zero: keep it), which a waiter taking
// s back from idle has no use for: the attempt it sent at since saw the lock after the message
// or confirmation that left it (each was received before the attempt was sent, so Redis had
// sent it before it ran the attempt).
func (s *subscription) dropStale(since time.Time) {
	if since.IsZero() {
		return
	}
	s.mu.Lock()
	if s.wakeAt < int64(since.Sub(s.born)) {
		select {
		case <-s.wake:
		default:
		}
	}
	s.mu.Unlock()
}

// addressee is a queued waiter that messages address: its wake-up, and the last grant that
// came for it (guarded by subscription.mu).
type addressee struct {
	wake  chan struct{}
	grant string
}

// grant returns and forgets the last grant that came for a, or "".
func (s *subscription) grant(a *addressee) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := a.grant
	a.grant = ""
	return g
}

// permit posts one wake-up to ch without blocking.
func permit(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// deliver handles a message on the channel (see wire.ParseMessage). It runs on rueidis'
// reader and must not block.
func (s *subscription) deliver(msg string) {
	if s.observed.Load() {
		s.tellObservers(msg)
		return
	}
	kind, addr, grant := wire.ParseMessage(msg)
	if kind != wire.WakeAddressed {
		if kind == wire.WakeReaders {
			s.wakeReaders()
		}
		s.wakeOne()
		return
	}
	if s.tell(addr, grant) || !s.arrivals.has(s.channel, addr) {
		return
	}
	s.mu.Lock()
	if len(s.addressed[addr]) == 0 {
		if s.unclaimed == nil {
			s.unclaimed = make(map[string]string)
		}
		s.unclaimed[addr] = grant
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.tell(addr, grant)
}

// tell wakes every waiter at addr (each checks whether a grant is its own), leaving them
// grant if it is not "", and reports whether there was one.
func (s *subscription) tell(addr, grant string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	as := s.addressed[addr]
	for _, a := range as {
		if grant != "" {
			a.grant = grant
		}
		permit(a.wake)
	}
	return len(as) > 0
}

// confirmed runs when Redis confirms the subscription: an unlock published before that was
// missed, so one waiter (each addressed one, for fair waiters) must try again. So must a queued
// waiter that is arriving but not registered yet (its first attempt's reply is on its way): a
// grant made for it before the subscription was missed too, so it is left a wake-up that its
// registration takes (see address).
func (s *subscription) confirmed() {
	s.confirms.Add(1)
	if s.observed.Load() {
		s.tellObservers("")
		return
	}
	s.wakeOne()
	s.wakeReaders()
	arriving := s.arrivals.on(s.channel)
	s.mu.Lock()
	for _, as := range s.addressed {
		for _, a := range as {
			permit(a.wake)
		}
	}
	for _, addr := range arriving {
		if _, ok := s.unclaimed[addr]; !ok && len(s.addressed[addr]) == 0 {
			if s.unclaimed == nil {
				s.unclaimed = make(map[string]string)
			}
			s.unclaimed[addr] = ""
		}
	}
	s.mu.Unlock()
}

// readers returns the channel that the next readers message closes. A reader takes it before
// an attempt and sleeps on it after, so a message in between is not missed.
func (s *subscription) readers() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.all == nil {
		s.all = make(chan struct{})
	}
	return s.all
}

// wakeReaders wakes every reader sleeping on the channel readers returned.
func (s *subscription) wakeReaders() {
	s.mu.Lock()
	if s.all != nil {
		close(s.all)
		s.all = nil
	}
	s.mu.Unlock()
}

// address registers (add) or removes the queued waiter a at addr.
func (s *subscription) address(addr string, a *addressee, add bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		as := s.addressed[addr]
		for i, x := range as {
			if x == a {
				as = append(as[:i], as[i+1:]...)
				break
			}
		}
		if len(as) == 0 {
			delete(s.addressed, addr)
		} else {
			s.addressed[addr] = as
		}
		return
	}
	if s.addressed == nil {
		s.addressed = make(map[string][]*addressee)
	}
	s.addressed[addr] = append(s.addressed[addr], a)
	if grant, missed := s.unclaimed[addr]; missed {
		delete(s.unclaimed, addr)
		if grant != "" {
			a.grant = grant
		}
		permit(a.wake)
	}
}

// arrivals counts, per channel and owner, the fair waiters of this client that may miss an
// addressed wake-up: from before their first attempt until they leave. Messages for owners
// that are not arriving here are for other clients, and are dropped. It is guarded by mu, the
// shard's mutex.
type arrivals struct {
	mu *sync.Mutex
	m  map[holdKey]int
}

// add counts (delta 1) or uncounts (-1) an arriving waiter for owner on channel, and reports
// whether none is left. Called with a.mu held.
func (a *arrivals) add(channel, owner string, delta int) (gone bool) {
	k := holdKey{channel, owner}
	if a.m == nil {
		a.m = make(map[holdKey]int)
	}
	a.m[k] += delta
	if a.m[k] > 0 {
		return false
	}
	delete(a.m, k)
	return true
}

// on returns the addresses of the fair waiters arriving on channel.
func (a *arrivals) on(channel string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var addrs []string
	for k := range a.m {
		if k.key == channel {
			addrs = append(addrs, k.owner)
		}
	}
	return addrs
}

// has reports whether a fair waiter for owner on channel is arriving.
func (a *arrivals) has(channel, owner string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.m[holdKey{channel, owner}] > 0
}

// forget drops what s kept for owner, whose arrival ended.
func (s *subscription) forget(owner string) {
	s.mu.Lock()
	delete(s.unclaimed, owner)
	s.mu.Unlock()
}

// noteHolder records, for waiters that join s later, that the holder's lease bound is d from
// now.
func (s *subscription) noteHolder(d time.Duration) {
	s.shardMu.Lock()
	s.holderEnd = time.Now().Add(d)
	s.shardMu.Unlock()
}
