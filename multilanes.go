package rlock

// The members' lanes that a MultiLock call holds, and what it gives back on them: holds taken
// out of order or lost, holds it cannot keep, its queue place.

import (
	"context"
	"slices"

	"github.com/rlock-go/rlock/internal/wire"
)

// giveBack releases the holds of group g that an attempt took and that were not registered
// (taken out of order, or too few replicas acknowledged them), on the lanes this call holds;
// what it cannot release within releaseWait is owed on the lanes. The release is a flight
// bounded by releaseWait and the call's own bound (see bound.go): if Redis does not answer in
// time, the call leaves it, and the group's lanes go with it. It is kept (see flyKept): once
// its reply comes, what it could not release is owed on them before they are given back.
func (w *setWaiter) giveBack(g int) {
	ml := w.ml
	grp := &ml.groups[g]
	gc := groupCall{g: g, keys: grp.keys, args: wire.MultiReleaseArgs{Owner: w.owner, Request: ml.c.requestID(),
		Message: wire.UnlockMessage, Members: grp.specs}.Strings()}
	calls := []groupCall{gc}
	b := within(releaseWait)
	if cb := w.bound(); !cb.end.IsZero() && cb.end.Before(b.end) {
		b.end = cb.end // within the call's own bound too
	}
	lanes := slices.Clone(w.lanes[grp.from:grp.to])
	if err := ml.c.flyKeptOrClosed(b, w.cmd, func(ctx context.Context) { ml.runReleases(b, ctx, calls) }, func() {
		for k, l := range lanes {
			m := ml.members[grp.from+k]
			if calls[0].err != nil {
				oweMember(m, l)
			}
			m.sh.lanes.exit(l)
		}
		ml.c.settleSoon()
	}); err != nil {
		clear(w.lanes[grp.from:grp.to]) // the flight's now
		return
	}
	if calls[0].err == nil {
		return
	}
	for i := grp.from; i < grp.to; i++ {
		w.owe(i)
	}
}

// owe leaves the give-back of the set's hold of member i, which it took and did not register,
// on the member's lane (this call holds its turn).
func (w *setWaiter) owe(i int) { oweMember(w.ml.members[i], w.lanes[i]) }

// oweMember leaves the give-back of a set's hold of member m, taken and not registered, on l,
// m's lane of the set's owner, whose turn the caller (or a flight it left) holds.
func oweMember(m *Mutex, l *lane) {
	m.sh.mu.Lock()
	l.owed[exclusive]++
	l.lk = &m.lock
	m.sh.mu.Unlock()
}

// lostAttempt leaves the attempt of group g whose reply was lost on its members' lanes: the
// next request on each resolves it (with the member's own acquire script, which reads the
// records the group script writes) and gives back a hold it took.
func (w *setWaiter) lostAttempt(g int) {
	ml := w.ml
	grp := &ml.groups[g]
	for i := grp.from; i < grp.to; i++ {
		m := ml.members[i]
		m.sh.mu.Lock()
		w.lanes[i].lostAcquire = request{owner: w.owner, id: w.req, mode: resolveOnly, access: exclusive}
		w.lanes[i].lk = &m.lock
		m.sh.mu.Unlock()
	}
}

// enterLanes takes the owner's lane of every member of groups from..to-1, in order, settling
// the work each carries. On error it holds none.
func (w *setWaiter) enterLanes(from, to int) error {
	ml := w.ml
	for i := ml.groups[from].from; i < ml.groups[to-1].to; i++ {
		m := ml.members[i]
		l, err := m.sh.enterLane(w.bound(), w.cmd, &m.lock, w.owner)
		if err != nil {
			w.exitLanes()
			if w.ctx.Err() != nil {
				err = ml.errorf("waiting: %w", err)
			}
			return err
		}
		w.lanes[i] = l
	}
	return nil
}

// exitLanes gives up the turn of every lane this call holds.
func (w *setWaiter) exitLanes() {
	for i, l := range w.lanes {
		if l != nil {
			w.ml.members[i].sh.lanes.exit(l)
			w.lanes[i] = nil
		}
	}
}

// firstLost returns the first group held whose member's hold has ended since (lost, or
// released elsewhere), or -1.
func (w *setWaiter) firstLost() int {
	ml := w.ml
	for g := 0; g < w.next; g++ {
		for i := ml.groups[g].from; i < ml.groups[g].to; i++ {
			m, h := ml.members[i], w.recs[i]
			m.sh.mu.Lock()
			ended := !m.sh.holds.current(h) || h.acc[exclusive] != w.runs[i] || !h.live()
			m.sh.mu.Unlock()
			if ended {
				return g
			}
		}
	}
	return -1
}

// rollBack gives back the groups from g on that the set holds (the members still held), so
// that it takes them again in order.
func (w *setWaiter) rollBack(g int) {
	w.leave()
	w.releaseHeld(w.ml.groups[g].from)
	w.next = g
}

// releaseHeld releases the set's holds of the members from from on.
func (w *setWaiter) releaseHeld(from int) {
	var idx []int
	for i := from; i < len(w.recs); i++ {
		if w.recs[i] != nil {
			idx = append(idx, i)
			w.recs[i] = nil
		}
	}
	if len(idx) > 0 {
		w.ml.release(w.cmd, w.owner, nil, idx)
	}
}

// giveUp undoes what a call that fails did: it releases every group held, leaves the queue
// the set may hold a place in, and settles what its attempts left on the members' lanes, each
// within releaseWait (what is left then, the settler settles).
func (w *setWaiter) giveUp() {
	w.releaseHeld(0)
	w.leave()
	for _, m := range w.ml.members {
		hk := holdKey{m.keys.Lock, w.owner}
		m.sh.mu.Lock()
		l := m.sh.lanes.m[hk]
		work := l != nil && l.work()
		m.sh.mu.Unlock()
		if !work {
			continue
		}
		b := within(releaseWait)
		if l, err := m.sh.lanes.take(b, hk); err == nil {
			if held, _ := m.sh.settleWithin(b, w.cmd, l); held {
				m.sh.lanes.exit(l)
			}
		}
	}
}

// leave removes the set's place from the queue of the group it may hold one in (multi_leave.lua),
// handing a member it headed and left free on, retrying transport errors within the call's bound; a
// place it cannot remove expires FairWaitTimeout after its last attempt.
func (w *setWaiter) leave() {
	g := w.queued
	if g < 0 {
		return
	}
	w.queued = -1
	ml := w.ml
	grp := &ml.groups[g]
	args := wire.MultiLeaveArgs{Owner: w.owner, Request: w.req, Label: w.label, Members: grp.specs}.Strings()
	// A flight bounded by the call's end (replyGrace past it, for a call that is ending): a
	// place it could not remove in time lapses by itself.
	b := w.bound()
	var landed error
	err := ml.c.flyOrClosed(b, w.cmd, func(ctx context.Context) {
		landed = ml.c.retryWithin(b, func() error {
			return ml.c.variant(wire.MultiLeave).Exec(ctx, ml.c.rc, grp.keys, args).Error()
		})
	}, nil)
	if err == nil {
		err = landed
	}
	if err != nil {
		ml.c.opts.Logger.Warn("rlock: leaving a queue failed; the entry expires by itself",
			"lock", ml.members[grp.from].name, "error", err)
	}
}
