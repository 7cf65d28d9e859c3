package rlock

import (
	"context"
	"errors"
	"time"

	"github.com/rlock-go/rlock/internal/wire"
)

// An election is a fair Mutex whose hold is a term (internal/wire/lua/el_*.lua): candidates
// queue in the order they began to campaign, the leader's hold is its term, and the scripts that
// grant the lead (a Campaign that finds it free, or a release that hands it to the next
// candidate: Resign, a candidate that gives up, a forced end) write the leader record beside the
// hold: the value observers see and the term, a number from the fencing counter and the server's
// clock, whichever is larger, so terms rise even after a restart or failover lost the counter.
// Observers hear of new leaders, proclaims and vacancies on a channel of their own (see
// observe.go), so that candidates are not woken by them. Every Campaign is a candidate of its
// own, named by the call's request id, whatever owner the caller's context carries.

// Election is a leader election on a name: at most one candidate leads at a time, in terms that
// fence its writes. It holds only the name and settings and is safe to share between
// goroutines. Create one with [Client.NewElection].
type Election struct {
	locker
}

// maxValue is the largest value a candidate may campaign or proclaim with.
const maxValue = 4 << 10

// NewElection returns the election called name. It does not touch Redis. [WithLease] gives
// terms a fixed lease instead of the watchdog's, [WithWait] sets how candidates wait, and
// [WithFencing] is implied (terms are fencing tokens). An empty name or an invalid option is
// reported by every method as an error wrapping [ErrInvalid]. An election's keys are its own
// kind: a Mutex, RWMutex or Semaphore on the same name gets an error wrapping ErrInvalid, and
// the other way round.
func (c *Client) NewElection(name string, opts ...MutexOption) *Election {
	e := new(Election)
	c.bind(&e.locker, KindElection, name, newElectionKind, opts)
	e.ownerless, e.fencing = true, true
	return e
}

// electionKind is an election: the fair Mutex's keys, and the leader channel.
type electionKind struct {
	lk        *lock
	sh        *shard   // the client's state about the name: a Resign finds its term there
	keys      []string // every election script that writes: wire.Keys.Election
	renewKeys []string
}

func newElectionKind(h *locker) kind {
	return &electionKind{lk: &h.lock, sh: h.sh, keys: h.keys.Election(), renewKeys: h.keys.Renew(false)}
}

func (*electionKind) name() string { return KindElection }

func (*electionKind) style(access) waitStyle { return waitStyle{wake: wakeAddressed, queued: true} }

func (k *electionKind) acquire(ctx context.Context, r request) (attempt, error) {
	lk := k.lk
	a := attempt{sent: time.Now()}
	reply, err := lk.core.eval(ctx, r.conn, wire.Campaign, k.keys, wire.CampaignArgs{
		Candidate: r.owner, LeaseMs: lk.leaseMs, Mode: modeArg[r.mode], FairWaitMs: lk.core.fairWaitMs,
		Join: r.join, ClaimMs: lk.claimMs, Value: r.value, Label: r.label}.Strings()).AsIntSlice()
	if err != nil {
		return a, lk.redisErr("campaign", err)
	}
	return lk.parseAttempt(a, reply)
}

// release ends the term of candidate cand: el_resign.lua with the term this process recorded
// for it. Without one (a hold given back before it was registered, or whose record has ended)
// it runs el_leave.lua, which gives back whatever cand leads: a candidate leads at most one
// term, so either ends that term and no other.
func (k *electionKind) release(ctx context.Context, cand string, _ access, _ string) (releaseReply, error) {
	c := k.lk.core
	var term int64
	k.sh.mu.Lock()
	if h := k.sh.holds.get(holdKey{k.lk.keys.Lock, cand}); h != nil {
		term = h.token
	}
	k.sh.mu.Unlock()
	if term == 0 {
		n, err := c.variant(wire.ElectionLeave).Exec(ctx, c.rc, k.keys,
			wire.ElectionLeaveArgs{Candidate: cand, ClaimMs: k.lk.claimMs}.Strings()).AsInt64()
		switch {
		case err != nil:
			return releaseReply{}, err
		case n == 1:
			return releaseReply{}, nil
		}
		return releaseReply{left: -1, total: -1}, nil
	}
	r, err := c.variant(wire.Resign).Exec(ctx, c.rc, k.keys, wire.ResignArgs{Candidate: cand, Term: term}.Strings()).AsIntSlice()
	if err != nil {
		return releaseReply{}, err
	}
	tc, err := wire.ParseTermCheck(r)
	switch {
	case err != nil:
		return releaseReply{}, badReply(err)
	case !tc.Current:
		return releaseReply{left: -1, total: -1}, nil
	}
	return releaseReply{woken: tc.Told}, nil
}

func (k *electionKind) dequeue(ctx context.Context, r request) error {
	lk := k.lk
	return lk.core.variant(wire.ElectionLeave).Exec(ctx, lk.core.rc, k.keys,
		wire.ElectionLeaveArgs{Candidate: r.owner, ClaimMs: lk.claimMs, Value: r.value,
			Label: r.label}.Strings()).Error()
}

func (k *electionKind) renewal() (wire.Script, []string) { return wire.Renew, k.renewKeys }

func (*electionKind) renewOwner(owner string, _ access) string { return owner }

func (*electionKind) checkKind() string { return wire.CheckMutex }

func (k *electionKind) force() (wire.Script, []string, []string) {
	return wire.ElectionForceUnlock, k.keys, wire.NoArgs{}.Strings()
}

// Name returns the election's name.
func (e *Election) Name() string { return e.name }

// checkValue returns an error wrapping ErrInvalid for a value over maxValue bytes.
func (e *Election) checkValue(value string) error {
	if e.err == nil && len(value) > maxValue {
		return e.errorf("%w", invalidf("value of %d bytes is over %d", len(value), maxValue))
	}
	return nil
}

// Campaign makes a new candidate with value and blocks until it leads, ctx is done, or the
// Client is closed. Every call is a candidate of its own, whatever owner ctx carries (the hold
// context carries that owner on, not the candidate's), so two callers with the same value or
// owner are two candidates and never both lead. Candidates lead in the order their Campaign
// began; a leader's Resign hands the lead to the next one directly. value (at most 4 KiB; may
// be empty) is what [Election.Leader] and [Election.Observe] show while the candidate leads.
//
// It returns the term context: a hold context in every respect (see [Mutex.Lock]): derived
// from ctx, renewed by the watchdog (or ending at a [WithLease] lease), cancelled with cause
// [ErrLockLost] when the term is lost and with [context.Canceled] once Resign has ended it, and
// never live past its local lease end. [Election.Term] reads its term. On error the context is
// nil and the candidate has left: it leads nothing and waits nowhere; the error is ctx's,
// [ErrClosed], an error wrapping [ErrInvalid] (a value over 4 KiB, a key of another kind at the
// name) or [ErrNotReplicated], or a Redis error reply.
func (e *Election) Campaign(ctx context.Context, value string) (context.Context, error) {
	if err := e.checkValue(value); err != nil {
		return nil, err
	}
	return e.observeCall(ctx, OpCampaign, exclusive, 0, value, false, 0)
}

// TryCampaign is [Election.Campaign] that gives up after wait with [ErrNotObtained]; wait 0
// makes a single attempt, which leads only when nobody leads or waits. A wait that ends leaves
// nothing in Redis (no candidate, no subscription).
func (e *Election) TryCampaign(ctx context.Context, value string, wait time.Duration) (context.Context, error) {
	if err := e.checkValue(value); err != nil {
		return nil, err
	}
	return e.observeCall(ctx, OpCampaign, exclusive, 0, value, true, wait)
}

// Resign ends the term that term (a term context, or one derived from it) carries, if it is
// still the current one in Redis, and hands the lead to the next candidate in the same step;
// observers see the new leader, or a vacancy when nobody waits. The term context is then
// cancelled with [context.Canceled]. It ignores term's cancellation for the resignation
// itself, retrying transport errors under one request id, so a retried Resign never resigns
// twice, nor a later term. Otherwise it changes nothing and returns [ErrLockLost] (this process
// led, but the term's lease had gone: it may have overlapped the next leader's) or
// [ErrNotHeld] (resigned already, or term carries no term of e). After a transport error the
// request stays pending and is settled before this candidate's next request, as for
// [Mutex.Unlock].
func (e *Election) Resign(term context.Context) error {
	return e.observeRelease(term, OpResign, exclusive)
}

// Proclaim sets the value that observers see of the term that term carries, if that term is
// still the current one in Redis; the term stays. It makes one round trip (transport errors
// retried for a few seconds), whatever term's cancellation. Otherwise it changes nothing and
// returns [ErrLockLost] (the term was lost: its lease had gone; its context is then cancelled
// so) or [ErrNotHeld] (resigned already, or term carries no term of e). A value over 4 KiB is
// an error wrapping [ErrInvalid].
func (e *Election) Proclaim(term context.Context, value string) error {
	lk, sh := &e.lock, e.sh
	if err := lk.check(term); err != nil {
		return err
	}
	if err := e.checkValue(value); err != nil {
		return err
	}
	hc := heldIn(term, lk)
	if hc == nil {
		return lk.errorf("%w: the context carries no term; pass the context that Campaign returned", ErrNotHeld)
	}
	h := hc.h
	cmd := detach(term)
	b := within(releaseWait)
	l, err := sh.lanes.take(b, holdKey{lk.keys.Lock, h.owner})
	if err != nil {
		return lk.errorf("proclaim: %w", err)
	}
	held, err := sh.settleWithin(b, cmd, l)
	if err != nil {
		if held {
			sh.lanes.exit(l)
		}
		return lk.errorf("proclaim: %w", err)
	}
	if err := e.leading(h); err != nil {
		sh.lanes.exit(l)
		return err
	}
	c := lk.core
	var tc wire.TermCheck
	held, err = sh.callWithin(b, cmd, l, func(ctx context.Context) error {
		r, err := c.variant(wire.Proclaim).Exec(ctx, c.rc, e.keys.Election(),
			wire.ProclaimArgs{Candidate: h.owner, Term: hc.token, Value: value}.Strings()).AsIntSlice()
		if err == nil {
			tc, err = wire.ParseTermCheck(r)
			err = badReply(err)
		}
		return err
	})
	if held {
		sh.lanes.exit(l)
	}
	if err != nil {
		return lk.redisErr("proclaim", err)
	}
	if tc.Current {
		return nil
	}
	sh.mu.Lock()
	defer sh.unlockAndDeliver()
	switch {
	case h.lost:
	case sh.holds.current(h) && h.live():
		// Redis no longer has this term: it was lost (its lease ran out there, a forced end,
		// a restart or failover) before this process learnt of it.
		sh.lose(h)
	default:
		return lk.errorf("%w", ErrNotHeld)
	}
	return lk.errorf("%w", ErrLockLost)
}

// leading returns nil if h, this process's record of a term, still leads as far as this
// process knows, else ErrLockLost or ErrNotHeld as Proclaim reports them.
func (e *Election) leading(h *hold) error {
	sh := e.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	switch {
	case h.lost || h.acc[exclusive].lost:
		return e.errorf("%w", ErrLockLost)
	case !sh.holds.current(h) || h.acc[exclusive].count == 0:
		return e.errorf("%w", ErrNotHeld)
	case !h.validIn(exclusive):
		return e.errorf("%w", ErrLockLost) // its lease ended here; the reaper has not come round yet
	}
	return nil
}

// Term returns the term that term (a term context, or one derived from it) carries, and true;
// or (0, false) for a context that carries no term of e. It does not block.
func (e *Election) Term(term context.Context) (int64, bool) { return tokenOf(term, &e.lock) }

// Leadership is who leads an election, as Redis had it at one instant.
type Leadership struct {
	Value string        // what the leader campaigned with or last proclaimed
	Term  int64         // the leader's term; 0: nobody leads
	Lease time.Duration // lease left in Redis (server time); 0 when nobody leads, -1 for a key without expiry (never made by rlock)
}

// Leader reads who leads e in one read-only round trip bounded by ctx (a read-only script: it
// also works on a replica), changing nothing. A zero Leadership means nobody leads; that is not
// an error. Errors: [ErrClosed], an error wrapping [ErrInvalid] (an invalid name, or a key of
// another type or lock kind at the name), or a Redis or transport error.
func (e *Election) Leader(ctx context.Context) (Leadership, error) {
	if err := e.check(ctx); err != nil {
		return Leadership{}, err
	}
	var l wire.Leadership
	err := e.core.read(ctx, func(ctx context.Context) error {
		v, err := e.core.variant(wire.ReadLeader).Exec(ctx, e.core.rc, e.keys.Leadership(), wire.NoArgs{}.Strings()).ToArray()
		if err == nil {
			l, err = wire.ParseLeadership(v)
		}
		return err
	})
	if err != nil {
		return Leadership{}, e.redisErr("leader", badReply(err))
	}
	return Leadership{Value: l.Value, Term: l.Term, Lease: l.Lease}, nil
}

// readLeader runs el_leader.lua under ctx.
func (e *Election) readLeader(ctx context.Context) (Leadership, error) {
	c := e.core
	v, err := c.variant(wire.ReadLeader).Exec(ctx, c.rc, e.keys.Leadership(), wire.NoArgs{}.Strings()).ToArray()
	var l wire.Leadership
	if err == nil {
		l, err = wire.ParseLeadership(v)
	}
	if err != nil {
		return Leadership{}, e.redisErr("leader", badReply(err))
	}
	return Leadership{Value: l.Value, Term: l.Term, Lease: l.Lease}, nil
}

// State returns e's leader as its one [Holder] (Owner: the candidate id; Count 1), its
// candidates in the order they will lead as its Waiters, and the last term handed out as Token,
// as [Mutex.State] does. The leader's value is [Election.Leader]'s.
func (e *Election) State(ctx context.Context) (State, error) { return e.state(ctx) }

// Run campaigns with value, calls lead with the term context once it leads, and when lead
// returns resigns (if it still leads) and campaigns again, until ctx is done or lead returns a
// non-nil error while its term was live. It returns ctx's error in the first case and lead's
// error in the second; [ErrClosed] when the Client closes, and an error wrapping [ErrInvalid]
// for invalid arguments. lead must return soon after its term context is done: the term was
// lost (cause [ErrLockLost]) or ctx ended; Run waits for it before it campaigns again, so its
// own terms never overlap, and a lost term is not an error (Run campaigns again). Other
// errors of a Campaign (Redis error replies, [ErrNotReplicated]) are logged and the Campaign
// retried after a back-off of up to a second. When Run returns it leads no more: a term it
// still held is resigned (also when lead panics).
func (e *Election) Run(ctx context.Context, value string, lead func(term context.Context) error) error {
	if e.err == nil && lead == nil {
		return e.errorf("%w", invalidf("nil lead function"))
	}
	var held context.Context // the term Run leads with, while lead runs
	defer func() {
		if held != nil {
			_ = e.Resign(held) // lead panicked
		}
	}()
	backoff := newBackoff()
	for {
		term, err := e.Campaign(ctx, value)
		if err != nil {
			if ctx != nil && ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, ErrClosed) || errors.Is(err, ErrInvalid) {
				return err
			}
			e.core.opts.Logger.Warn("rlock: campaign failed; campaigning again", "election", e.name, "error", err)
			t := time.NewTimer(backoff.next())
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
			continue
		}
		backoff = newBackoff()
		var leadErr error
		if ctx.Err() == nil {
			held = term
			leadErr = lead(term)
		}
		live := term.Err() == nil
		held = nil
		rerr := e.Resign(term) // ErrLockLost, ErrNotHeld: the term had ended already
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case leadErr != nil && live:
			return leadErr
		case errors.Is(rerr, ErrClosed):
			return rerr
		}
	}
}
