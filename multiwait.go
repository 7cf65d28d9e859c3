package rlock

import (
	"context"
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
	join     bool // wait (not a single attempt): join the blocking member's queue
	bounded  bool // TryLock: give up at deadline
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
	if !ok {
		owner = req // as a Mutex's fresh owner: nobody else can hold as it (see lib.lua)
	}
	n := len(ml.members)
	w := &setWaiter{ml: ml, ctx: ctx, cmd: detach(ctx), owner: owner, req: req, join: !bounded || wait != 0,
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
			return nil, ml.errorf("%w (last attempt: %w)", ErrNotObtained, err)
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
			Request: w.req, Mode: wire.Take, FairWaitMs: ml.c.fairWaitMs, Join: join && g == from,
			Members: grp.specs}.Strings()})
	}
	if join {
		w.queued = from // (a place is left when its group is taken, or the call ends)
	}
	replicated := ml.tryGroups(w.cmd, calls)

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

// giveBack releases the holds of group g that an attempt took and that were not registered
// (taken out of order, or too few replicas acknowledged them), on the lanes this call holds;
// what it cannot release within releaseWait is owed on the lanes.
func (w *setWaiter) giveBack(g int) {
	ml := w.ml
	grp := &ml.groups[g]
	gc := groupCall{g: g, keys: grp.keys, args: wire.MultiReleaseArgs{Owner: w.owner, Request: ml.c.requestID(),
		Message: wire.UnlockMessage, Members: grp.specs}.Strings()}
	calls := []groupCall{gc}
	ml.runReleases(within(releaseWait), w.cmd, calls)
	if calls[0].err == nil {
		return
	}
	for i := grp.from; i < grp.to; i++ {
		w.owe(i)
	}
}

// owe leaves the give-back of the set's hold of member i, which it took and did not register,
// on the member's lane (this call holds its turn).
func (w *setWaiter) owe(i int) {
	m := w.ml.members[i]
	m.sh.mu.Lock()
	w.lanes[i].owed[exclusive]++
	w.lanes[i].lk = &m.lock
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
// handing a member it headed and left free on, retrying transport errors for releaseWait; a
// place it cannot remove expires FairWaitTimeout after its last attempt.
func (w *setWaiter) leave() {
	g := w.queued
	if g < 0 {
		return
	}
	w.queued = -1
	ml := w.ml
	grp := &ml.groups[g]
	args := wire.MultiLeaveArgs{Owner: w.owner, Request: w.req, Members: grp.specs}.Strings()
	err := ml.c.retryWithin(within(releaseWait), func() error {
		return ml.c.variant(wire.MultiLeave).Exec(w.cmd, ml.c.rc, grp.keys, args).Error()
	})
	if err != nil {
		ml.c.opts.Logger.Warn("rlock: leaving a queue failed; the entry expires by itself",
			"lock", ml.members[grp.from].name, "error", err)
	}
}

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
		return w.sleep(w.backoff.next(), nil)
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
	return w.sleep(d, wake)
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
		if w.sub = m.sh.subs.subscribe(m.keys.Channel); w.sub == nil {
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
// those end the wait.
func (w *setWaiter) sleep(d time.Duration, wake <-chan struct{}) error {
	ml := w.ml
	if w.bounded {
		left := time.Until(w.deadline)
		if left <= 0 {
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
		return ml.errorf("waiting: %w", w.ctx.Err())
	case <-ml.c.ctx.Done():
		return ErrClosed
	}
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
