package rlock

import (
	"context"
	"sync"
	"time"

	"github.com/rlock-go/rlock/internal/wire"
)

// How an election is observed. Each Observe call has a goroutine of its own (in the Client's
// WaitGroup, joined on Close) on the client's shared subscription to the election's leader
// channel (pubsub.go), where the scripts publish new leaders, proclaims and vacancies (see
// wire.ParseLeaderMessage). It keeps what it delivered (a view) and applies to it, in term
// order, those messages and reads of the leadership (el_leader.lua): one at the start, one
// after every (re)confirmed subscription (messages may have been missed while it was down), and
// one at the lease end of the leader it last saw, since a lease that runs out publishes
// nothing. A read and the messages that arrive while it runs may come in any order: the read
// is applied first, and in full only if no message came meanwhile (else only a newer term it
// shows, and it is read again).

// observation is one Observe call's inbox: the messages of the leader channel, in order, and
// whether the leadership must be read.
type observation struct {
	mu     sync.Mutex
	msgs   []string
	reread bool   // a (re)confirmed subscription, or an inbox that overflowed
	got    uint64 // pushes so far: a read is fresh when none came while it ran
	wake   chan struct{}
}

// inboxSize is the most messages an observation keeps; past it they are dropped and the
// leadership read instead.
const inboxSize = 64

// push adds msg to o's inbox; "" is a (re)confirmed subscription. It never blocks.
func (o *observation) push(msg string) {
	o.mu.Lock()
	switch {
	case msg == "":
		o.reread = true
	case len(o.msgs) == inboxSize:
		o.msgs, o.reread = o.msgs[:0], true
	default:
		o.msgs = append(o.msgs, msg)
	}
	o.got++
	o.mu.Unlock()
	permit(o.wake)
}

// take empties o's inbox.
func (o *observation) take() (msgs []string, reread bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	msgs, reread = o.msgs, o.reread
	o.msgs, o.reread = nil, false
	return msgs, reread
}

// pushes returns how many pushes o has had.
func (o *observation) pushes() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.got
}

// tellObservers pushes msg ("": a confirmation) to every observation of s.
func (s *subscription) tellObservers(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.observers {
		o.push(msg)
	}
}

// observe registers (add) or removes o on s, a leader channel's subscription.
func (s *subscription) observe(o *observation, add bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		s.observers = append(s.observers, o)
		s.observed.Store(true)
		return
	}
	for i, x := range s.observers {
		if x == o {
			s.observers = append(s.observers[:i], s.observers[i+1:]...)
			break
		}
	}
}

// view is the leadership an Observe call has delivered.
type view struct {
	term   int64 // the latest term seen; 0: none yet
	value  string
	vacant bool // that term has ended (or nobody led when it was first read)
	shown  bool // something has been delivered
}

// lead applies "the leader of term leads with value" (a proclaim, or a read), and reports
// whether it changed the view: a newer term, or a new value of the term it shows live. A term
// seen ended never leads again.
func (v *view) lead(term int64, value string) bool {
	switch {
	case term > v.term:
		v.term, v.value, v.vacant = term, value, false
		return true
	case term == v.term && !v.vacant && value != v.value:
		v.value = value
		return true
	}
	return false
}

// vacate applies "the leader of term is gone", and reports whether it changed the view.
func (v *view) vacate(term int64) bool {
	if term > v.term || term == v.term && !v.vacant {
		v.term, v.value, v.vacant = term, "", true
		return true
	}
	return false
}

// Observe returns a channel that delivers who leads e at once, then every change: a new
// leader, a [Election.Proclaim], and a vacancy (the zero [Leadership]) when a leader resigns or
// its lease runs out, within a second of the change in Redis. A slow reader may miss
// intermediate values but always receives the latest, and the terms of the leaders delivered on
// one channel never go backwards. The channel is closed only when ctx is done or the Client is
// closed (at once for an invalid name or option, a nil ctx, or a closed Client), never on a
// transient error: a lost subscription, a restart or a failover is recovered from, and the
// leadership read again (a key of another kind at the name is logged and read again every
// second). It costs a goroutine of the Client while it runs, and shares one subscription per
// name with the Client's other observers.
func (e *Election) Observe(ctx context.Context) <-chan Leadership {
	out := make(chan Leadership)
	c, sh := e.c, e.sh
	if e.check(ctx) != nil {
		close(out)
		return out
	}
	// Under the shard's mutex, as subscribe's: Close takes it after closed is set, so this
	// goroutine is in the WaitGroup before Close waits.
	sh.mu.Lock()
	if c.closed.Load() {
		sh.mu.Unlock()
		close(out)
		return out
	}
	c.wg.Add(1)
	sh.mu.Unlock()
	go e.observe(ctx, out)
	return out
}

// observe is an Observe call's goroutine.
func (e *Election) observe(ctx context.Context, out chan<- Leadership) {
	c := e.c
	defer c.wg.Done()
	defer close(out)
	// Its reads end with ctx or the client, cancelled, never by a deadline (which would close a
	// connection under every other call on it; see giveUpAfter).
	octx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	defer context.AfterFunc(c.ctx, cancel)()
	s := e.sh.subs.subscribe(e.keys.Leader, time.Time{})
	if s == nil {
		return
	}
	o := &observation{wake: make(chan struct{}, 1)}
	s.observe(o, true)
	defer func() {
		s.observe(o, false)
		e.sh.subs.unsubscribe(s, false)
	}()

	var v view
	var latest Leadership // delivered next, while pending
	pending := false
	show := func(l Leadership) {
		latest, pending, v.shown = l, true, true
	}
	leaseEnd := time.NewTimer(time.Hour)
	leaseEnd.Stop()
	defer leaseEnd.Stop()
	// until re-reads at the end of lease (a leader's lease left; -1: no expiry), or not at all
	// (vacant).
	until := func(lease time.Duration) {
		leaseEnd.Stop()
		switch {
		case v.vacant:
		case lease < 0:
			leaseEnd.Reset(c.opts.WatchdogTimeout)
		default:
			leaseEnd.Reset(lease + 2*time.Millisecond)
		}
	}
	apply := func(msg string) {
		m, ok := wire.ParseLeaderMessage(msg)
		if !ok {
			return
		}
		var changed bool
		switch m.Kind {
		case wire.NewLeader:
			if changed = m.Term > v.term; changed {
				v.lead(m.Term, m.Value)
			}
		case wire.Proclaimed:
			changed = v.lead(m.Term, m.Value)
		case wire.Vacant:
			if changed = v.vacate(m.Term); changed {
				show(Leadership{})
				until(0)
			}
			return
		}
		if changed {
			show(Leadership{Value: m.Value, Term: m.Term, Lease: m.Lease})
			until(m.Lease)
		}
	}
	drain := func() (reread bool) {
		msgs, reread := o.take()
		for _, m := range msgs {
			apply(m)
		}
		return reread
	}

	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	backoff := newBackoff()
	warned := false
	read, overtaken := true, 0
	for {
		if drain() {
			read = true
		}
		if read {
			read = false
			before := o.pushes()
			rctx, stop := giveUpAfter(octx, 2*time.Second)
			l, err := e.readLeader(rctx)
			stop()
			switch {
			case octx.Err() != nil:
				return
			case err != nil:
				if !isTransport(err) && !warned {
					warned = true
					c.opts.Logger.Warn("rlock: reading an election's leader failed; retrying", "election", e.name, "error", err)
				}
				retry.Reset(backoff.next())
			default:
				backoff = newBackoff()
				fresh := o.pushes() == before || overtaken >= 3
				overtaken++
				if fresh {
					overtaken = 0
				} else {
					read = true // messages came meanwhile: read again once they are applied
				}
				switch {
				case l.Term > v.term:
					v.lead(l.Term, l.Value)
					show(Leadership{Value: l.Value, Term: l.Term, Lease: l.Lease})
					until(l.Lease)
				case !fresh:
				case l.Term == 0 || l.Term < v.term:
					// Nobody leads, or a lower term after a restart or failover to a replica
					// that missed the later ones: the leader seen last is gone.
					if v.vacate(v.term) || !v.shown {
						show(Leadership{})
					}
					until(0)
				default: // the term seen last
					if v.lead(l.Term, l.Value) || !v.shown {
						show(Leadership{Value: l.Value, Term: l.Term, Lease: l.Lease})
					}
					until(l.Lease)
				}
				if drain() {
					read = true
				}
			}
			if read {
				continue
			}
		}
		var send chan<- Leadership
		if pending {
			send = out
		}
		select {
		case <-octx.Done():
			return
		case <-o.wake:
		case <-leaseEnd.C:
			read = true
		case <-retry.C:
			read = true
		case send <- latest:
			pending = false
		}
	}
}
