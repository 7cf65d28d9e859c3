package rlock

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// The hold of a MultiLock's set: one hold of every member, each counted in its member's hold
// record (see records.go) as a single Mutex's hold is, and one hold context that carries them
// all. The context is a sub of every member's record (see hold.addSub), so the end of any of
// them ends it; a loss also gives the other members back at once: the record's shard mutex is
// held where a loss is seen, so the loss is left on its lane (see spreader), and the settler,
// which the loss wakes, gives the others back on their own lanes.

// setHold is the hold of one successful Lock of a MultiLock.
type setHold struct {
	ml    *MultiLock
	owner string
	// hcs is what the context carries under each member's key: the member's record and token,
	// in ml.members' order. Its unlock fields are guarded by the member's shard mutex.
	hcs []holdCtx
	// gone marks, per member, a hold the set no longer has to release: lost, given back after
	// another member's loss, or released by ml.Unlock. Guarded by the member's shard mutex.
	gone []bool
	// lost is set once a member was lost (or the hold was dropped before it was handed out):
	// the other members are given back once (see spread).
	lost   atomic.Bool
	cancel context.CancelCauseFunc // ends the set's context (its base) with a cause
	// fixedEnd is the earliest local lease end (UnixNano) of a member with a fixed lease (0:
	// none), and fixedCause the cause that ends the context then.
	fixedEnd   int64
	fixedCause error
	// next is the earliest end of a member the clock check found last (UnixNano): the context
	// is live before it, since ends only move later.
	next atomic.Int64
}

// setKey finds, in a context, the setHold of one MultiLock.
type setKey struct{ ml *MultiLock }

// setCtx is the set's hold context: it carries each member's hold (as a single hold context
// does, under the member's key) and the owner, and checks the clock against the earliest end of
// its members on every Err, Done and Value (see clocked).
type setCtx struct {
	context.Context // the base, and its deadline layer with fixed leases
	s               *setHold
}

// check ends the context if the clock has passed the local lease end of one of its members.
func (c *setCtx) check() {
	s := c.s
	now := time.Now().UnixNano()
	if now < s.next.Load() {
		return
	}
	end, cause := s.fixedEnd, s.fixedCause
	for i := range s.hcs {
		if e := s.hcs[i].h.endNano.Load(); (end == 0 || e < end) && !s.ml.members[i].fixed() {
			end, cause = e, ErrLockLost
		}
	}
	if now >= end {
		if c.Context.Err() == nil {
			s.cancel(cause)
		}
		return
	}
	s.next.Store(end)
}

func (c *setCtx) Done() <-chan struct{} {
	c.check()
	return c.Context.Done()
}

// Err is the base's error, but a fixed lease that the clock ended reports
// context.DeadlineExceeded, as the deadline's timer would have.
func (c *setCtx) Err() error {
	c.check()
	err := c.Context.Err()
	if err == context.Canceled {
		if _, ok := context.Cause(c.Context).(*leaseEnd); ok {
			return context.DeadlineExceeded
		}
	}
	return err
}

func (c *setCtx) Value(key any) any {
	c.check()
	s := c.s
	switch k := key.(type) {
	case holdCtxKey:
		if k.c == &s.ml.c.core {
			if i, ok := s.ml.index[k.key]; ok {
				return &s.hcs[i]
			}
		}
	case ownerKey:
		return s.owner
	case setKey:
		if k.ml == s.ml {
			return s
		}
	}
	return c.Context.Value(key)
}

// String names the context for %v, without calling Err.
func (c *setCtx) String() string { return "rlock multilock hold context" }

// heldSet returns the set hold of ml that ctx carries, or nil.
func heldSet(ctx context.Context, ml *MultiLock) *setHold {
	s, _ := ctx.Value(setKey{ml}).(*setHold)
	return s
}

// newSetHold makes the hold context of owner's set of ml from parent, whose members' holds are
// recs (each a current record of the shard of its member) in runs runs, with tokens and local lease ends
// ends. It reports false, ending what it made, when one of the records had ended by the time
// its shard's mutex was taken: the caller takes that member again.
func newSetHold(parent context.Context, ml *MultiLock, owner string, recs []*hold, runs []*accessHold, tokens []int64, ends []time.Time) (context.Context, bool) {
	n := len(ml.members)
	s := &setHold{ml: ml, owner: owner, hcs: make([]holdCtx, n), gone: make([]bool, n)}
	base, cancel := context.WithCancelCause(parent)
	s.cancel = cancel
	for i, m := range ml.members {
		if m.fixed() && (s.fixedEnd == 0 || ends[i].UnixNano() < s.fixedEnd) {
			s.fixedEnd, s.fixedCause = ends[i].UnixNano(), &leaseEnd{run: runs[i], deadline: ends[i]}
		}
	}
	ctx := base
	if s.fixedEnd != 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithDeadlineCause(base, time.Unix(0, s.fixedEnd), s.fixedCause)
		_ = stop // its timer goes when the deadline passes or base ends, whichever is first
	}
	for i, m := range ml.members {
		h, sh := recs[i], m.sh
		sh.mu.Lock()
		live := sh.holds.current(h) && h.acc[exclusive] == runs[i] && h.live()
		if live {
			s.hcs[i] = holdCtx{h: h, run: runs[i], acc: exclusive, token: tokens[i], trip: cancel}
			h.addSub(sub{ctx: base, cancel: s.lossFn(i, sh)})
		}
		sh.mu.Unlock()
		if !live {
			s.lost.Store(true) // never spread: the caller still counts these holds
			cancel(context.Canceled)
			return nil, false
		}
	}
	return &setCtx{Context: ctx, s: s}, true
}

// fixed reports whether m's holds have a fixed lease (no watchdog).
func (m *Mutex) fixed() bool { return m.lease > 0 }

// lossFn is the cancellation of the set's context that member i's record (of shard sh) calls
// when it ends, with sh's mutex held: it ends the context with the record's cause, and a loss
// (ErrLockLost) leaves the give-back of the other members on member i's lane (see spread) and
// has the settler see to it at once.
func (s *setHold) lossFn(i int, sh *shard) context.CancelCauseFunc {
	return func(cause error) {
		s.cancel(cause)
		if !errors.Is(cause, ErrLockLost) {
			return
		}
		s.gone[i] = true
		if s.lost.CompareAndSwap(false, true) {
			m := s.ml.members[i]
			sh.lanes.spreadLoss(holdKey{m.keys.Lock, s.owner}, s)
			s.ml.c.settleSoon()
		}
	}
}

// spread gives back, after a loss, every member the set still holds: one hold of each is
// taken off its record (a record left with none ends lost, so that an Unlock through the set's
// context reports ErrLockLost and touches nothing) and owed on its lane, which is settled at
// once if nobody is using it, else by its user's next request or the settler. It takes the
// members' shard mutexes one at a time.
func (s *setHold) spread(cmd context.Context) {
	var owed []int
	for i, m := range s.ml.members {
		sh := m.sh
		sh.mu.Lock()
		if !s.gone[i] {
			s.gone[i] = true
			if h := s.hcs[i].h; sh.holds.current(h) && h.acc[exclusive] == s.hcs[i].run && h.live() {
				l := sh.lanes.of(holdKey{m.keys.Lock, s.owner})
				l.owed[exclusive]++
				l.lk = &m.lock
				if h.acc[exclusive].count > 1 {
					h.acc[exclusive].count--
				} else {
					sh.lose(h)
				}
				owed = append(owed, i)
			}
		}
		sh.unlockAndDeliver()
	}
	for _, i := range owed {
		m := s.ml.members[i]
		m.sh.trySettle(cmd, holdKey{m.keys.Lock, s.owner})
	}
}
