package rlock

// A MultiLock's group scripts run in pipelines, and the release of a set's holds.

import (
	"context"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock/internal/wire"
)

// errNone is a member's outcome in release when the call had nothing of it to release: a hold
// of the set that is gone already.
var errNone = ErrNotHeld

// release releases one hold of owner on each member in idx (ascending), through the set hold s
// (nil: none), group by group in one pipeline, with commands under cmd, and returns each
// member's outcome, in idx's order: nil, or an error as [Mutex.Unlock] returns it. It takes
// the members' lanes in order, settling what they carry first.
func (ml *MultiLock) release(cmd context.Context, owner string, s *setHold, idx []int) []error {
	out := make([]error, len(idx))
	lanes := make([]*lane, len(idx))
	exitLanes := func() {
		for j, l := range lanes {
			if l != nil {
				ml.members[idx[j]].sh.lanes.exit(l)
			}
		}
	}
	flown := false // a flight left in Redis' hands has the lanes
	defer func() {
		if !flown {
			exitLanes()
		}
	}()
	b := within(releaseWait)
	for j, i := range idx {
		m := ml.members[i]
		l, err := m.sh.lanes.take(b, holdKey{m.keys.Lock, owner})
		if err != nil {
			return fill(out, ml.errorf("release: %w", err))
		}
		held, err := m.sh.settleWithin(b, cmd, l)
		if held {
			lanes[j] = l
		}
		if err != nil {
			return fill(out, ml.errorf("release: %w", err))
		}
	}

	// What each member releases: a settled outcome of an earlier try is its retry's; a hold
	// whose loss was seen is not touched in Redis.
	type sending struct {
		j   int // in idx
		hc  *holdCtx
		rec *hold
		p   pendingRelease
	}
	byGroup := make([][]sending, len(ml.groups))
	g := 0
	for j, i := range idx {
		m := ml.members[i]
		var hc *holdCtx
		if s != nil {
			hc = &s.hcs[i]
		}
		m.sh.mu.Lock()
		if res, ok := lanes[j].takeOutcome(hc, exclusive); ok {
			out[j] = res
		} else if s != nil && s.gone[i] {
			out[j] = errNone
		} else if run := hc.lostRun(exclusive); run != nil {
			s.gone[i] = true
			run.count--
			out[j] = m.errorf("%w", ErrLockLost)
		} else {
			if s != nil {
				s.gone[i] = true
			}
			rec := m.sh.holds.get(holdKey{m.keys.Lock, owner})
			if rec != nil {
				rec.releasing++
			}
			for ml.groups[g].to <= i {
				g++
			}
			byGroup[g] = append(byGroup[g], sending{j: j, hc: hc, rec: rec,
				p: pendingRelease{validAtSend: rec.validIn(exclusive)}})
		}
		m.sh.mu.Unlock()
	}

	// One request per group, retried with its id (a retry never releases twice).
	var sends []groupCall
	for g, ss := range byGroup {
		if len(ss) == 0 {
			continue
		}
		req := ml.c.requestID()
		var specs []string
		gc := groupCall{g: g}
		for k, e := range ss {
			i := idx[e.j]
			gc.keys = append(gc.keys, ml.members[i].keys.Member()...)
			specs = append(specs, ml.groups[g].specs[i-ml.groups[g].from])
			ss[k].p.request = req
		}
		gc.args = wire.MultiReleaseArgs{Owner: owner, Request: req, Message: wire.UnlockMessage, Members: specs}.Strings()
		sends = append(sends, gc)
	}
	sent := time.Now()
	// A flight bounded by b (see bound.go). If Redis does not answer in time, every request
	// may run yet, and the lanes go with the flight: once it returns, keepAll leaves each
	// member's request on its lane (see keepUnlock), for its retry or the settler, before the
	// flight gives the lanes back, so that nobody finds a lane without its request.
	keepAll := func() {
		for _, ss := range byGroup {
			for _, e := range ss {
				m := ml.members[idx[e.j]]
				e.p.ambiguous = true
				m.sh.mu.Lock()
				if e.rec != nil {
					e.rec.releasing--
				}
				lanes[e.j].keepUnlock(&m.lock, exclusive, e.p, e.rec, e.hc)
				m.sh.unlockAndDeliver()
			}
		}
	}
	if err := ml.c.flyOrClosed(b, cmd, func(ctx context.Context) { ml.runReleases(b, ctx, sends) }, func() {
		keepAll()
		exitLanes()
		ml.c.settleSoon()
	}); err != nil {
		flown = true
		for _, ss := range byGroup {
			for _, e := range ss {
				out[e.j] = ml.redisErr("release", err)
			}
		}
		return out
	}
	rtt := time.Since(sent)

	for _, gc := range sends {
		ss := byGroup[gc.g]
		rel, err := wire.ParseMultiRelease(gc.reply, len(ss))
		if gc.err == nil && err != nil {
			gc.err = badReply(err)
		}
		for k, e := range ss {
			i := idx[e.j]
			m := ml.members[i]
			if gc.ambiguous {
				e.p.ambiguous = true
			}
			m.sh.mu.Lock()
			if e.rec != nil {
				e.rec.releasing--
			}
			if gc.err != nil {
				if e.p.ambiguous {
					lanes[e.j].keepUnlock(&m.lock, exclusive, e.p, e.rec, e.hc)
				}
				out[e.j] = ml.redisErr("release", attemptErr(gc.err))
				m.sh.unlockAndDeliver()
				continue
			}
			left := rel.Left(k)
			out[e.j] = m.sh.applyRelease(&m.lock, e.rec, exclusive, e.p, releaseReply{left: left, total: left})
			m.sh.unlockAndDeliver()
			if left == 0 && !ml.fair[i] {
				m.sh.courtesy.open(&m.lock, rel.Woken(k), rtt)
			}
		}
	}
	return out
}

// fill sets every entry of out to err and returns out.
func fill(out []error, err error) []error {
	for j := range out {
		out[j] = err
	}
	return out
}

// groupCall is one group script of a set: its keys and arguments, and its outcome.
type groupCall struct {
	g         int // the group
	keys      []string
	args      []string
	reply     []int64
	err       error
	sent      time.Time // when its last try was sent
	ambiguous bool      // a try's reply was lost: the request may have run
}

// runReleases runs every call in calls (multi_release.lua) in one pipeline (one round trip
// per node), retrying those that fail in transport, with their request ids, for
// b's end. Commands run under cmd without its cancellation.
func (ml *MultiLock) runReleases(b bound, cmd context.Context, calls []groupCall) {
	ctx := detach(cmd)
	_ = ml.c.retryWithin(b, func() error {
		var todo []*groupCall
		for k := range calls {
			if gc := &calls[k]; gc.reply == nil && (gc.err == nil || isTransport(gc.err)) {
				todo = append(todo, gc)
			}
		}
		if len(todo) == 0 {
			return nil
		}
		ml.exec(ctx, wire.MultiRelease, todo)
		var last error
		for _, gc := range todo {
			if isTransport(gc.err) {
				gc.ambiguous, last = true, gc.err
			}
		}
		return last
	})
}

// exec runs script s for every call in calls under ctx: one EVALSHA (EVAL if the node lacks
// the script) for one call, else one pipeline (one round trip per node), and the calls whose
// node lacked the script again one by one. It sets each call's reply, error and send time.
func (ml *MultiLock) exec(ctx context.Context, s wire.Script, calls []*groupCall) {
	c := ml.c
	v := c.variant(s)
	sent := time.Now()
	if len(calls) == 1 {
		gc := calls[0]
		gc.sent = sent
		gc.reply, gc.err = v.Exec(ctx, c.rc, gc.keys, gc.args).AsIntSlice()
		return
	}
	cmds := make(rueidis.Commands, len(calls))
	for k, gc := range calls {
		cmds[k] = v.EvalSHA(c.rc.B(), gc.keys, gc.args)
	}
	for k, res := range c.rc.DoMulti(ctx, cmds...) {
		gc := calls[k]
		gc.sent = sent
		gc.reply, gc.err = res.AsIntSlice()
		if re, ok := rueidis.IsRedisErr(gc.err); ok && re.IsNoScript() {
			gc.sent = time.Now()
			gc.reply, gc.err = v.Exec(ctx, c.rc, gc.keys, gc.args).AsIntSlice()
		}
	}
}
