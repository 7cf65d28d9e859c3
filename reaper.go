package rlock

import "time"

// reaper is the Client's expiry goroutine: it ends each hold whose local lease end (see
// localEnd) passes before a renewal or re-entry moved it, so that no hold context outlives
// the lease Redis has, whatever the renewals are doing. Each access of a record lapses on its
// own; the record ends when none is left. A hold with only fixed leases is marked lost at once,
// but its contexts are left to their own deadlines (whose cause says more) for reapGrace
// before the rest are cancelled.
func (c *Client) reaper() {
	defer c.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	type ending struct {
		h  *hold
		at time.Time
	}
	var endings []ending
	for {
		// While it scans, reapAt is 0, so that a hold registered in a shard already scanned
		// kicks it again (see register).
		c.reapAt.Store(0)
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
			e.h.lk.sh.mu.Lock()
			e.h.end(ErrLockLost)
			e.h.lk.sh.mu.Unlock()
		}
		clear(endings[len(kept):])
		endings = kept
		c.each(func(sh *shard) {
			for _, h := range sh.holds {
				// Each access lapses on its own (an RWMutex owner's read and write holds have a
				// lease each); the record ends when none is left.
				lapsed := false
				for i := range h.acc {
					s := &h.acc[i]
					switch {
					case s.count == 0 || s.lost:
						continue
					case now.Before(s.expires):
						soonest(s.expires)
						continue
					}
					s.lost, lapsed = true, true
					if s.watchdog {
						c.opts.Logger.Warn("rlock: lock lost: lease ran out before a renewal succeeded",
							"lock", h.lk.name, "owner", h.owner)
						if s.unacked {
							// The primary extended it: give it back there (the watchdog, at
							// once), rather than leave the name held by nobody until that lease
							// runs out.
							sh.oweHolds(h, access(i))
							c.renewSoon(now)
						}
					}
				}
				switch {
				case !lapsed:
				case h.live():
					h.syncEnd()
				case h.watchdog:
					c.lose(sh, h)
				default:
					// Only fixed leases: their contexts end by their own deadlines, whose cause
					// says more; what remains is cancelled after reapGrace.
					h.lost = true
					c.retire(sh, h, ErrLockLost)
					endings = append(endings, ending{h, now.Add(reapGrace)})
					soonest(now.Add(reapGrace))
				}
			}
		})
		if !next.IsZero() {
			c.reapAt.Store(next.UnixNano())
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
				e.h.lk.sh.mu.Lock()
				e.h.end(ErrClosed)
				e.h.lk.sh.mu.Unlock()
			}
			return
		case <-t.C:
		case <-c.reap:
		}
	}
}

// reapGrace is how long the reaper leaves the contexts of a fixed-lease hold to their
// deadlines before it cancels what remains.
const reapGrace = 100 * time.Millisecond

// kickReaper makes the reaper look again.
func (c *Client) kickReaper() {
	c.reapAt.Store(0)
	select {
	case c.reap <- struct{}{}:
	default:
	}
}
