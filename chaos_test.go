package rlock_test

// TestChaos: 3 processes × 8 goroutines lock 3 names in every way the API allows (nested Lock,
// short TryLock, Lock with a context that times out) while the test kills Redis connections
// (CLIENT KILL TYPE normal / pubsub) every 20-300 ms. Every child process writes an
// append-only log of its calls on stdout; the parent reads it live (a monitor compares it with
// the lock hashes in Redis) and checks it after the run:
//
//   - no two holds of a name overlap (the log's enter/exit times lie inside the real holds:
//     enter is taken after Lock returned, exit before Unlock is called), unless the library
//     reported one of them lost (context cause or Unlock error ErrLockLost) at a time when its
//     lease could have run out;
//   - fencing tokens follow the holds: a hold that entered after another exited has a larger
//     token;
//   - no owner holds a lock in Redis for more than 2 s while no call of that owner is live
//     (a phantom hold: others wait for nothing); an owner the logs have not named yet (Lock
//     made it) gets chaosAnonGrace to show up in an E line first;
//   - no call returns an error the API does not allow for it; ErrLockLost is allowed only once
//     the lease (3 s, holds last milliseconds) could have run out.
//
// -chaos.faults=false runs the same without the killer: a baseline that must pass.
//
// Log lines: "K proc goroutine name owner unixnano a b message", nine space-separated fields
// (the message may hold spaces; "-" fills unused ones), where K is
//
//	B  a Lock or TryLock call begins: a = op (nested, try, wait), b = its bound in ns (0: none);
//	   owner "-" when the call makes its own owner (then the owner is known only from E)
//	E  it acquired: a = fencing token
//	F  it failed: a = error class
//	X  the critical section ends: a = token, b = "ok" or the class of the hold context's cause
//	U  the Unlock of that hold returned: a = error class ("ok")
//	W  another error: a = event (reenter, inner-unlock, unlock-retry, token-changed, ...), b = class

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock"
)

var (
	chaosDuration = flag.Duration("chaos.duration", 5*time.Second, "TestChaos: run time of each of its 4 configurations")
	chaosFaults   = flag.Bool("chaos.faults", true, "TestChaos: kill Redis connections during the run (false: a baseline without faults)")
)

// Shape of a chaos run.
const (
	chaosProcs      = 3
	chaosGoroutines = 8
	chaosWatchdog   = 3 * time.Second        // WatchdogTimeout of the children
	chaosFairWait   = time.Second            // FairWaitTimeout of the children
	chaosPhantom    = 2 * time.Second        // longest an owner may hold a lock in Redis with no live call
	chaosAnonGrace  = 500 * time.Millisecond // an owner not in the logs yet is credited this long
	chaosMaxRTT     = time.Second            // longest a Redis reply is assumed to take
	chaosTick       = 20 * time.Millisecond
	chaosFlushEvery = 5 * time.Millisecond // children flush their log at least this often
	chaosChildGrace = 30 * time.Second     // a child still busy this long after its run reports and exits 3
	chaosMaxReports = 10                   // details printed per kind of finding
)

// chaosNames are the lock names every child uses.
var chaosNames = []string{"c0", "c1", "c2"}

// TestChaos runs the chaos test for both mutex kinds and both wait strategies, each for
// -chaos.duration.
func TestChaos(t *testing.T) {
	needsThrowaway(t)
	for _, kind := range []string{"plain", "fair"} {
		t.Run(kind, func(t *testing.T) {
			for _, wait := range []string{"pubsub", "spin"} {
				t.Run(wait, func(t *testing.T) { runChaos(t, kind, wait) })
			}
		})
	}
}

// runChaos runs one configuration: children, killer and monitor, then the checks and report.
func runChaos(t *testing.T, kind, wait string) {
	e := newEnv(t)
	r := newChaosRun(e.prefix)
	killerRC, monitorRC := newRueidis(t, redisAddr), newRueidis(t, redisAddr)

	children := make([]*child, chaosProcs)
	for p := range children {
		children[p] = startChild(t, "chaos", "PREFIX="+e.prefix, "KIND="+kind, "WAIT="+wait,
			"DURATION="+chaosDuration.String(), "WATCHDOG="+chaosWatchdog.String(),
			"FAIRWAIT="+chaosFairWait.String(), "PROC="+strconv.Itoa(p))
	}

	var bgWG sync.WaitGroup
	stopKiller, stopMonitor := make(chan struct{}), make(chan struct{})
	if *chaosFaults {
		bgWG.Add(1)
		go func() { defer bgWG.Done(); r.kill(killerRC, stopKiller) }()
	}
	bgWG.Add(1)
	go func() { defer bgWG.Done(); r.monitor(monitorRC, stopMonitor) }()

	// Readers: each reads its child's log to the end, then reaps the child.
	exits := make([]error, chaosProcs)
	var readers sync.WaitGroup
	for p, c := range children {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for c.out.Scan() {
				r.line(c.out.Text())
			}
			if err := c.out.Err(); err != nil {
				r.parseError(fmt.Sprintf("child %d: reading its log: %v", p, err))
				_ = c.cmd.Process.Kill() // it may block on a full pipe
			}
			exits[p] = c.cmd.Wait()
		}()
	}
	readersDone := make(chan struct{})
	go func() { readers.Wait(); close(readersDone) }()
	select {
	case <-readersDone:
	case <-time.After(*chaosDuration + chaosChildGrace + 15*time.Second):
		t.Errorf("children did not exit within %v of the end of the run: killing them", chaosChildGrace+15*time.Second)
		for _, c := range children {
			_ = c.cmd.Process.Kill()
		}
		<-readersDone
	}
	close(stopKiller) // the children ran their last Unlocks under faults too
	// The monitor goes on until the lock keys are gone (or a lease and a bit has passed), so
	// a hold left behind at the end is measured too.
	r.mu.Lock()
	r.childrenGone = time.Now()
	r.mu.Unlock()
	select {
	case <-r.settled:
	case <-time.After(chaosWatchdog + 2*time.Second):
	}
	close(stopMonitor)
	bgWG.Wait()

	for p, err := range exits {
		if err != nil {
			t.Errorf("child %d failed: %v (its stderr is above)", p, err)
		}
	}
	r.report(t, kind+"/"+wait)
}

// chaosRun is the parent's view of one run: the holds from the logs, what the monitor saw, and
// the fault counts. Its fields are guarded by mu, except the atomics.
type chaosRun struct {
	prefix   string
	startNs  int64         // parent's clock at the start, UnixNano (times in reports are relative to it)
	settled  chan struct{} // closed when the monitor finds no lock key after the children exited
	kills    atomic.Int64  // CLIENT KILL commands that succeeded
	killed   atomic.Int64  // connections they closed
	killErrs atomic.Int64  // CLIENT KILL commands that failed (the killer's own connection was killed)
	ticks    atomic.Int64  // monitor ticks that read all lock hashes
	tickErrs atomic.Int64  // monitor ticks that failed

	mu           sync.Mutex
	childrenGone time.Time              // zero while children run
	calls        map[[2]int]*chaosCall  // each goroutine's current call, by (proc, goroutine)
	owners       map[string]*chaosOwner // every owner seen in a log line
	holds        []*chaosHold
	stretches    map[string]*chaosStretch // (name, owner) in Redis with no live call, by name+" "+owner
	firstSeen    map[string]time.Time     // when the monitor first saw (name, owner) in Redis
	phantoms     []*chaosStretch          // stretches longer than chaosPhantom
	longest      *chaosStretch            // longest stretch, phantom or not
	errCounts    map[string]int           // unexpected and tolerated error kinds -> count
	errSamples   map[string][]chaosSample // a few events of each kind
	failKinds    map[string]bool          // kinds that fail the test
	ops          map[string]*chaosOpStats // per op
	parseErrs    []string
}

// chaosCall is one Lock/TryLock call of a child goroutine and the hold it took.
type chaosCall struct {
	op    string
	owner string // "-" until E when the call makes its own owner
	bound time.Duration
	begin int64 // child's UnixNano
	hold  *chaosHold
}

// chaosHold is one acquisition, from E to U.
type chaosHold struct {
	name, owner, op  string
	proc, g          int
	token            int64
	begin            int64 // B, child's UnixNano
	enter, exit      int64 // E and X; exit 0 if never logged
	unlocked         int64 // U; 0 if never logged
	lost             bool  // the library reported this hold lost (context cause or an ErrLockLost)
	lostEarly        bool  // ... too soon for its lease to have run out
	unlockClass, why string
}

// chaosOwner is what the logs say about one owner id, for the monitor.
type chaosOwner struct {
	proc, g      int
	name, op     string
	began, ended time.Time // parent's clock when its B (or E) and its F or U lines arrived
	live         bool      // a call of this owner is in flight or holds the lock
	outcome      string
}

// chaosStretch is a time during which Redis showed owner holding name while no live call had it.
type chaosStretch struct {
	name, owner string
	start, last time.Time // first and last monitor tick that saw it so
	about       string    // what the logs said about the owner when the stretch ended
}

// chaosOpStats counts one op's calls and waits.
type chaosOpStats struct {
	calls, acquired int
	worstWait       time.Duration // longest call, acquired or not
	worstOvershoot  time.Duration // longest time past the call's bound (TryLock wait, context timeout)
	worstWaitCall   string
}

// newChaosRun returns an empty run for key prefix.
func newChaosRun(prefix string) *chaosRun {
	now := time.Now()
	return &chaosRun{
		prefix: prefix, startNs: now.UnixNano(), settled: make(chan struct{}),
		calls:      make(map[[2]int]*chaosCall),
		owners:     make(map[string]*chaosOwner),
		stretches:  make(map[string]*chaosStretch),
		firstSeen:  make(map[string]time.Time),
		errCounts:  make(map[string]int),
		errSamples: make(map[string][]chaosSample),
		failKinds:  make(map[string]bool),
		ops:        make(map[string]*chaosOpStats),
	}
}

// parseError records a log line the parent could not make sense of (a bug in the test).
func (r *chaosRun) parseError(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.badLine(msg)
}

// badLine is parseError with mu held.
func (r *chaosRun) badLine(msg string) {
	if len(r.parseErrs) < chaosMaxReports {
		r.parseErrs = append(r.parseErrs, msg)
	}
}

// line takes one log line of a child: it updates the live owners (for the monitor) and the
// holds, error counts and wait figures (for the report).
func (r *chaosRun) line(s string) {
	f := strings.SplitN(s, " ", 9)
	if len(f) != 9 || len(f[0]) != 1 {
		r.parseError("malformed line: " + s)
		return
	}
	proc, err1 := strconv.Atoi(f[1])
	g, err2 := strconv.Atoi(f[2])
	ts, err3 := strconv.ParseInt(f[5], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		r.parseError(fmt.Sprintf("line %q: %v", s, err))
		return
	}
	name, owner, a, b, msg := f[3], f[4], f[6], f[7], f[8]
	now := time.Now()
	pg := [2]int{proc, g}

	r.mu.Lock()
	defer r.mu.Unlock()
	call := r.calls[pg]
	if f[0] != "B" && call == nil {
		r.badLine("line without a call: " + s)
		return
	}
	switch f[0] {
	case "B":
		bound, err := strconv.ParseInt(b, 10, 64)
		if err != nil {
			r.badLine("bad bound: " + s)
			return
		}
		call = &chaosCall{op: a, owner: owner, bound: time.Duration(bound), begin: ts}
		r.calls[pg] = call
		st := r.ops[a]
		if st == nil {
			st = &chaosOpStats{}
			r.ops[a] = st
		}
		st.calls++
		if owner != "-" {
			r.owners[owner] = &chaosOwner{proc: proc, g: g, name: name, op: a, began: now, live: true}
		}
	case "E":
		token, err := strconv.ParseInt(a, 10, 64)
		if err != nil {
			r.badLine("bad token: " + s)
			return
		}
		o := r.owners[owner]
		if o == nil {
			o = &chaosOwner{proc: proc, g: g, name: name, op: call.op, began: now}
			r.owners[owner] = o
		}
		o.live = true
		h := &chaosHold{name: name, owner: owner, op: call.op, proc: proc, g: g, token: token, begin: call.begin, enter: ts}
		call.hold, call.owner = h, owner
		r.holds = append(r.holds, h)
		r.waited(pg, call, ts, s)
	case "F":
		if o := r.owners[owner]; o != nil {
			o.live, o.ended, o.outcome = false, now, "its "+call.op+" call failed ("+a+")"
		}
		r.waited(pg, call, ts, s)
		r.countErr(call, "lock:"+call.op, a, ts, s)
	case "X":
		if call.hold == nil {
			r.badLine("exit without enter: " + s)
			return
		}
		call.hold.exit = ts
		if b != "ok" {
			r.countErr(call, "hold-ended", b, ts, s)
			call.hold.noteLost(b, "its hold context ended early: "+msg)
		}
	case "U":
		if call.hold == nil {
			r.badLine("unlock without enter: " + s)
			return
		}
		call.hold.unlocked, call.hold.unlockClass = ts, a
		if o := r.owners[owner]; o != nil {
			o.live, o.ended, o.outcome = false, now, "unlocked ("+a+")"
		}
		if a != "ok" {
			r.countErr(call, "unlock", a, ts, s)
			call.hold.noteLost(a, "Unlock: "+msg)
		}
	case "W":
		r.countErr(call, a, b, ts, s)
		if call.hold != nil {
			call.hold.noteLost(b, a+": "+msg)
		}
	default:
		r.badLine("unknown line kind: " + s)
	}
}

// noteLost marks h lost when class says the library reported the loss.
func (h *chaosHold) noteLost(class, why string) {
	if class == "lost" && !h.lost {
		h.lost, h.why = true, why
	}
}

// waited records the duration of call of goroutine pg, which ended (E or F) at child time ts
// with line s. Called with mu held.
func (r *chaosRun) waited(pg [2]int, call *chaosCall, ts int64, s string) {
	st := r.ops[call.op]
	if call.hold != nil {
		st.acquired++
	}
	d := time.Duration(ts - call.begin)
	if d > st.worstWait {
		outcome := "acquired"
		if call.hold == nil {
			outcome = "failed"
		}
		st.worstWait = d
		st.worstWaitCall = fmt.Sprintf("proc %d g %d, owner %s, called %s, %s: %s", pg[0], pg[1], call.owner, r.rel(call.begin), outcome, s)
	}
	if call.bound > 0 && d-call.bound > st.worstOvershoot {
		st.worstOvershoot = d - call.bound
	}
}

// Verdicts on an error event.
const (
	chaosExpected  = iota // part of the op's contract (ErrNotObtained from TryLock, ...)
	chaosTolerated        // legitimate under connection kills; counted and shown
	chaosFailing          // the API does not allow it here: the test fails
)

// chaosVerdict judges an error of class (see chaosClass) at event: a failed call
// ("lock:nested", "lock:try", "lock:wait"), "hold-ended" (a hold context ended before
// Unlock), "unlock", or a child's W event. It returns the kind counted ("event:class").
func chaosVerdict(event, class string) (string, int) {
	kind := event + ":" + class
	switch {
	case event == "lock:try" && class == "notobtained",
		event == "lock:wait" && class == "deadline":
		return kind, chaosExpected
	case class == "lost" && (event == "hold-ended" || event == "unlock" || event == "reenter" || event == "inner-unlock"):
		// ErrLockLost: the lease ran out under faults, and the library said so.
		return kind, chaosTolerated
	case event == "lock:try" && class == "transport":
		// A single attempt (or the last one) whose connection was killed: nothing is held.
		return kind, chaosTolerated
	}
	return kind, chaosFailing
}

// countErr judges an error event of class at event, logged at child time ts by line s
// during call, and counts it unless it is expected. A loss reported less than half a lease
// after the lease began cannot be a lease that ran out (and holds here last milliseconds): it
// counts as "lost-early", which fails the test. The lease began when the acquiring script was
// sent: after the call began, and (allowing a round trip of up to chaosMaxRTT) no earlier than
// chaosMaxRTT before Lock returned. Called with mu held.
func (r *chaosRun) countErr(call *chaosCall, event, class string, ts int64, s string) {
	kind, verdict := chaosVerdict(event, class)
	if verdict == chaosExpected {
		return
	}
	leaseFrom := call.begin
	if call.hold != nil {
		leaseFrom = max(leaseFrom, call.hold.enter-int64(chaosMaxRTT))
	}
	if class == "lost" && time.Duration(ts-leaseFrom) < chaosWatchdog/2 {
		kind, verdict = event+":lost-early", chaosFailing
		if call.hold != nil {
			call.hold.lostEarly = true
		}
	}
	r.errCounts[kind]++
	if verdict == chaosFailing {
		r.failKinds[kind] = true
	}
	if len(r.errSamples[kind]) < 3 {
		r.errSamples[kind] = append(r.errSamples[kind], chaosSample{line: s, op: call.op, hold: call.hold})
	}
}

// chaosSample is a logged error event and the hold it happened in (nil if none).
type chaosSample struct {
	line, op string
	hold     *chaosHold
}

// kill sends CLIENT KILL TYPE normal and TYPE pubsub alternately, every 20-300 ms, until stop
// is closed. CLIENT KILL skips the connection that sends it. Errors are counted and skipped.
func (r *chaosRun) kill(rc rueidis.Client, stop <-chan struct{}) {
	types := [2]string{"normal", "pubsub"}
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(20+rand.IntN(281)) * time.Millisecond):
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		n, err := rc.Do(ctx, rc.B().Arbitrary("CLIENT", "KILL", "TYPE", types[i%2]).Build()).AsInt64()
		cancel()
		if err != nil {
			r.killErrs.Add(1)
			continue
		}
		r.kills.Add(1)
		r.killed.Add(n)
	}
}

// monitor reads every lock hash every chaosTick until stop is closed and tracks owners that
// Redis shows holding a lock while no live call of theirs is in the logs. Failed reads (its
// connection was killed) are skipped.
func (r *chaosRun) monitor(rc rueidis.Client, stop <-chan struct{}) {
	cmds := make(rueidis.Commands, len(chaosNames))
	for i, name := range chaosNames {
		cmds[i] = rc.B().Hgetall().Key(r.prefix + ":{" + name + "}").Build().Pin()
	}
	tick := time.NewTicker(chaosTick)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			r.mu.Lock()
			for key, s := range r.stretches {
				r.closeStretch(key, s)
			}
			r.mu.Unlock()
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		res := rc.DoMulti(ctx, cmds...)
		cancel()
		held := make(map[string][]string) // name -> owners in Redis
		ok := true
		for i, rr := range res {
			m, err := rr.AsStrMap()
			if err != nil {
				ok = false
				break
			}
			for field := range m {
				if !strings.HasPrefix(field, "\x00") { // internal markers start with NUL
					held[chaosNames[i]] = append(held[chaosNames[i]], field)
				}
			}
		}
		if !ok {
			r.tickErrs.Add(1)
			continue
		}
		r.ticks.Add(1)
		r.observe(time.Now(), held)
	}
}

// observe compares one snapshot of the lock hashes (name -> owners) taken at now with the live
// calls of the logs.
func (r *chaosRun) observe(now time.Time, held map[string][]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := make(map[string]bool)
	for name, owners := range held {
		for _, owner := range owners {
			key := name + " " + owner
			seen[key] = true
			if _, ok := r.firstSeen[key]; !ok {
				r.firstSeen[key] = now
			}
			s := r.stretches[key]
			if r.credited(name, owner, now) {
				if s != nil {
					r.closeStretch(key, s)
				}
				continue
			}
			if s == nil {
				r.stretches[key] = &chaosStretch{name: name, owner: owner, start: now, last: now}
			} else {
				s.last = now
			}
		}
	}
	for key, s := range r.stretches {
		if !seen[key] {
			r.closeStretch(key, s)
		}
	}
	for key := range r.firstSeen {
		if !seen[key] {
			delete(r.firstSeen, key)
		}
	}
	if len(held) == 0 && !r.childrenGone.IsZero() {
		select {
		case <-r.settled:
		default:
			close(r.settled)
		}
	}
}

// credited reports whether a live call accounts for owner holding name in Redis at now. An
// owner the logs have not named yet belongs to a call that makes its own owner (its E line,
// due milliseconds after Redis granted the lock, names it): it is credited for chaosAnonGrace
// after the monitor first saw it. Past that, a Lock that acquired still has not returned, or
// a call that failed left its hold behind. Called with mu held.
func (r *chaosRun) credited(name, owner string, now time.Time) bool {
	if o := r.owners[owner]; o != nil {
		return o.live
	}
	return now.Sub(r.firstSeen[name+" "+owner]) < chaosAnonGrace
}

// closeStretch ends stretch s (stored under key) and keeps it if it is a phantom or the
// longest. Called with mu held.
func (r *chaosRun) closeStretch(key string, s *chaosStretch) {
	delete(r.stretches, key)
	if o := r.owners[s.owner]; o != nil {
		s.about = fmt.Sprintf("owner of process %d goroutine %d, %s call on %s began at %s, %s at %s",
			o.proc, o.g, o.op, o.name, r.rel(o.began.UnixNano()), o.outcome, r.rel(o.ended.UnixNano()))
	} else {
		s.about = "an owner not named in the logs (made by a Lock or TryLock that failed, or has not returned)"
	}
	d := s.last.Sub(s.start)
	if r.longest == nil || d > r.longest.last.Sub(r.longest.start) {
		r.longest = s
	}
	if d > chaosPhantom {
		r.phantoms = append(r.phantoms, s)
	}
}

// rel formats a UnixNano time relative to the start of the run.
func (r *chaosRun) rel(ns int64) string {
	if ns == 0 {
		return "never"
	}
	return "+" + time.Duration(ns-r.startNs).Round(time.Microsecond).String()
}

// describe formats a hold for a report.
func (r *chaosRun) describe(h *chaosHold) string {
	s := fmt.Sprintf("[proc %d g %d %s owner %s token %d: called %s, entered %s, exited %s, unlocked %s (%s)",
		h.proc, h.g, h.op, h.owner, h.token, r.rel(h.begin), r.rel(h.enter), r.rel(h.exit), r.rel(h.unlocked), h.unlockClass)
	if h.lost {
		s += ", reported lost: " + h.why
	}
	if h.lostEarly {
		s += " (too early for its lease to have run out)"
	}
	return s + "]"
}

// chaosPair is two holds of one name that break a check.
type chaosPair struct{ a, b *chaosHold }

// overlaps returns, per name, the holds that overlap an earlier one (with that one), split
// into those the API allows (the library reported one of the two lost, and not so early that
// its lease cannot have run out) and the others.
func overlaps(holds []*chaosHold) (bad, excused []chaosPair) {
	byName := make(map[string][]*chaosHold)
	for _, h := range holds {
		byName[h.name] = append(byName[h.name], h)
	}
	for _, hs := range byName {
		sort.Slice(hs, func(i, j int) bool { return hs[i].enter < hs[j].enter })
		var open *chaosHold // the hold with the latest exit so far
		for _, h := range hs {
			if open != nil && h.enter < exitOf(open) {
				if open.lost && !open.lostEarly || h.lost && !h.lostEarly {
					excused = append(excused, chaosPair{open, h})
				} else {
					bad = append(bad, chaosPair{open, h})
				}
			}
			if open == nil || exitOf(h) > exitOf(open) {
				open = h
			}
		}
	}
	return bad, excused
}

// exitOf is h's exit time, or "forever" for a hold whose exit was never logged.
func exitOf(h *chaosHold) int64 {
	if h.exit == 0 {
		return 1<<63 - 1
	}
	return h.exit
}

// fencingViolations returns pairs (a, b) of holds of one name where b entered after a exited
// but b's token is not larger than a's.
func fencingViolations(holds []*chaosHold) []chaosPair {
	byName := make(map[string][]*chaosHold)
	for _, h := range holds {
		byName[h.name] = append(byName[h.name], h)
	}
	var bad []chaosPair
	for _, hs := range byName {
		byExit := slices.Clone(hs)
		sort.Slice(byExit, func(i, j int) bool { return exitOf(byExit[i]) < exitOf(byExit[j]) })
		maxTok := make([]*chaosHold, len(byExit)) // maxTok[i]: largest token among byExit[:i+1]
		for i, h := range byExit {
			maxTok[i] = h
			if i > 0 && maxTok[i-1].token > h.token {
				maxTok[i] = maxTok[i-1]
			}
		}
		for _, b := range hs {
			k := sort.Search(len(byExit), func(i int) bool { return exitOf(byExit[i]) >= b.enter })
			if k > 0 && maxTok[k-1].token >= b.token {
				bad = append(bad, chaosPair{maxTok[k-1], b})
			}
		}
	}
	return bad
}

// report checks the run's log and prints its figures: t.Logf details and one summary line on
// stdout.
func (r *chaosRun) report(t *testing.T, config string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, msg := range r.parseErrs {
		t.Errorf("test bug: %s", msg)
	}
	bad, excused := overlaps(r.holds)
	fencing := fencingViolations(r.holds)
	lost := 0
	for _, h := range r.holds {
		if h.lost {
			lost++
		}
		if h.exit == 0 || h.unlocked == 0 {
			t.Errorf("hold never finished in the log: %s", r.describe(h))
		}
	}
	for i, p := range bad {
		if i == chaosMaxReports {
			t.Errorf("... %d overlaps in all", len(bad))
			break
		}
		t.Errorf("OVERLAP on %s: %s and %s", p.a.name, r.describe(p.a), r.describe(p.b))
	}
	for i, p := range excused {
		if i == chaosMaxReports {
			break
		}
		t.Logf("overlap with a hold reported lost, on %s: %s and %s", p.a.name, r.describe(p.a), r.describe(p.b))
	}
	for i, p := range fencing {
		if i == chaosMaxReports {
			t.Errorf("... %d fencing violations in all", len(fencing))
			break
		}
		t.Errorf("FENCING on %s: %s exited before %s entered, but its token is not smaller", p.a.name, r.describe(p.a), r.describe(p.b))
	}
	for i, s := range r.phantoms {
		if i == chaosMaxReports {
			t.Errorf("... %d phantom stalls in all", len(r.phantoms))
			break
		}
		t.Errorf("PHANTOM on %s: Redis showed owner %s holding it from %s to %s (%v) with no live call of it; %s",
			s.name, s.owner, r.rel(s.start.UnixNano()), r.rel(s.last.UnixNano()), s.last.Sub(s.start).Round(time.Millisecond), s.about)
	}
	kinds := make([]string, 0, len(r.errCounts))
	for k := range r.errCounts {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var errSummary []string
	for _, k := range kinds {
		verdict := "tolerated"
		if r.failKinds[k] {
			verdict = "UNEXPECTED"
		}
		errSummary = append(errSummary, fmt.Sprintf("%s=%d", k, r.errCounts[k]))
		for _, s := range r.errSamples[k] {
			msg := fmt.Sprintf("%s error %s (%d in all), e.g. in a %s call: %q", verdict, k, r.errCounts[k], s.op, s.line)
			if s.hold != nil {
				msg += " of hold " + r.describe(s.hold)
			}
			if r.failKinds[k] {
				t.Error(msg)
			} else {
				t.Log(msg)
			}
		}
	}
	if len(errSummary) == 0 {
		errSummary = []string{"none"}
	}

	var opParts []string
	worst, worstOp, worstCall, overshoot := time.Duration(0), "", "", time.Duration(0)
	for _, op := range []string{"nested", "try", "wait"} {
		st := r.ops[op]
		if st == nil {
			continue
		}
		opParts = append(opParts, fmt.Sprintf("%s %d/%d", op, st.acquired, st.calls))
		if st.worstWait > worst {
			worst, worstOp, worstCall = st.worstWait, op, st.worstWaitCall
		}
		overshoot = max(overshoot, st.worstOvershoot)
		t.Logf("%s: %d calls, %d acquired, worst call %v, worst overshoot of its bound %v",
			op, st.calls, st.acquired, st.worstWait.Round(time.Microsecond), st.worstOvershoot.Round(time.Microsecond))
	}
	longest := time.Duration(0)
	if r.longest != nil && r.longest.last.After(r.longest.start) {
		longest = r.longest.last.Sub(r.longest.start)
		t.Logf("longest stretch with no live call: %v on %s, owner %s (%s)", longest.Round(time.Millisecond), r.longest.name, r.longest.owner, r.longest.about)
	}
	t.Logf("worst wait %v: %s call of %s", worst.Round(time.Microsecond), worstOp, worstCall)
	t.Logf("monitor: %d ticks read, %d failed; killer: %d kills, %d connections killed, %d failed",
		r.ticks.Load(), r.tickErrs.Load(), r.kills.Load(), r.killed.Load(), r.killErrs.Load())
	faults := "off"
	if *chaosFaults {
		faults = fmt.Sprintf("%d kills sent, %d connections killed", r.kills.Load(), r.killed.Load())
	}
	fmt.Printf("chaos %s: %v, %d procs x %d goroutines: %d acquisitions (%s); faults: %s; overlaps %d (+%d with a hold reported lost); fencing violations %d; phantom stalls %d (longest stretch %v); worst wait %v (%s), worst overshoot %v; lost holds %d; errors: %s\n",
		config, *chaosDuration, chaosProcs, chaosGoroutines, len(r.holds), strings.Join(opParts, ", "), faults,
		len(bad), len(excused), len(fencing), len(r.phantoms), longest.Round(time.Millisecond),
		worst.Round(time.Millisecond), worstOp, overshoot.Round(time.Millisecond), lost, strings.Join(errSummary, " "))
}

// ---- child side ----

// runChaosChild is main() of a TestChaos child process (RLOCK_TEST_HELPER=chaos): 8 goroutines
// lock the 3 names in random ways for DURATION and log every step on stdout. It returns 0 when
// every goroutine finished and all holds were released, 1 when Close failed, 2 on a setup
// error, and 3 when goroutines were still busy chaosChildGrace after the run (they are listed
// on stderr).
func runChaosChild() int {
	proc, err1 := strconv.Atoi(os.Getenv("PROC"))
	dur, err2 := time.ParseDuration(os.Getenv("DURATION"))
	watchdog, err3 := time.ParseDuration(os.Getenv("WATCHDOG"))
	fairWait, err4 := time.ParseDuration(os.Getenv("FAIRWAIT"))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		fmt.Fprintln(os.Stderr, "chaos child:", err)
		return 2
	}
	rc, err := chaosRueidis(os.Getenv("REDIS_ADDR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos child:", err)
		return 2
	}
	opts := rlock.Options{KeyPrefix: os.Getenv("PREFIX"), WatchdogTimeout: watchdog, FairWaitTimeout: fairWait, Wait: rlock.PubSub()}
	if os.Getenv("WAIT") == "spin" {
		opts.Wait = rlock.Spin(5 * time.Millisecond)
	}
	c, err := rlock.New(rc, opts)
	if err != nil {
		rc.Close()
		fmt.Fprintln(os.Stderr, "chaos child:", err)
		return 2
	}
	newMutex := c.NewMutex
	if os.Getenv("KIND") == "fair" {
		newMutex = c.NewFairMutex
	}
	mutexes := make([]*rlock.Mutex, len(chaosNames))
	for i, name := range chaosNames {
		mutexes[i] = newMutex(name, rlock.WithFencing())
	}

	log := newChaosLog(os.Stdout)
	end := time.Now().Add(dur)
	workers := make([]*chaosWorker, chaosGoroutines)
	var wg sync.WaitGroup
	for g := range workers {
		w := &chaosWorker{proc: proc, g: g, log: log, mutexes: mutexes,
			rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(proc*chaosGoroutines+g)))}
		workers[g] = w
		wg.Add(1)
		go func() { defer wg.Done(); w.run(end) }()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		// Every hold was released: nothing is left for Close to drop.
		err := c.Close()
		rc.Close()
		log.close()
		if err != nil {
			fmt.Fprintln(os.Stderr, "chaos child: Close:", err)
			return 1
		}
		return 0
	case <-time.After(dur + chaosChildGrace):
		// Close could wait behind the stuck calls: the exit ends them.
		log.close()
		for _, w := range workers {
			if st := w.status.Load(); st != nil {
				fmt.Fprintf(os.Stderr, "chaos child %d goroutine %d: stuck in %s on %s for %v\n",
					proc, w.g, st.step, st.name, time.Since(st.since).Round(time.Millisecond))
			}
		}
		return 3
	}
}

// chaosRueidis connects to addr, retrying for a while: the parent's killer may already be
// closing connections, the first one included.
func chaosRueidis(addr string) (rueidis.Client, error) {
	var err error
	for range 50 {
		var rc rueidis.Client
		if rc, err = rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true}); err == nil {
			return rc, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, err
}

// chaosLog is a child's log: lines go to a buffer that a goroutine flushes every
// chaosFlushEvery, so the parent sees them promptly without a write per line.
type chaosLog struct {
	mu   sync.Mutex
	w    *bufio.Writer
	stop chan struct{}
	done chan struct{}
}

// newChaosLog starts a log on w and its flusher.
func newChaosLog(w io.Writer) *chaosLog {
	l := &chaosLog{w: bufio.NewWriterSize(w, 64<<10), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(chaosFlushEvery)
		defer tick.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-tick.C:
				l.mu.Lock()
				_ = l.w.Flush()
				l.mu.Unlock()
			}
		}
	}()
	return l
}

// printf appends one line.
func (l *chaosLog) printf(format string, args ...any) {
	l.mu.Lock()
	fmt.Fprintf(l.w, format, args...)
	l.mu.Unlock()
}

// close stops the flusher and flushes what is left.
func (l *chaosLog) close() {
	close(l.stop)
	<-l.done
	l.mu.Lock()
	_ = l.w.Flush()
	l.mu.Unlock()
}

// chaosWorker is one goroutine of a child.
type chaosWorker struct {
	proc, g int
	rng     *rand.Rand
	log     *chaosLog
	mutexes []*rlock.Mutex
	status  atomic.Pointer[chaosStatus] // what it is doing, for the report of a stuck child
}

// chaosStatus is a worker's current step.
type chaosStatus struct {
	step, name string
	since      time.Time
}

// run does random ops until end: each picks a name, an owner (half the time one of its own
// through WithOwner, so the monitor knows it from the start; else Lock makes one) and an op.
func (w *chaosWorker) run(end time.Time) {
	for time.Now().Before(end) {
		m := w.mutexes[w.rng.IntN(len(w.mutexes))]
		base, owner := bg, "-"
		if w.rng.IntN(2) == 0 {
			owner = rlock.NewOwnerID()
			base = rlock.WithOwner(bg, owner)
		}
		switch w.rng.IntN(3) {
		case 0:
			w.nested(m, base, owner)
		case 1:
			w.try(m, base, owner)
		default:
			w.wait(m, base, owner)
		}
	}
	w.status.Store(nil)
}

// nested takes m with a blocking Lock, re-enters it 1-3 times through the latest hold
// context, and releases the re-entries in reverse order before the outer hold. Its critical
// section goes on after the re-entries are released (where a miscounted release shows).
func (w *chaosWorker) nested(m *rlock.Mutex, base context.Context, owner string) {
	w.begin(m, owner, "nested", 0)
	h, err := m.Lock(base)
	if err != nil {
		w.failed(m, owner, err)
		return
	}
	owner, token := w.enter(m, owner, h)
	cur, inner := h, []context.Context(nil)
	for range 1 + w.rng.IntN(3) {
		w.setStatus("re-entry", m)
		hi, err := m.Lock(cur)
		if err != nil {
			w.event(m, owner, "reenter", chaosCauseClass(err, cur), err)
			break
		}
		if tok, ok := m.Token(hi); !ok || tok != token {
			w.event(m, owner, "token-changed", "bad", fmt.Errorf("re-entry has token %d (%v), the hold %d", tok, ok, token))
		}
		inner, cur = append(inner, hi), hi
	}
	w.critical()
	for i := len(inner) - 1; i >= 0; i-- {
		w.setStatus("inner unlock", m)
		if err := m.Unlock(inner[i]); err != nil {
			w.event(m, owner, "inner-unlock", chaosClass(err), err)
		}
	}
	w.critical()
	w.exit(m, owner, token, h, false)
	w.unlock(m, owner, h)
}

// try takes m with TryLock, waiting 0-20 ms; ErrNotObtained is normal.
func (w *chaosWorker) try(m *rlock.Mutex, base context.Context, owner string) {
	wait := time.Duration(w.rng.IntN(21)) * time.Millisecond
	w.begin(m, owner, "try", wait)
	h, err := m.TryLock(base, wait)
	if err != nil {
		w.failed(m, owner, err)
		return
	}
	owner, token := w.enter(m, owner, h)
	w.critical()
	w.exit(m, owner, token, h, false)
	w.unlock(m, owner, h)
}

// wait takes m with Lock and a context that times out after 1-30 ms; the timeout is normal.
// The hold context derives from that context, so it ends with it: only another cause counts.
func (w *chaosWorker) wait(m *rlock.Mutex, base context.Context, owner string) {
	d := time.Duration(1+w.rng.IntN(30)) * time.Millisecond
	ctx, cancel := context.WithTimeout(base, d)
	defer cancel()
	w.begin(m, owner, "wait", d)
	h, err := m.Lock(ctx)
	if err != nil {
		w.failed(m, owner, err)
		return
	}
	owner, token := w.enter(m, owner, h)
	w.critical()
	w.exit(m, owner, token, h, true)
	w.unlock(m, owner, h)
}

// critical is the critical section: a sleep of 0-2 ms.
func (w *chaosWorker) critical() {
	time.Sleep(time.Duration(w.rng.IntN(2001)) * time.Microsecond)
}

// setStatus records the worker's current step.
func (w *chaosWorker) setStatus(step string, m *rlock.Mutex) {
	w.status.Store(&chaosStatus{step: step, name: m.Name(), since: time.Now()})
}

// line writes one log line (see the file comment) stamped now.
func (w *chaosWorker) line(kind byte, m *rlock.Mutex, owner, a, b, msg string) {
	if msg == "" {
		msg = "-"
	}
	msg = strings.ReplaceAll(msg, "\n", " ")
	w.log.printf("%c %d %d %s %s %d %s %s %s\n", kind, w.proc, w.g, m.Name(), owner, time.Now().UnixNano(), a, b, msg)
}

// begin logs the start of a Lock or TryLock call of op bounded by bound (0: unbounded).
func (w *chaosWorker) begin(m *rlock.Mutex, owner, op string, bound time.Duration) {
	w.setStatus(op, m)
	w.line('B', m, owner, op, strconv.FormatInt(int64(bound), 10), "")
}

// failed logs a Lock or TryLock call that returned err.
func (w *chaosWorker) failed(m *rlock.Mutex, owner string, err error) {
	class, msg := chaosClass(err), ""
	if class != "notobtained" && class != "deadline" {
		msg = err.Error()
	}
	w.line('F', m, owner, class, "-", msg)
}

// enter logs an acquisition through hold context h and returns its owner and token; an owner
// other than the one asked for, or a missing token, is logged as an error event.
func (w *chaosWorker) enter(m *rlock.Mutex, asked string, h context.Context) (string, int64) {
	owner, ok := rlock.Owner(h)
	token, tokOK := m.Token(h)
	w.line('E', m, owner, strconv.FormatInt(token, 10), "-", "")
	if !ok || asked != "-" && owner != asked {
		w.event(m, owner, "owner-mismatch", "bad", fmt.Errorf("hold context carries owner %q (%v), asked for %q", owner, ok, asked))
	}
	if !tokOK || token <= 0 {
		w.event(m, owner, "token-missing", "bad", fmt.Errorf("Token = %d, %v", token, tokOK))
	}
	return owner, token
}

// exit logs the end of the critical section of the hold h, with the cause if h ended early (a
// deadline of the caller's context does not count when deadlineOK).
func (w *chaosWorker) exit(m *rlock.Mutex, owner string, token int64, h context.Context, deadlineOK bool) {
	state, msg := "ok", ""
	if h.Err() != nil {
		cause := context.Cause(h)
		if !deadlineOK || !errors.Is(cause, context.DeadlineExceeded) {
			state, msg = chaosClass(cause), cause.Error()
		}
	}
	w.line('X', m, owner, strconv.FormatInt(token, 10), state, msg)
}

// unlock releases the hold h and logs the outcome; an Unlock that failed without a verdict
// (transport or Redis error) is retried up to twice, as the API allows.
func (w *chaosWorker) unlock(m *rlock.Mutex, owner string, h context.Context) {
	w.setStatus("unlock", m)
	var err error
	for range 3 {
		err = m.Unlock(h)
		if class := chaosClass(err); class != "transport" && class != "redis" {
			break
		}
		w.event(m, owner, "unlock-retry", chaosClass(err), err)
	}
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	w.line('U', m, owner, chaosClass(err), "-", msg)
}

// event logs an error event (a W line).
func (w *chaosWorker) event(m *rlock.Mutex, owner, event, class string, err error) {
	w.line('W', m, owner, event, class, err.Error())
}

// chaosClass names the kind of err: ok, notobtained, lost, notheld, closed, invalid, canceled,
// deadline, redis (an error reply) or transport (anything else).
func chaosClass(err error) string {
	var re *rueidis.RedisError
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, rlock.ErrNotObtained):
		return "notobtained"
	case errors.Is(err, rlock.ErrLockLost):
		return "lost"
	case errors.Is(err, rlock.ErrNotHeld):
		return "notheld"
	case errors.Is(err, rlock.ErrClosed):
		return "closed"
	case errors.Is(err, rlock.ErrInvalid):
		return "invalid"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	case errors.As(err, &re):
		return "redis"
	}
	return "transport"
}

// chaosCauseClass is chaosClass of err, except that a context error of a hold context ctx
// that ended because its lock was lost is "lost".
func chaosCauseClass(err error, ctx context.Context) string {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) && errors.Is(context.Cause(ctx), rlock.ErrLockLost) {
		return "lost"
	}
	return chaosClass(err)
}
