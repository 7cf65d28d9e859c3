package rlock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock/internal/wire"
)

// renewer renews this process's watchdog holds for the watchdog (see watchdog.go).
type renewer struct {
	c      *core
	shards *shards
	flying *renewFlights // the slots whose renewal is in flight
}

// renewBatch is the most holds one renewal script extends (Redisson's lockWatchdogBatchSize).
const renewBatch = 100

// renew extends the lease of every watchdog hold (claimedOnly: of those granted with a
// claim and not yet renewed), in scripts of at most renewBatch keys grouped by kind and hash
// slot (on a cluster), one pipeline per slot, sent at once: rueidis writes the commands that
// wait for one connection together, so a period still costs about one round trip per node,
// and a node that does not answer holds up no other node's renewals. A hold is lost (its
// contexts cancelled with ErrLockLost) when Redis says its owner is gone. It reports whether
// every script ran within a period; a failure is logged (see quietLog), and the watchdog
// retries soon.
func (rn renewer) renew(claimedOnly bool) bool { return rn.renewWithin(claimedOnly, 0) }

// renewWithin is renew that gives up on the renewal after giveUp (0: as renew does).
func (rn renewer) renewWithin(claimedOnly bool, giveUp time.Duration) bool {
	c := rn.c
	type group struct {
		script wire.Script
		slot   uint16
	}
	bySlot := make(map[group][]renewee)
	now := time.Now()
	// The renewal is worth waiting for until the last of these holds would end anyway (the
	// reaper ends each at its local end, whatever the renewal does, and a hold it ended that
	// the renewal extended after all is given back), and at least a third of the lease: a
	// period's pipeline of many scripts on a busy server may take longer than that.
	wait := c.lease / 3
	rn.shards.each(func(sh *shard) {
		for h := range sh.holds.all() {
			if !h.renews || !h.claimed && claimedOnly {
				continue
			}
			script, _ := h.lk.kind.renewal()
			g := group{script, c.slotOf(h.key)}
			for i, s := range h.acc {
				if s.count > 0 && s.renews && !s.lost {
					bySlot[g] = append(bySlot[g], renewee{sh, h, access(i), s})
					wait = max(wait, s.expires.Sub(now))
				}
			}
		}
	})

	bySlotChunks := make(map[uint16][]renewChunk)
	for g, holds := range bySlot {
		for len(holds) > 0 {
			n := min(len(holds), renewBatch)
			bySlotChunks[g.slot] = append(bySlotChunks[g.slot], renewChunk{g.script, g.slot, holds[:n]})
			holds = holds[n:]
		}
	}
	if len(bySlotChunks) == 0 {
		return true
	}
	if giveUp > 0 {
		wait = giveUp
	}
	// One pipeline per slot, each on a goroutine of its own with its own give-up, its outcome
	// applied when it lands: a node that does not answer (stalled, or in a handshake, which
	// rueidis bounds by its dial timeout alone) holds up the renewals of no other node. The
	// watchdog waits for them a period at most (giveUp, if set); a slot whose renewal is still
	// in flight is skipped until it lands.
	done := make(chan bool, len(bySlotChunks))
	launched, ok := 0, true
	for slot, chunks := range bySlotChunks {
		if !rn.flying.start(slot) {
			ok = false
			continue
		}
		if !c.startFlight() {
			rn.flying.end(slot)
			return false // closed
		}
		launched++
		go func() {
			defer c.wg.Done()
			defer rn.flying.end(slot)
			ctx, cancel := giveUpAfter(c.ctx, min(wait, c.lease))
			defer cancel()
			done <- rn.renewSlot(ctx, chunks)
		}()
	}
	limit := time.NewTimer(min(wait, c.lease/3))
	defer limit.Stop()
	for ; launched > 0; launched-- {
		select {
		case landed := <-done:
			ok = landed && ok
		case <-limit.C:
			return false
		case <-c.ctx.Done():
			return false
		}
	}
	return ok
}

// renewSlot sends the renewal scripts of chunks, all of one slot, in one pipeline under ctx,
// applies their outcome and reports whether every script ran (see renew).
func (rn renewer) renewSlot(ctx context.Context, chunks []renewChunk) bool {
	c := rn.c
	slot := chunks[0].slot
	sent := time.Now()
	results := rn.send(ctx, chunks)
	var missing []renewChunk // chunks whose script a node lacked (restarted, SCRIPT FLUSH)
	ok := true
	for i, r := range chunks {
		if re, isRedis := rueidis.IsRedisErr(results[i].err); isRedis && re.IsNoScript() {
			missing = append(missing, r)
			continue
		}
		ok = rn.apply(slot, r.holds, sent, results[i].renewed, results[i].err) && ok
	}
	if len(missing) > 0 {
		// Load each missing script on every node once, then send those chunks again.
		loaded := make(map[string]bool)
		for _, r := range missing {
			if src := c.variant(r.script).Source(); !loaded[src] {
				loaded[src] = true
				for _, n := range c.rc.Nodes() {
					_ = n.Do(ctx, n.B().ScriptLoad().Script(src).Build()).Error()
				}
			}
		}
		sent = time.Now()
		results = rn.send(ctx, missing)
		for i, r := range missing {
			ok = rn.apply(slot, r.holds, sent, results[i].renewed, results[i].err) && ok
		}
	}
	if ok && !c.log.calm() {
		key, attrs := c.nodes.logKey("renewal", slot, false)
		c.log.ok(key, "rlock: lease renewal succeeds again", attrs...)
	}
	return ok
}

// renewFlights is the set of slots whose renewal is in flight (see renewWithin).
type renewFlights struct {
	mu sync.Mutex
	m  map[uint16]bool
}

// start adds slot to the set, unless it is there: then it reports false.
func (f *renewFlights) start(slot uint16) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m[slot] {
		return false
	}
	if f.m == nil {
		f.m = make(map[uint16]bool)
	}
	f.m[slot] = true
	return true
}

// end removes slot from the set.
func (f *renewFlights) end(slot uint16) {
	f.mu.Lock()
	delete(f.m, slot)
	f.mu.Unlock()
}

// renewReply is the outcome of one renewal script: per hold, 1 if renewed.
type renewReply struct {
	renewed []int64
	err     error
}

// send sends the renewal scripts of chunks in one pipeline (EVALSHA). With
// Options.SyncReplicas, the scripts of each slot go out on a connection of their own followed
// by WAIT, and a renewal that too few replicas acknowledged fails (with ErrNotReplicated): a
// lease extended only on a primary that may be about to lose it does not count, so the hold
// ends at its local end unless a later renewal reaches the replicas.
func (rn renewer) send(ctx context.Context, chunks []renewChunk) []renewReply {
	c := rn.c
	cmds := make(rueidis.Commands, len(chunks))
	for i, r := range chunks {
		keys, args := r.args(c)
		cmds[i] = c.variant(r.script).EvalSHA(c.rc.B(), keys, args)
	}
	out := make([]renewReply, len(chunks))
	if c.opts.SyncReplicas == 0 {
		for i, res := range c.rc.DoMulti(ctx, cmds...) {
			out[i].renewed, out[i].err = res.AsIntSlice()
		}
		return out
	}
	// Redis counts acknowledgements per connection, and a rueidis dedicated connection on a
	// cluster serves one slot: one connection per slot (one in all, off a cluster).
	bySlot := make(map[uint16][]int)
	for i, r := range chunks {
		bySlot[r.slot] = append(bySlot[r.slot], i)
	}
	for _, idx := range bySlot {
		group := make(rueidis.Commands, 0, len(idx)+1)
		for _, i := range idx {
			group = append(group, cmds[i])
		}
		group = append(group, c.waitReplicas(c.rc.B()))
		_ = c.rc.Dedicated(func(d rueidis.DedicatedClient) error {
			res := d.DoMulti(ctx, group...)
			short := c.notReplicated("the renewal", res[len(idx)])
			for j, i := range idx {
				if out[i].renewed, out[i].err = res[j].AsIntSlice(); out[i].err == nil {
					out[i].err = short
				}
			}
			return nil
		})
	}
	return out
}

// renewChunk is one renewal script: holds of one kind and slot.
type renewChunk struct {
	script wire.Script
	slot   uint16 // its holds' slot (see slotOf)
	holds  []renewee
}

// renewee is what one renewal extends: the holds of a record in one access (an RWMutex renews
// an owner's read and write leases apart; the other kinds have one access), those of one run:
// its outcome is that run's, not a later one's that the owner started meanwhile.
type renewee struct {
	sh  *shard // h's shard
	h   *hold
	acc access
	run *accessHold // h's run in acc when the renewal was sent
}

// args returns the script's keys (each hold's, as its kind names them) and arguments (the
// lease, then each hold's owner as its kind names it: an RWMutex's is its lease field, "r:"
// or "w:" and the owner).
func (r renewChunk) args(c *core) (keys, args []string) {
	keys = make([]string, 0, 2*len(r.holds))
	a := wire.RenewArgs{LeaseMs: c.leaseMs, Owners: make([]string, 0, len(r.holds))}
	for _, e := range r.holds {
		_, hk := e.h.lk.kind.renewal()
		keys = append(keys, hk...)
		a.Owners = append(a.Owners, e.h.lk.kind.renewOwner(e.h.owner, e.acc))
	}
	return keys, a.Strings()
}

// apply applies the outcome of one renewal script for holds on slot, sent at sent, and reports
// whether it ran.
func (rn renewer) apply(slot uint16, holds []renewee, sent time.Time, reply []int64, err error) bool {
	c := rn.c
	renewed, bad := wire.ParsePerHold(reply, len(holds))
	if err == nil && bad != nil {
		err = errBadReply
	}
	if errors.Is(err, ErrNotReplicated) && bad == nil {
		// The script ran on the primary: remember which holds it extended there.
		for i, e := range holds {
			if !renewed.Held(i) {
				continue
			}
			h, s, sh := e.h, e.run, e.sh
			sh.mu.Lock()
			if (h.lost || s.lost) && !s.unacked {
				rn.giveBack(e) // ended while this renewal was in flight (as below)
			}
			s.unacked = true
			sh.mu.Unlock()
		}
	}
	if err != nil {
		if c.ctx.Err() == nil {
			key, attrs := c.nodes.logKey("renewal", slot, true)
			c.log.fail(key, "rlock: lease renewal failed; retrying soon", err,
				append(attrs, "locks", len(holds), "first", holds[0].h.lk.name)...)
			if c.obs != nil {
				c.obs.Event(Event{Type: EventRenewalFailed, Lock: holds[0].h.lk.info(), Cause: err, Locks: len(holds)})
			}
		}
		return false
	}
	end := localEnd(sent, c.lease)
	for i, e := range holds {
		e.sh.mu.Lock()
		rn.applyOne(e, renewed.Held(i), end)
		e.sh.unlockAndDeliver()
	}
	return true
}

// applyOne applies a renewal's outcome to the run of holds e: renewed until end (or later:
// Redis never shortens a lease), or not renewed. An outcome for a run that ended meanwhile
// (released, lost, or its record replaced) is not the current run's: the owner may have
// started a new run in that access since, whose lease the renewal did not see (or extended,
// if it ran later). Called with the mutex of e's shard held.
func (rn renewer) applyOne(e renewee, renewed bool, end time.Time) {
	c, sh, h, a, s := rn.c, e.sh, e.h, e.acc, e.run
	if (h.lost || s.lost) && renewed {
		// The reaper ended it while this renewal was in flight, which extended it after
		// all: give its holds back rather than leave a lock held by nobody.
		rn.giveBack(e)
		return
	}
	if h.lost || s.lost || s.count == 0 || !sh.holds.current(h) || h.acc[a] != s {
		// Released (its last hold: a downgrade ends the write run so), lost or replaced
		// meanwhile.
		return
	}
	switch {
	case renewed:
		if end.After(s.expires) {
			s.expires = end
			h.syncEnd()
		}
		h.claimed, s.unacked = false, false
	case h.releasing > 0:
		// An Unlock in flight released it.
	case sh.lanes.unlocking(holdKey{h.key, h.owner}):
		// An Unlock whose reply was lost released it, or it lapsed: settling that Unlock
		// tells which.
	default:
		c.opts.Logger.Warn("rlock: lock lost: owner no longer holds it", "lock", h.lk.name, "owner", h.owner)
		sh.loseIn(h, a)
	}
}

// giveBack queues the give-back of the holds of e, a run this process saw lost that a renewal
// extended in Redis after all, rather than leave the lock held by nobody until that lease runs
// out. An owner from a context may also hold through another process, and one of this process
// that started a new run in that access since may hold it through the lease the renewal
// extended (Redis keeps one count per owner and mode): those are left to their lease. Called
// with the mutex of e's shard held.
func (rn renewer) giveBack(e renewee) {
	if !strings.HasPrefix(e.h.owner, rn.c.id) {
		return
	}
	if cur := e.sh.holds.get(holdKey{e.h.key, e.h.owner}); cur != nil && cur.acc[e.acc] != e.run &&
		cur.acc[e.acc].count > 0 {
		return
	}
	e.sh.oweHolds(e.h, e.acc, e.run.count)
}
