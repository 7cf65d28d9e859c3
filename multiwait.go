package rlock

import (
	"context"
	"slices"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock/internal/wire"
)

// setWaiter is one Lock or TryLock of a MultiLock: rounds of group attempts, each round on the
// owner's lanes of its members (taken in the members' order, so calls of one owner never wait
// for each other's lanes in a cycle), and waits on the member that blocks the first group not
// held. All its attempts carry one request id, whose queue entries are the set's. An attempt
// whose reply was lost is left on its members' lanes to be resolved (and its holds given back)
// before the next request on them: a group is always taken by an attempt whose reply arrived.
type setWaiter struct {
	ml       *MultiLock
	ctx      context.Context
	cmd      context.Context // the Redis commands' context: ctx without its cancellation
	owner    string
	req      string
	label    string // WithLabel's, of every member's hold and of the set's wait; "": none
	join     bool   // wait (not a single attempt): join the blocking member's queue
	bounded  bool   // TryLock: give up at deadline
	deadline time.Time

	// per member: the record that counts the set's hold (nil: not held), its token and its
	// local lease end
	recs   []*hold
	runs   []*accessHold // the run of each member's record that the set's hold joined
	tokens []int64
	ends   []time.Time
	lanes  []*lane // per member: its lane while this call holds its turn
	next   int     // the groups before next are held
	// queued is the group in whose blocking member's queue the set may hold a place; -1: none.
	queued int
	// arrived is the group on whose fair members' channels the set is arriving (see arrivals),
	// so that a wake-up sent before it listens is kept; -1: none.
	arrived int

	// the wait on the member that blocks: its index, its subscription and, for a fair one, the
	// set's address on it
	on      int
	sub     *subscription
	ad      *addressee
	backoff *backoff
}

// acquire is Lock (bounded false) and TryLock (bounded: give up after wait).
func (ml *MultiLock) acquire(ctx context.Context, bounded bool, wait time.Duration) (context.Context, error) {
	if err := ml.check(ctx); err != nil {
		return nil, err
	}
	if bounded && wait < 0 {
		return nil, ml.errorf("%w", invalidf("negative wait %v", wait))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := ml.c
	req := c.requestID()
	owner, ok, err := ml.callerOwner(ctx)
	if err != nil {
		return nil, err
	}
	label, err := labelOf(ctx)
	if err != nil {
		return nil, ml.errorf("%w", err)
	}
	if !ok {
		owner = req // as a Mutex's fresh owner: nobody else can hold as it (see lib.lua)
	}
	n := len(ml.members)
	w := &setWaiter{ml: ml, ctx: ctx, cmd: detach(ctx), owner: owner, req: req, label: label, join: !bounded || wait != 0,
		bounded: bounded, recs: make([]*hold, n), runs: make([]*accessHold, n), tokens: make([]int64, n), ends: make([]time.Time, n),
		lanes: make([]*lane, n), queued: -1, arrived: -1, on: -1, backoff: newBackoff()}
	if bounded {
		w.deadline = time.Now().Add(wait)
	}
	noticed := c.watchers.notices()
	held, err := w.run()
	w.stopListening()
	w.depart()
	if err != nil {
		w.giveUp()
		return nil, err
	}
	if c.watchers.notices() != noticed {
		// A watcher noticed a restart or failover while this call ran: its check may have
		// looked before these holds were registered (see Client.watchers).
		c.watchers.verifyNow()
	}
	return held, nil
}

// run takes the groups in order until it holds every one and returns their hold context.
// Every round tries the first group not held, and, after the set got further, every group
// after it at once: the groups it takes before the first that blocks are kept, those it took
// after it are given back (taken out of order). It then waits on the member that blocks that
// group. A group held before whose member was lost meanwhile is taken again, with every group
// after it.
func (w *setWaiter) run() (context.Context, error) {
	ml := w.ml
	whole := true // the next round tries every group from next on
	for {
		if g := w.firstLost(); g >= 0 {
			w.rollBack(g)
			whole = true
		}
		if w.next == len(ml.groups) {
			if held, ok := newSetHold(w.ctx, ml, w.owner, w.recs, w.runs, w.tokens, w.ends); ok {
				return held, nil
			}
			continue // a member was lost meanwhile: firstLost finds it
		}
		to := w.next + 1
		if whole {
			to = len(ml.groups)
		}
		g, a, err := w.round(w.next, to)
		whole = false
		switch {
		case err != nil && (!isTransport(err) || g < 0):
			// g < 0 with an error: every group was taken but one could not be kept (ctx ended
			// or the client closed while it was registered), which isTransport takes for a
			// transport error: retrying would take and give back the groups for ever.
			return nil, err
		case g < 0:
			continue // every group of the round was taken and kept
		case !w.join && err != nil:
			return nil, ml.errorf("%w (last attempt: %w)", ErrNotObtained, attemptErr(err))
		case !w.join:
			return nil, ml.errorf("%w", ErrNotObtained)
		case err == nil && w.queued != g && ml.fair[w.blocker(g, a)]:
			continue // tried without joining (the set got further meanwhile): join its queue now
		}
		if err := w.wait(g, a, err); err != nil {
			return nil, err
		}
	}
}

// blocker returns the index of the member that blocked group g in attempt a.
func (w *setWaiter) blocker(g int, a wire.MultiAttempt) int { return w.ml.groups[g].from + a.Blocked }

// round tries groups from..to-1 at once (the first joins the blocking member's queue if the
// call waits) on their members' lanes, keeps the ones taken before the first that was not
// (next moves past them), and gives back the ones taken after it. It returns that group and its
// attempt (or its transport error), or -1 when every group was taken and kept. Any other error
// ends the call.
func (w *setWaiter) round(from, to int) (int, wire.MultiAttempt, error) {
	ml := w.ml
	defer w.exitLanes()
	if err := w.enterLanes(from, to); err != nil {
		return from, wire.MultiAttempt{}, err
	}
	join := w.join
	if join {
		w.arrive(from)
	}
	calls := make([]*groupCall, 0, to-from)
	for g := from; g < to; g++ {
		grp := &ml.groups[g]
		calls = append(calls, &groupCall{g: g, keys: grp.keys, args: wire.MultiAcquireArgs{Owner: w.owner,
			Request: w.req, Mode: wire.Take, FairWaitMs: ml.c.fairWaitMs, Join: join && g == from, Label: w.label,
			Members: grp.specs}.Strings()})
	}
	if join {
		w.queued = from // (a place is left when its group is taken, or the call ends)
	}
	// The attempts are a kept flight bounded by the call (see bound.go): if Redis does not
	// answer in time the call leaves them, and once they return what they took is given back
	// (or, their reply lost, resolved) on the lanes, which go with the flight.
	var replicated []error
	held := w.lanes[ml.groups[from].from:ml.groups[to-1].to]
	if err := ml.c.flyKept(w.bound(), w.cmd, func(ctx context.Context) { replicated = ml.tryGroups(ctx, calls) },
		ml.orphaned(w.owner, w.req, calls, slices.Clone(held))); err != nil {
		clear(held) // the flight's now
		return from, wire.MultiAttempt{}, err
	}

	first, firstA, firstErr := -1, wire.MultiAttempt{}, error(nil)
	var failed error // a Redis error, or a hold too few replicas acknowledged: the call ends
	for k, gc := range calls {
		grp := &ml.groups[gc.g]
		var a wire.MultiAttempt
		err := gc.err
		if err == nil {
			var perr error
			if a, perr = wire.ParseMultiAttempt(gc.reply, grp.to-grp.from); perr != nil {
				err = ml.errorf("acquire: %w", errBadReply)
			}
		} else if !isTransport(err) {
			err = ml.redisErr("acquire", err)
		}
		switch {
		case isTransport(err):
			w.lostAttempt(gc.g) // resolved, and given back if it ran, before the next request
		case err == nil && a.Acquired && replicated[k] != nil:
			w.giveBack(gc.g)
			err = ml.errorf("%w", replicated[k])
		case err == nil && a.Acquired && !a.Held(grp.to-grp.from):
			// A replayed request whose hold has gone since: given back, taken again.
			w.giveBack(gc.g)
			a = wire.MultiAttempt{Blocked: 0}
		case err == nil && a.Acquired && first < 0 && failed == nil:
			if err = w.keep(gc.g, a, gc.sent); err != nil {
				failed = err
			}
			continue
		case err == nil && a.Acquired:
			w.giveBack(gc.g) // taken out of order
			continue
		}
		if err != nil && !isTransport(err) && failed == nil {
			failed = err
		}
		if first < 0 {
			first, firstA, firstErr = gc.g, a, err
		}
	}
	if failed != nil {
		return first, firstA, failed
	}
	if first == from && firstErr == nil && !ml.fair[w.blocker(first, firstA)] {
		w.queued = -1 // blocked by a plain member: the script left every place of the group
	}
	return first, firstA, firstErr
}

// tryGroups runs the acquire attempt of every call (see MultiLock.exec), sets each call's
// reply, error and send time, and returns, per call, an error wrapping ErrNotReplicated for a
// group with a new hold that too few replicas acknowledged (Options.SyncReplicas: each group
// runs on a connection of its own, followed by WAIT, one after another).
func (ml *MultiLock) tryGroups(cmd context.Context, calls []*groupCall) []error {
	c := ml.c
	short := make([]error, len(calls))
	if c.opts.SyncReplicas == 0 {
		ml.exec(cmd, wire.MultiAcquire, calls)
		return short
	}
	v := c.variant(wire.MultiAcquire)
	for k, gc := range calls {
		n := ml.groups[gc.g].to - ml.groups[gc.g].from
		_ = c.rc.Dedicated(func(d rueidis.DedicatedClient) error {
			gc.sent = time.Now()
			gc.reply, gc.err = v.ExecOn(cmd, d, gc.keys, gc.args).AsIntSlice()
			if gc.err != nil {
				return nil
			}
			a, err := wire.ParseMultiAttempt(gc.reply, n)
			if err != nil || !a.Acquired || !a.New(n) {
				return nil // no new hold: nothing to wait for
			}
			short[k] = c.notReplicated("the hold", d.Do(cmd, c.waitReplicas(d.B())))
			return nil
		})
	}
	return short
}

// keep registers the set's hold of every member of group g, which attempt a (sent at sent)
// took, and moves next past g. If ctx ended or the client closed meanwhile, the holds not
// registered are owed on their lanes (given back when the call ends) and that error returned.
func (w *setWaiter) keep(g int, a wire.MultiAttempt, sent time.Time) error {
	ml := w.ml
	c := ml.c
	grp := &ml.groups[g]
	for i := grp.from; i < grp.to; i++ {
		m := ml.members[i]
		at := attempt{acquired: true, count: a.Count(i - grp.from), token: a.Token(i - grp.from), sent: sent}
		m.sh.mu.Lock()
		h, run, end, r, err := m.sh.record(w.ctx, &m.lock, w.owner, exclusive, at)
		if err != nil {
			m.sh.mu.Unlock()
			for j := i; j < grp.to; j++ {
				w.owe(j)
			}
			return err
		}
		m.sh.unlockAndDeliver()
		w.recs[i], w.runs[i], w.tokens[i], w.ends[i] = h, run, at.token, end
		if r.first {
			c.watchers.firstHold()
		}
		if r.moved {
			c.reaper.holdEnds(r.end)
		}
	}
	if w.queued == g {
		w.queued = -1 // the script left the set's place when it took the group
	}
	if w.arrived == g {
		w.depart()
	}
	w.next = g + 1
	return nil
}

// bound is how long one step of the call waits for Redis (see bound.go): until the TryLock's
// deadline, or the context's; SyncTimeout more when replicas must acknowledge.
func (w *setWaiter) bound() bound {
	b := bound{ctx: w.ctx}
	if w.bounded {
		b.end = w.deadline
	}
	if d, ok := w.ctx.Deadline(); ok && (b.end.IsZero() || d.Before(b.end)) {
		b.end = d
	}
	if o := w.ml.c.opts; o.SyncReplicas > 0 && !b.end.IsZero() {
		b.end = b.end.Add(o.SyncTimeout)
	}
	return b
}

// orphaned returns what a round's attempts (calls, of owner's request req) do once they return
// after their caller left them (see round): the holds of a group they took are owed on its
// members' lanes (given back), a group whose reply was lost is resolved on them, and the lanes,
// whose turns the flight has (lanes: the round's, from its first group's first member on), are
// given back, waking the settler.
func (ml *MultiLock) orphaned(owner, req string, calls []*groupCall, lanes []*lane) func() {
	return func() {
		base := ml.groups[calls[0].g].from
		for _, gc := range calls {
			grp := &ml.groups[gc.g]
			var a wire.MultiAttempt
			err := gc.err
			if err == nil {
				a, err = wire.ParseMultiAttempt(gc.reply, grp.to-grp.from)
			}
			for i := grp.from; i < grp.to; i++ {
				m, l := ml.members[i], lanes[i-base]
				m.sh.mu.Lock()
				switch {
				case isTransport(err):
					l.lostAcquire = request{owner: owner, id: req, mode: resolveOnly, access: exclusive}
					l.lk = &m.lock
				case err == nil && a.Acquired:
					l.owed[exclusive]++
					l.lk = &m.lock
				}
				m.sh.mu.Unlock()
			}
		}
		for k, l := range lanes {
			ml.members[base+k].sh.lanes.exit(l)
		}
		ml.c.settleSoon()
	}
}
