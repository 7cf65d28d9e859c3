package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
)

// TestRWModes_stressNoOverlap runs the chaos test's both-modes pattern hard on one RWMutex:
// owners that hold it for writing and then for reading, each mode with a lease of its own
// (the watchdog's, WatchdogTimeout 150ms, or a fixed one of 10-60ms), held past the shorter
// lease and released in either order, against other owners that take it for writing or reading
// as soon as they can, while the fault proxy cuts the connections of two of the three clients
// every 20-120ms (lost replies, replayed requests). Every hold context is checked over and
// over, each check stamped before it is made, and after each check Redis' leases are read:
//
//   - no hold context is live at a time when Redis' lease of its mode had ended (a watchdog
//     read context: of every mode of its owner, see RWMutex), and none of a fixed lease is live
//     after its lease, as last read, has ended and gone;
//   - no hold of one owner is live (by those checks) after another owner's conflicting hold
//     was entered: the chaos test's exclusion, with exact stamps;
//   - a fixed-lease context that ended before its release ended with ErrLockLost or
//     context.DeadlineExceeded, never context.Canceled (the owner's other mode's release must
//     not end it as released); releases return nil or ErrLockLost.
//
// RLOCK_RWSTRESS sets its run time per configuration (default 1.5s).
func TestRWModes_stressNoOverlap(t *testing.T) {
	run := 1500 * time.Millisecond
	if v := os.Getenv("RLOCK_RWSTRESS"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err)
		run = d
	}
	inParallel(t, func(t *testing.T, k lockKind, wait rlock.WaitStrategy) {
		e := newEnv(t)
		p := e.newProxy()
		opts := rlock.Options{Wait: wait, WatchdogTimeout: 150 * time.Millisecond}
		s := &rwStress{t: t, k: k, leases: e.kindBase("s") + ":leases", probe: e.Rueidis(),
			clients: []*rlock.Client{e.through(p).client(opts), e.through(p).client(opts), e.client(opts)}}
		end := time.Now().Add(run)
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Go(func() { s.bothModes(s.clients[i], end, rand.New(rand.NewPCG(uint64(i), 1))) })
		}
		for i := range 3 {
			wg.Go(func() { s.other(s.clients[i], i != 2, end, rand.New(rand.NewPCG(uint64(i), 2))) })
		}
		wg.Go(func() {
			for time.Now().Before(end) {
				time.Sleep(time.Duration(20+rand.IntN(101)) * time.Millisecond)
				p.CutAll()
			}
		})
		wg.Wait()
		s.report()
	})
}

// rwStress is one configuration of TestRWModes_stressNoOverlap.
type rwStress struct {
	t       *testing.T
	k       lockKind
	clients []*rlock.Client
	leases  string         // the lock's leases zset
	probe   rueidis.Client // reads Redis directly, past the proxy

	mu       sync.Mutex
	holds    []*rwStressHold
	bad      []string
	nbad     int
	ops      int // both-modes ops that held both modes
	checks   int // checks of a live context with Redis' leases read
	lostEnds int // fixed-lease contexts that ended before their release
	retried  int // releases retried after a transport error (see released)
}

// rwStressHold is one hold: its owner and mode, when it was entered (after the acquiring call
// returned) and the last time its context was found live (stamped before the check).
type rwStressHold struct {
	owner, what string
	write       bool
	enter, live int64 // UnixNano; live 0: never found live
}

// fail records a violation.
func (s *rwStress) fail(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nbad++
	if len(s.bad) < 10 {
		s.bad = append(s.bad, s.k.name+" "+s.t.Name()+": "+fmt.Sprintf(format, args...))
	}
}

// add records a finished hold.
func (s *rwStress) add(h *rwStressHold) {
	s.mu.Lock()
	s.holds = append(s.holds, h)
	s.mu.Unlock()
}

// stressLease picks a lease: the watchdog's (0) a third of the time, else 10-60ms.
func stressLease(rng *rand.Rand) time.Duration {
	if rng.IntN(3) == 0 {
		return 0
	}
	return time.Duration(10+rng.IntN(51)) * time.Millisecond
}

// mutex is the stress lock with a fixed lease (0: the watchdog's) on c.
func (s *rwStress) mutex(c *rlock.Client, lease time.Duration) *rlock.RWMutex {
	if lease == 0 {
		return s.k.rw(c, "s")
	}
	return s.k.rw(c, "s", rlock.WithLease(lease))
}

// stressCtx is one hold context under check.
type stressCtx struct {
	h     *rwStressHold
	ctx   context.Context
	lease time.Duration // its fixed lease; 0: the watchdog's
	field string        // its mode's field in the leases zset
	seen  int64         // its lease end (server ms) as last read; -1: never read
}

// check checks the contexts cs of one owner, all still held (not released), against Redis:
// each is checked (stamped before), then the owner's leases and the server's time are read.
func (s *rwStress) check(cs ...*stressCtx) {
	type at struct {
		t    int64
		live bool
	}
	got := make([]at, len(cs))
	for i, c := range cs {
		t0 := time.Now().UnixNano()
		got[i] = at{t0, c.ctx.Err() == nil}
		if got[i].live {
			c.h.live = t0
		}
	}
	fields := make([]string, len(cs))
	for i, c := range cs {
		fields[i] = c.field
	}
	ctx, cancel := context.WithTimeout(bg, time.Second)
	defer cancel()
	scores, err := s.probe.Do(ctx, s.probe.B().Zmscore().Key(s.leases).Member(fields...).Build()).ToArray()
	if err != nil {
		return
	}
	end := make([]int64, len(cs)) // lease end of each context's mode in ms; -1: none
	for i, r := range scores {
		end[i] = -1
		if f, err := r.AsFloat64(); err == nil {
			end[i] = int64(f)
		}
	}
	latest := slices.Max(end) // a watchdog read context lives while any mode of its owner does
	s.mu.Lock()
	s.checks++
	s.mu.Unlock()
	for i, c := range cs {
		if !got[i].live {
			if end[i] >= 0 {
				c.seen = end[i]
			}
			continue
		}
		t0ms := got[i].t / int64(time.Millisecond)
		switch {
		case c.lease == 0 && !c.h.write && latest >= 0 && latest <= t0ms:
			s.fail("%s: a watchdog context live at %d ms, the owner's latest lease in Redis ended at %d ms",
				c.h.what, t0ms, latest)
		case c.lease == 0 && c.h.write && end[i] >= 0 && end[i] <= t0ms:
			// (A watchdog write hold still held: its context ends with the write lease.)
			s.fail("%s: a watchdog write context live at %d ms, its write lease in Redis ended at %d ms",
				c.h.what, t0ms, end[i])
		case c.lease > 0 && end[i] >= 0 && end[i] <= t0ms:
			dl, _ := c.ctx.Deadline()
			s.fail("%s: a %v context live at %.3f ms (deadline %.3f ms), its lease in Redis ended at %d ms", c.h.what, c.lease,
				float64(got[i].t)/1e6, float64(dl.UnixNano())/1e6, end[i])
		case c.lease > 0 && end[i] < 0 && c.seen >= 0 && c.seen <= t0ms:
			s.fail("%s: a %v context live at %d ms, its lease in Redis (read before) ended at %d ms and is gone",
				c.h.what, c.lease, t0ms, c.seen)
		}
		if end[i] >= 0 {
			c.seen = end[i]
		}
	}
}

// ended checks the cause of c, a context whose hold was not released yet, if it has ended.
func (s *rwStress) ended(c *stressCtx) {
	if c.ctx.Err() == nil {
		return
	}
	cause := context.Cause(c.ctx)
	if c.lease > 0 {
		s.mu.Lock()
		s.lostEnds++
		s.mu.Unlock()
	}
	if !errors.Is(cause, rlock.ErrLockLost) && !errors.Is(cause, context.DeadlineExceeded) {
		s.fail("%s: its context ended before its release with cause %v (lease %v)", c.h.what, cause, c.lease)
	}
}

// released releases the hold of ctx with release and checks the outcome. A release that cannot
// reach Redis within its bound returns its transport error, and the request stays pending (see
// API.md, "When Redis cannot be reached"): under the test's cuts that may happen, so the
// release is retried until the cuts end, and the retry must give the pending request's
// outcome: done, or the lease was lost; never ErrNotHeld (it would have released twice, or
// not at all).
func (s *rwStress) released(what string, release func(context.Context) error, ctx context.Context) {
	err := release(ctx)
	for tries := 0; err != nil && transportErr(err); tries++ {
		if tries == 100 {
			s.fail("%s: release: still %v after %d retries", what, err, tries)
			return
		}
		s.mu.Lock()
		s.retried++
		s.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
		err = release(ctx)
	}
	if err != nil && !errors.Is(err, rlock.ErrLockLost) {
		s.fail("%s: release: %v", what, err)
	}
}

// hold keeps cs checked for d, every 0-500µs.
func (s *rwStress) hold(rng *rand.Rand, d time.Duration, cs ...*stressCtx) {
	until := time.Now().Add(d)
	for {
		s.check(cs...)
		if !time.Now().Before(until) {
			return
		}
		time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
	}
}

// bothModes repeats the both-modes pattern on c until end: an owner (half the time one of its
// own through WithOwner) takes the lock for writing and, through a context that carries only
// the owner, for reading, each with a lease of its own; it holds on for up to the longer lease
// (at least 40ms) and 20ms more, and releases both in either order.
func (s *rwStress) bothModes(c *rlock.Client, end time.Time, rng *rand.Rand) {
	for n := 0; time.Now().Before(end); n++ {
		lw, lr := stressLease(rng), stressLease(rng)
		mw, mr := s.mutex(c, lw), s.mutex(c, lr)
		base := bg
		if rng.IntN(2) == 0 {
			base = rlock.WithOwner(bg, rlock.NewOwnerID())
		}
		w, err := mw.TryLock(base, 300*time.Millisecond)
		if err != nil {
			if !errors.Is(err, rlock.ErrNotObtained) {
				s.fail("both modes: Lock: %v", err)
			}
			continue
		}
		owner, _ := rlock.Owner(w)
		what := fmt.Sprintf("both modes (owner %s, write %v, read %v)", owner, lw, lr)
		cw := &stressCtx{h: &rwStressHold{owner: owner, what: what + " write", write: true, enter: time.Now().UnixNano()},
			ctx: w, lease: lw, field: "w:" + owner, seen: -1}
		r, err := mr.TryRLock(rlock.WithOwner(bg, owner), 300*time.Millisecond)
		if err != nil {
			// The write hold's lease may have run out, and the lock gone to another owner.
			s.hold(rng, 0, cw)
			s.ended(cw)
			s.released(what+" write", mw.Unlock, w)
			s.add(cw.h)
			continue
		}
		cr := &stressCtx{h: &rwStressHold{owner: owner, what: what + " read", enter: time.Now().UnixNano()},
			ctx: r, lease: lr, field: "r:" + owner, seen: -1}
		s.mu.Lock()
		s.ops++
		s.mu.Unlock()
		s.hold(rng, time.Duration(rng.Int64N(int64(max(lw, lr, 40*time.Millisecond)+20*time.Millisecond))), cw, cr)
		first, second := cw, cr
		release := [2]func(context.Context) error{mw.Unlock, mr.RUnlock}
		if n%2 == 1 {
			first, second = cr, cw
			release[0], release[1] = mr.RUnlock, mw.Unlock
		}
		s.ended(first)
		s.released(first.h.what, release[0], first.ctx)
		s.hold(rng, time.Duration(rng.IntN(3))*time.Millisecond, second)
		s.ended(second)
		s.released(second.h.what, release[1], second.ctx)
		s.add(cw.h)
		s.add(cr.h)
	}
}

// other takes the lock on c, as an owner of each call's own, for writing (write) or reading
// (else) with a lease of its own, as soon as it can until end: it waits up to 0-80ms, and
// holds on for 0-3ms.
func (s *rwStress) other(c *rlock.Client, write bool, end time.Time, rng *rand.Rand) {
	for time.Now().Before(end) {
		lease := stressLease(rng)
		m := s.mutex(c, lease)
		lock, unlock, mode := m.TryRLock, m.RUnlock, "r:"
		if write {
			lock, unlock, mode = m.TryLock, m.Unlock, "w:"
		}
		h, err := lock(bg, time.Duration(rng.IntN(81))*time.Millisecond)
		if err != nil {
			if !errors.Is(err, rlock.ErrNotObtained) {
				s.fail("other %s: lock: %v", mode, err)
			}
			continue
		}
		owner, _ := rlock.Owner(h)
		what := "other " + mode + owner + " (lease " + strconv.FormatInt(lease.Milliseconds(), 10) + "ms)"
		cs := &stressCtx{h: &rwStressHold{owner: owner, what: what, write: write, enter: time.Now().UnixNano()},
			ctx: h, lease: lease, field: mode + owner, seen: -1}
		s.hold(rng, time.Duration(rng.IntN(4))*time.Millisecond, cs)
		s.ended(cs)
		s.released(what, unlock, h)
		s.add(cs.h)
	}
}

// report checks the holds for overlaps and reports what was found.
func (s *rwStress) report() {
	t := s.t
	hs := s.holds
	sort := func(a, b *rwStressHold) int { return int(a.enter - b.enter) }
	slices.SortFunc(hs, sort)
	overlaps := 0
	for i, a := range hs {
		if a.live == 0 {
			continue
		}
		for _, b := range hs[i+1:] {
			if b.enter >= a.live {
				break
			}
			if b.live == 0 || a.owner == b.owner || !a.write && !b.write {
				continue
			}
			// b entered while a was still found live afterwards (a.enter <= b.enter < a.live).
			overlaps++
			if overlaps <= 5 {
				s.bad = append(s.bad, fmt.Sprintf("overlap: %s found live %v after %s entered",
					a.what, time.Duration(a.live-b.enter), b.what))
			}
		}
	}
	t.Logf("%d both-modes ops, %d holds in all, %d checks against Redis, %d fixed-lease contexts ended "+
		"before their release, %d releases retried after a transport error; %d violations, %d overlaps",
		s.ops, len(hs), s.checks, s.lostEnds, s.retried, s.nbad, overlaps)
	for _, b := range s.bad {
		t.Error(b)
	}
	assert.Zero(t, s.nbad+overlaps, "violations and overlaps")
}
