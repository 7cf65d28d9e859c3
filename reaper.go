package rlock

import (
	"sync/atomic"
	"time"
)

// reaper is the Client's expiry goroutine: it ends each hold whose local lease end (see
// localEnd) passes before a renewal or re-entry moved it, so that no hold context outlives
// the lease Redis has, whatever the renewals are doing. Each access of a record lapses on its
// own; the record ends when none is left. A hold with only fixed leases is marked lost at once,
// but its contexts are left to their own deadlines (whose cause says more) for reapGrace
// before the rest are cancelled.
type reaper struct {
	c      *core
	shards *shards
	wd     *watchdog     // gives back holds a renewal extended too late (see accessHold.unacked)
	reap   chan struct{} // wakes it: a hold expires before at
	// at is when it wakes next (UnixNano); 0: only when kicked, or scanning.
	at atomic.Int64
}

// init sets r up for the client of c, whose state is s and whose watchdog is wd.
func (r *reaper) init(c *core, s *shards, wd *watchdog) {
	r.c, r.shards, r.wd, r.reap = c, s, wd, make(chan struct{}, 1)
}

// run is the goroutine; it returns when the client closes.
func (r *reaper) run() {
	c := r.c
	defer c.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	type ending struct {
		sh *shard
		h  *hold
		at time.Time
	}
	var endings []ending
	for {
		// While it scans, at is 0, so that a hold registered in a shard already scanned kicks
		// it again (see holdEnds).
		r.at.Store(0)
		now := time.Now()
		var next time.Time
		soonest := func(at time.Time) {
			if next.IsZero() || at.Before(next) {
				next = at
			}
		}
		kept := endings[:0]
		for _, e := range endings {
			if now.Before(e.at) {
				kept = append(kept, e)
				soonest(e.at)
				continue
			}
			e.sh.mu.Lock()
			e.h.end(ErrLockLost)
			e.sh.mu.Unlock()
		}
		clear(endings[len(kept):])
		endings = kept
		r.shards.each(func(sh *shard) {
			for h := range sh.holds.all() {
				// Each access lapses on its own (an RWMutex owner's read and write holds have a
				// lease each); the record ends when none is left.
				lapsed := false
				var watched [accesses]bool // accesses whose runs lapsed with watchdog holds
				for i, s := range h.acc {
					switch {
					case s.count == 0 || s.lost:
						continue
					case now.Before(s.expires):
						soonest(s.expires)
						continue
					}
					s.lost, lapsed = true, true
					if s.renews {
						watched[i] = true
						c.opts.Logger.Warn("rlock: lock lost: lease ran out before a renewal succeeded",
							"lock", h.lk.name, "owner", h.owner)
						if s.unacked {
							// The primary extended it: give it back there (the watchdog, at
							// once), rather than leave the name held by nobody until that lease
							// runs out.
							sh.oweHolds(h, access(i), s.count)
							r.wd.renewSoon(now)
						}
					}
				}
				switch {
				case !lapsed:
				case h.live():
					// The other access lives on. The contexts taken in write mode of an RWMutex
					// end (see hold.bases), but those of only fixed leases, left to their
					// deadlines (which have all passed), whose cause says more.
					if watched[exclusive] && h.lk.modes {
						h.endWrites()
					}
					h.syncEnd()
				case h.renews:
					sh.lose(h)
				default:
					// Only fixed leases: their contexts end by their own deadlines, whose cause
					// says more; what remains is cancelled after reapGrace.
					h.lost = true
					sh.retire(h, ErrLockLost)
					endings = append(endings, ending{sh, h, now.Add(reapGrace)})
					soonest(now.Add(reapGrace))
				}
			}
		})
		if !next.IsZero() {
			r.at.Store(next.UnixNano())
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		if !next.IsZero() {
			t.Reset(time.Until(next))
		}
		select {
		case <-c.ctx.Done():
			for _, e := range endings {
				e.sh.mu.Lock()
				e.h.end(ErrClosed)
				e.sh.mu.Unlock()
			}
			return
		case <-t.C:
		case <-r.reap:
		}
	}
}

// reapGrace is how long the reaper leaves the contexts of a fixed-lease hold to their
// deadlines before it cancels what remains.
const reapGrace = 100 * time.Millisecond

// holdEnds makes the reaper look again if a hold's local lease end, moved to end, comes
// before it was to wake.
func (r *reaper) holdEnds(end time.Time) {
	if at := r.at.Load(); at == 0 || end.UnixNano() < at {
		r.kick()
	}
}

// kick makes the reaper look again.
func (r *reaper) kick() {
	r.at.Store(0)
	select {
	case r.reap <- struct{}{}:
	default:
	}
}
