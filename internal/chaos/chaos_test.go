package chaos_test

// TestChaos: 3 processes × 8 goroutines take 5 locks in every way the API allows while the test
// kills Redis connections (CLIENT KILL TYPE normal / pubsub) every 20-300 ms:
//
//   - three mutexes (c0, c1, c2): nested Lock, short TryLock, Lock with a context that times
//     out, and a hold with a fixed lease (chaosLongLease) re-entered with a much shorter one,
//     then held past the shorter lease (mixed-lease); and MultiLocks of two of them (sets that
//     overlap, each given its members in a random order; on a Cluster each member is a group of
//     its own): Lock, short TryLock and Lock with a context that times out;
//   - two read-write mutexes (r0, r1): the same for read holds and for write holds (a nested
//     write hold re-enters for writing or for reading; write-mixed-lease), a write hold
//     downgraded to a read hold (Lock, RLock through it, Unlock, then RUnlock), and both modes
//     held by one owner with leases of their own, watchdog or fixed and short, held past them
//     and released in either order (rw-modes);
//   - a semaphore of chaosSemPermits permits (s0): Acquire, TryAcquire and Acquire with a
//     context that times out, of 1 or 2 permits each.
//
// A fourth process (the outage child: one goroutine, WatchdogTimeout chaosOutageWatchdog, a
// mutex o0 and a read-write mutex o1 of its own so that its ops are not starved by the others)
// reaches Redis through the parent's fault proxy and releases across outages: an owner
// (WithOwner) holds a mutex twice, or holds a read-write mutex for writing and reading, and its
// first Unlock loses its reply and meets an outage of chaosOutage, longer than the release's
// retries; it retries that Unlock (given the WithOwner context) once a watchdog pass has
// settled the request (retry-twice), or first RUnlocks given the write hold's context
// (retry-modes). The retried release must return the first one's outcome and release nothing
// more: the second hold still held, the read hold released by RUnlock; a release that frees
// another hold, or takes another release's outcome, is a double release. It starts an op only
// with chaosOutageOp of the run left: a run of 8 s or less has none (make test runs 15 s).
//
// A configuration runs the plain kinds (NewMutex, NewRWMutex) or the fair ones (NewFairMutex,
// NewFairRWMutex), the semaphore in both, under one wait strategy. Every child process writes
// an append-only log of its calls on stdout; the parent reads it live (a monitor compares it
// with the lock hashes in Redis) and checks it after the run:
//
//   - exclusion: no write hold (every mutex hold is one) overlaps a hold of another owner, and
//     the semaphore holds that overlap never add up to more than its permits (the log's
//     enter/exit times lie inside the real holds: enter is taken after the acquiring call
//     returned, exit before the hold context is checked, so a hold whose context was then
//     live was still held at exit): an overlap is two live holders. Holds
//     whose context had ended (lost, or at the deadline of its fixed lease) when their
//     critical section ended, at a time when their lease could have run out, do not count: a
//     conflict that needs one of them is reported, not failed (a hold whose context was still
//     live there counts, even if its release then reports ErrLockLost);
//   - fencing tokens follow the holds: a write hold whose call began after another hold of
//     its name exited has a larger token, a read hold one at least as large (the call's begin,
//     not its enter, which a stalled process may log after its lease ran out and other holds
//     came and went);
//   - no owner holds a mutex or read-write mutex in Redis (a hash field whose lease has not
//     run out) for more than 2 s while no call of that owner is live (a phantom hold: others
//     wait for nothing; a call that returned an error must hold nothing); an owner the logs
//     have not named yet (Lock made it) gets chaosAnonGrace to show up in an E line first. A
//     semaphore hold has no owner, so its hold id (the hash field) is matched with the hold
//     records the children's Observer reports instead (H lines): no hold in Redis for more than
//     2 s that no process has a live record of (chaosAnonGrace for an id not reported yet);
//   - hold records (Observer events, every kind): each started record ends exactly once, and
//     none is still there for Close to end (every hold was released before Close): a record
//     that outlives every call is a hold the library kept for nobody;
//   - no call returns an error the API does not allow for it; ErrLockLost is allowed only once
//     the hold's lease could have run out: half the watchdog's after the hold began (holds last
//     milliseconds), or most of a fixed lease (a tenth less, about the library's margin, and 2 ms),
//     counted from when the call (or a re-entry with a shorter lease) began;
//   - no double releases (see the outage child);
//   - no leftovers: each child, after Close, has no subscription left on any of its connections
//     (CLIENT LIST, by client name) and no goroutine (goleak); the parent's env finds no keys
//     but fencing counters and no channels under the prefix.
//
// -chaos.faults=false runs the same without the killer: a baseline that must pass.
//
// Log lines: "K proc goroutine name owner unixnano a b message", nine space-separated fields
// (the message may hold spaces; "-" fills unused ones), where K is
//
//	B  a call begins: a = op (see chaosOps), b = its bound in ns (0: none); owner "-" when the
//	   call makes its own owner (then the owner is known only from E); message = permits asked
//	   for (semaphore calls, whose owner is an id of the call: holds there have no owner), else
//	   the hold's fixed lease in ns ("-": the watchdog's)
//	R  a re-entry of the call's hold with a fixed lease of its own begins: a = that lease in ns
//	G  the call holds a second time, as the same owner, in the other mode or the same, or (a
//	   MultiLock) holds its second member, named by the line: a = token, b = mode (r or w),
//	   message = "<ns when that call began> <its fixed lease in ns, 0: the watchdog's>"
//	x  as X, u as U, for the second hold (G)
//	E  it acquired: a = fencing token (0 for a semaphore)
//	F  it failed: a = error class
//	D  a downgrade: the write hold ends here (its Unlock is called next) and a read hold of the
//	   same owner goes on; a = token, b = "ok" or the class of the write hold context's cause
//	X  the critical section ends: a = token, b = "ok" or the class of the hold context's cause
//	U  the release of that hold returned: a = error class ("ok")
//	W  another error: a = event (reenter, inner-unlock, unlock-retry, token-changed,
//	   outage-unlock, double-release, ...), b = class
//	H  an Observer hold event (goroutine -1: it belongs to no call): owner = the hold's owner
//	   (a semaphore's: its hold id), a = started or ended, b = outcome (ended) or "-"

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/hex"
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
	"go.uber.org/goleak"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/internal/wire"
)

var (
	chaosDuration = flag.Duration("chaos.duration", 5*time.Second, "TestChaos: run time of each of its 4 configurations")
	chaosFaults   = flag.Bool("chaos.faults", true, "TestChaos: kill Redis connections during the run (false: a baseline without faults)")
)

// Shape of a chaos run.
const (
	chaosProcs      = 3
	chaosGoroutines = 8
	chaosSemPermits = 3                      // permits of the semaphore
	chaosWatchdog   = 3 * time.Second        // WatchdogTimeout of the children
	chaosFairWait   = time.Second            // FairWaitTimeout of the children
	chaosPhantom    = 2 * time.Second        // longest an owner may hold a lock in Redis with no live call
	chaosAnonGrace  = 500 * time.Millisecond // an owner not in the logs yet is credited this long
	chaosMaxRTT     = time.Second            // longest a Redis reply is assumed to take
	chaosTick       = 20 * time.Millisecond
	chaosFlushEvery = 5 * time.Millisecond // children flush their log at least this often
	chaosChildGrace = 30 * time.Second     // a child still busy this long after its run reports and exits 3
	chaosMaxReports = 10                   // details printed per kind of finding

	chaosLongLease = time.Second // the fixed lease of a mixed-lease op's outer hold
	// The outage child (see the file comment): its lease outlasts an outage and a settling
	// pass (a third of it), and it starts no op that could not end with the run.
	chaosOutageWatchdog = 6 * time.Second
	chaosOutage         = 3500 * time.Millisecond // longer than a release's retries (3 s)
	chaosOutageOp       = 8 * time.Second         // the longest an outage op takes
)

// chaosOutageProc is the outage child's process number (the others are 0..chaosProcs-1).
const chaosOutageProc = chaosProcs

// chaosWatchdogOf is the WatchdogTimeout of process proc.
func chaosWatchdogOf(proc int) time.Duration {
	if proc == chaosOutageProc {
		return chaosOutageWatchdog
	}
	return chaosWatchdog
}

// chaosOwnerPrefix starts the owner ids of the outage child's ops: the proxy's fault matches
// their releases only.
const chaosOwnerPrefix = "retry-"

// Kinds of chaos locks.
const (
	chaosMutex = "mutex"
	chaosRW    = "rw"
	chaosSem   = "semaphore"
)

// chaosLock is a lock of the children.
type chaosLock struct {
	name, kind string
	outage     bool // the outage child's alone (its ops must not starve behind the others)
}

// chaosLocks are the locks of the children.
var chaosLocks = []chaosLock{{"c0", chaosMutex, false}, {"c1", chaosMutex, false}, {"c2", chaosMutex, false},
	{"r0", chaosRW, false}, {"r1", chaosRW, false}, {"s0", chaosSem, false}, {"o0", chaosMutex, true}, {"o1", chaosRW, true}}

// chaosKindOf is the kind of the lock called name ("" if none).
func chaosKindOf(name string) string {
	for _, l := range chaosLocks {
		if l.name == name {
			return l.kind
		}
	}
	return ""
}

// chaosOps are the ops of the children, per kind, in report order.
var chaosOps = []string{
	"nested", "try", "wait", "mixed-lease", // mutex
	"multi-lock", "multi-try", "multi-wait", // two mutexes (MultiLock)
	"read-nested", "read-try", "read-wait", "write-nested", "write-try", "write-wait", "downgrade", // rw
	"write-mixed-lease", "rw-modes", // rw
	"sem-acquire", "sem-try", "sem-wait", // semaphore
	"retry-twice", "retry-modes", // the outage child
}

// TestChaos runs the chaos test for both lock families (plain, fair) and both wait strategies,
// each for -chaos.duration.
func TestChaos(t *testing.T) {
	redistest.NeedsThrowaway(t)
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
	e := redistest.NewEnv(t)
	r := newChaosRun(e.Prefix)
	var killers []node // connections of their own: CLIENT KILL spares the connection that sends it
	for _, a := range e.Dep.Data {
		killers = append(killers, redistest.NewNode(t, a))
	}
	monitorRC := e.Rueidis()
	// The outage child's proxy; a fault armed on a script must meet the call that runs it, not
	// a NOSCRIPT reply, so every script is loaded first.
	proxy := redistest.NewProxy(t, e.Dep.Data...)
	chaosLoadScripts(t, e.Dep.Masters)

	children := make([]*redistest.Child, chaosProcs+1)
	for p := range children {
		env := []string{"PREFIX=" + e.Prefix, "KIND=" + kind, "WAIT=" + wait,
			"DURATION=" + chaosDuration.String(), "WATCHDOG=" + chaosWatchdogOf(p).String(),
			"FAIRWAIT=" + chaosFairWait.String(), "PROC=" + strconv.Itoa(p)}
		if p == chaosOutageProc {
			env = append(env, "PROXY="+proxy.Routes())
		}
		children[p] = redistest.StartChild(t, "chaos", env...)
	}

	var bgWG sync.WaitGroup
	stopKiller, stopMonitor := make(chan struct{}), make(chan struct{})
	if *chaosFaults {
		bgWG.Add(1)
		go func() { defer bgWG.Done(); r.kill(killers, stopKiller) }()
	}
	bgWG.Add(1)
	go func() { defer bgWG.Done(); r.monitor(monitorRC, stopMonitor) }()
	// The outage child's faults: armed when one of its ops begins, then the child is told.
	outageIn := children[chaosOutageProc].In
	bgWG.Add(1)
	go func() {
		defer bgWG.Done()
		for {
			select {
			case <-stopMonitor:
				return
			case <-r.arm:
			}
			if *chaosFaults {
				proxy.DropReplyThenOutage(chaosMatchOwnerRelease, chaosOutage)
			} else {
				proxy.Disarm()
			}
			_, _ = io.WriteString(outageIn, "go\n")
		}
	}()

	// Readers: each reads its child's log to the end, then reaps the child.
	exits := make([]error, len(children))
	var readers sync.WaitGroup
	for p, c := range children {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for c.Out.Scan() {
				r.line(c.Out.Text())
			}
			if err := c.Out.Err(); err != nil {
				r.parseError(fmt.Sprintf("child %d: reading its log: %v", p, err))
				_ = c.Cmd.Process.Kill() // it may block on a full pipe
			}
			exits[p] = c.Cmd.Wait()
		}()
	}
	readersDone := make(chan struct{})
	go func() { readers.Wait(); close(readersDone) }()
	select {
	case <-readersDone:
	case <-time.After(*chaosDuration + chaosChildGrace + 15*time.Second):
		t.Errorf("children did not exit within %v of the end of the run: killing them", chaosChildGrace+15*time.Second)
		for _, c := range children {
			_ = c.Cmd.Process.Kill()
		}
		<-readersDone
	}
	close(stopKiller) // the children ran their last releases under faults too
	// The monitor goes on until no lock is held in Redis (or a lease and a bit has passed),
	// so a hold left behind at the end is measured too.
	r.mu.Lock()
	r.childrenGone = time.Now()
	r.mu.Unlock()
	select {
	case <-r.settled:
	case <-time.After(chaosWatchdog + 2*time.Second):
	}
	close(stopMonitor)
	bgWG.Wait()
	r.outages = proxy.Fired()

	for p, err := range exits {
		if err != nil {
			t.Errorf("child %d failed: %v (its stderr is above)", p, err)
		}
	}
	r.report(t, kind+"/"+wait)
}

// chaosLoadScripts loads every script (both pub/sub variants) on each of masters.
func chaosLoadScripts(t *testing.T, masters []node) {
	for _, m := range masters {
		for _, f := range wire.Files() {
			for _, src := range []string{wire.Source(f), wire.ShardedSource(f)} {
				if err := m.Do(t, "SCRIPT", "LOAD", src).Error(); err != nil {
					t.Fatalf("SCRIPT LOAD on %s: %v", m.Addr, err)
				}
			}
		}
	}
}

// chaosReleaseSums are the SHA-1s of the release scripts of the mutexes and read-write mutexes,
// both pub/sub variants.
var chaosReleaseSums = func() map[string]bool {
	sums := make(map[string]bool)
	for _, f := range []string{"release.lua", "fair_release.lua", "rw_release.lua"} {
		for _, src := range []string{wire.Source(f), wire.ShardedSource(f)} {
			sum := sha1.Sum([]byte(src))
			sums[hex.EncodeToString(sum[:])] = true
		}
	}
	return sums
}()

// chaosMatchOwnerRelease matches a release script (EVALSHA or EVAL) for an owner of the outage
// child's ops (see chaosOwnerPrefix).
func chaosMatchOwnerRelease(cmd []string) bool {
	if len(cmd) < 3 {
		return false
	}
	switch strings.ToUpper(cmd[0]) {
	case "EVALSHA":
		if !chaosReleaseSums[strings.ToLower(cmd[1])] {
			return false
		}
	case "EVAL":
		sum := sha1.Sum([]byte(cmd[1]))
		if !chaosReleaseSums[hex.EncodeToString(sum[:])] {
			return false
		}
	default:
		return false
	}
	return slices.ContainsFunc(cmd[3:], func(a string) bool { return strings.HasPrefix(a, chaosOwnerPrefix) })
}

// chaosRun is the parent's view of one run: the holds from the logs, what the monitor saw, and
// the fault counts. Its fields are guarded by mu, except the atomics.
type chaosRun struct {
	prefix   string
	arm      chan struct{} // an op of the outage child began: arm its fault
	outages  int64         // faults the outage child's proxy fired (lost replies, each with an outage)
	startNs  int64         // parent's clock at the start, UnixNano (times in reports are relative to it)
	settled  chan struct{} // closed when the monitor finds no hold after the children exited
	kills    atomic.Int64  // CLIENT KILL commands that succeeded
	killed   atomic.Int64  // connections they closed
	killErrs atomic.Int64  // CLIENT KILL commands that failed (the killer's own connection was killed)
	ticks    atomic.Int64  // monitor ticks that read all locks
	tickErrs atomic.Int64  // monitor ticks that failed

	mu           sync.Mutex
	childrenGone time.Time               // zero while children run
	calls        map[[2]int]*chaosCall   // each goroutine's current call, by (proc, goroutine)
	owners       map[string]*chaosOwner  // every owner of a mutex or rw mutex seen in a log line
	records      map[string]*chaosRecord // hold records (H lines), by name+" "+owner
	recordErrs   []string                // hold records that did not start and end as they must
	recordErrN   int
	holds        []*chaosHold
	stretches    map[string]*chaosStretch // (name, owner) in Redis with no live call, by name+" "+owner
	firstSeen    map[string]time.Time     // when the monitor first saw (name, owner) in Redis
	phantoms     []*chaosStretch          // stretches longer than chaosPhantom
	longest      *chaosStretch            // longest stretch, phantom or not
	seenTicks    map[string]int           // kind -> monitor ticks that saw a hold of that kind in Redis
	semBook      []string                 // semaphore hashes whose permits-in-use field disagreed with their holds
	semBookCount int
	errCounts    map[string]int           // unexpected and tolerated error kinds -> count
	errSamples   map[string][]chaosSample // a few events of each kind
	failKinds    map[string]bool          // kinds that fail the test
	ops          map[string]*chaosOpStats // per op
	parseErrs    []string
}

// chaosCall is one acquiring call of a child goroutine and the hold it took.
type chaosCall struct {
	op     string
	owner  string // "-" until E when the call makes its own owner
	bound  time.Duration
	lease  time.Duration // fixed lease of its hold (0: the watchdog's)
	begin  int64         // child's UnixNano
	n      int64         // permits asked for (semaphore)
	hold   *chaosHold
	prev   *chaosHold // the write hold a downgrade ended
	second *chaosHold // the second hold of the call (G)
}

// chaosHold is one acquisition, from E to U (for a downgrade: the write hold from E to D, and
// the read hold from D to U).
type chaosHold struct {
	name, kind, owner, op string
	mode                  byte  // 'w' (write; every mutex hold), 'r' (read) or 's' (semaphore)
	n                     int64 // permits (semaphore)
	proc, g               int
	token                 int64
	begin                 int64         // B, child's UnixNano
	enter, exit           int64         // E and X; exit 0 if never logged
	unlocked              int64         // U; 0 if never logged
	lost                  bool          // the library reported this hold lost (context cause or an ErrLockLost)
	lostEarly             bool          // ... too soon for its lease to have run out
	lossFrom              int64         // the earliest child UnixNano its lease could have run out at
	fixed                 bool          // it has a fixed lease (or was re-entered with one)
	lease                 time.Duration // its fixed lease (0: the watchdog's), as taken
	exitState             string        // its hold context's state at exit (X)
	ctxEnded              bool          // its hold context had ended (lost, or at its fixed lease's deadline) by its exit
	unlockClass, why      string
}

// excused reports whether h does not count in the exclusion checks: its hold context had
// ended (lost, or at the deadline of its fixed lease) by the end of its critical section, at a
// time when its lease could have run out. (A hold whose context was still live there, reported
// lost only by its release, counts: its holder went on as if it held the lock.)
func (h *chaosHold) excused() bool { return h.ctxEnded && !h.lostEarly }

// chaosLossFrom is the earliest child time at which a hold taken by a call that began at begin
// and returned at enter may be reported lost. A fixed lease counts from when the acquiring
// script was sent, after begin, and the library ends it 1 ms and 0.1 % early (localEnd): no
// more than a tenth for leases of 11 ms and more, 0.01 ms more at 10 ms (the shortest here); 2 ms
// more allow for that and a busy machine. A watchdog hold is renewed: a loss half a lease after it
// began (the script sent no earlier than a round trip before enter) is possible under faults,
// one before that is not.
func chaosLossFrom(begin, enter int64, lease, watchdog time.Duration) int64 {
	if lease > 0 {
		return begin + int64(lease-lease/10-2*time.Millisecond)
	}
	return max(begin, enter-int64(chaosMaxRTT)) + int64(watchdog/2)
}

// chaosOwner is what the logs say about one owner id, for the monitor.
type chaosOwner struct {
	proc, g      int
	name, op     string
	began, ended time.Time // parent's clock when its B (or E) and its F or U lines arrived
	live         bool      // a call of this owner is in flight or holds the lock
	outcome      string
}

// chaosRecord is a hold record a child's Observer reported (H lines).
type chaosRecord struct {
	proc           int
	started, ended time.Time // parent's clock when its H lines arrived
	live           bool
	outcome        string
	starts, ends   int
}

// chaosStretch is a time during which Redis showed owner (a semaphore's: a hold id) holding
// name while no live call (semaphore: no live hold record) had it.
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
		prefix: prefix, startNs: now.UnixNano(), settled: make(chan struct{}), arm: make(chan struct{}, 1),
		calls:      make(map[[2]int]*chaosCall),
		owners:     make(map[string]*chaosOwner),
		records:    make(map[string]*chaosRecord),
		stretches:  make(map[string]*chaosStretch),
		firstSeen:  make(map[string]time.Time),
		seenTicks:  make(map[string]int),
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

// line takes one log line of a child: it updates the live owners and permits (for the
// monitor) and the holds, error counts and wait figures (for the report).
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
	kind := chaosKindOf(name)
	if kind == "" {
		r.parseError("unknown lock: " + s)
		return
	}
	now := time.Now()
	pg := [2]int{proc, g}

	r.mu.Lock()
	defer r.mu.Unlock()
	if f[0] == "H" {
		r.record(proc, name, owner, a, b, now, s)
		return
	}
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
		if proc == chaosOutageProc && strings.HasPrefix(a, "retry-") {
			select {
			case r.arm <- struct{}{}:
			default:
			}
		}
		st := r.ops[a]
		if st == nil {
			st = &chaosOpStats{}
			r.ops[a] = st
		}
		st.calls++
		if kind == chaosSem {
			n, err := strconv.ParseInt(msg, 10, 64)
			if err != nil || n < 1 || n > chaosSemPermits {
				r.badLine("bad permits: " + s)
				return
			}
			call.n = n
		} else {
			if msg != "-" {
				lease, err := strconv.ParseInt(msg, 10, 64)
				if err != nil || lease <= 0 {
					r.badLine("bad lease: " + s)
					return
				}
				call.lease = time.Duration(lease)
			}
			if owner != "-" {
				r.owners[owner] = &chaosOwner{proc: proc, g: g, name: name, op: a, began: now, live: true}
			}
		}
	case "E":
		token, err := strconv.ParseInt(a, 10, 64)
		if err != nil {
			r.badLine("bad token: " + s)
			return
		}
		mode := byte('w')
		switch {
		case kind == chaosSem:
			mode = 's'
		case strings.HasPrefix(call.op, "read-"):
			mode = 'r'
		}
		if kind != chaosSem {
			o := r.owners[owner]
			if o == nil {
				o = &chaosOwner{proc: proc, g: g, name: name, op: call.op, began: now}
				r.owners[owner] = o
			}
			o.live = true
		}
		h := &chaosHold{name: name, kind: kind, owner: owner, op: call.op, mode: mode, n: call.n,
			proc: proc, g: g, token: token, begin: call.begin, enter: ts, fixed: call.lease > 0, lease: call.lease,
			lossFrom: chaosLossFrom(call.begin, ts, call.lease, chaosWatchdogOf(proc))}
		call.hold, call.owner = h, owner
		r.holds = append(r.holds, h)
		r.waited(pg, call, ts, s)
	case "F":
		if o := r.owners[owner]; o != nil && kind != chaosSem {
			o.live, o.ended, o.outcome = false, now, "its "+call.op+" call failed ("+a+")"
		}
		r.waited(pg, call, ts, s)
		r.countErr(call, "lock:"+call.op, a, ts, s)
	case "D":
		token, err := strconv.ParseInt(a, 10, 64)
		if err != nil || call.hold == nil || call.hold.mode != 'w' || kind != chaosRW || call.prev != nil {
			r.badLine("bad downgrade: " + s)
			return
		}
		w := call.hold
		w.exit, w.unlocked, w.unlockClass, w.ctxEnded = ts, ts, "downgraded", b == "lost"
		if b != "ok" && b != "-" {
			r.countErr(call, "hold-ended", b, ts, s, w)
			noteLost(b, "its hold context ended before the downgrade", w)
		}
		h := &chaosHold{name: name, kind: kind, owner: owner, op: call.op, mode: 'r',
			proc: proc, g: g, token: token, begin: call.begin, enter: ts, lossFrom: w.lossFrom, fixed: w.fixed}
		call.hold, call.prev = h, w
		r.holds = append(r.holds, h)
	case "R":
		lease, err := strconv.ParseInt(a, 10, 64)
		if err != nil || lease <= 0 || call.hold == nil || kind == chaosSem {
			r.badLine("bad re-entry: " + s)
			return
		}
		call.hold.lossFrom = min(call.hold.lossFrom, chaosLossFrom(ts, ts, time.Duration(lease), 0))
		call.hold.fixed = true
	case "G":
		token, err1 := strconv.ParseInt(a, 10, 64)
		var began, lease int64
		_, err2 := fmt.Sscanf(msg, "%d %d", &began, &lease)
		if err := errors.Join(err1, err2); err != nil || call.hold == nil || call.second != nil ||
			kind == chaosSem || (b != "r" && b != "w") {
			r.badLine("bad second hold: " + s)
			return
		}
		h := &chaosHold{name: name, kind: kind, owner: owner, op: call.op, mode: b[0],
			proc: proc, g: g, token: token, begin: began, enter: ts, fixed: lease > 0, lease: time.Duration(lease),
			lossFrom: chaosLossFrom(began, ts, time.Duration(lease), chaosWatchdogOf(proc))}
		call.second = h
		r.holds = append(r.holds, h)
	case "x":
		h := call.second
		if h == nil {
			r.badLine("exit without a second hold: " + s)
			return
		}
		h.exit, h.ctxEnded, h.exitState = ts, chaosEnded(b), b
		if b != "ok" {
			r.countErr(call, "hold-ended", b, ts, s, h)
			noteLost(b, "its hold context ended early: "+msg, h)
		}
	case "u":
		h := call.second
		if h == nil {
			r.badLine("unlock without a second hold: " + s)
			return
		}
		h.unlocked, h.unlockClass = ts, a
		if o := r.owners[owner]; o != nil && call.hold != nil && call.hold.unlocked != 0 {
			o.live, o.ended, o.outcome = false, now, "unlocked ("+a+")"
		}
		if a != "ok" {
			r.countErr(call, "unlock", a, ts, s, h)
			noteLost(a, "release: "+msg, h)
		}
	case "X":
		if call.hold == nil {
			r.badLine("exit without enter: " + s)
			return
		}
		call.hold.exit, call.hold.ctxEnded, call.hold.exitState = ts, chaosEnded(b), b
		if b != "ok" {
			r.countErr(call, "hold-ended", b, ts, s, call.hold)
			noteLost(b, "its hold context ended early: "+msg, call.hold)
		}
	case "U":
		if call.hold == nil {
			r.badLine("unlock without enter: " + s)
			return
		}
		call.hold.unlocked, call.hold.unlockClass = ts, a
		if o := r.owners[owner]; o != nil && kind != chaosSem && (call.second == nil || call.second.unlocked != 0) {
			o.live, o.ended, o.outcome = false, now, "unlocked ("+a+")"
		}
		if a != "ok" {
			r.countErr(call, "unlock", a, ts, s)
			call.noteLost(a, "release: "+msg)
		}
	case "W":
		r.countErr(call, a, b, ts, s)
		call.noteLost(b, a+": "+msg)
	default:
		r.badLine("unknown line kind: " + s)
	}
}

// record takes an H line of process proc (kind started or ended, outcome) about the hold
// record of owner on name, which arrived at now. Called with mu held.
func (r *chaosRun) record(proc int, name, owner, kind, outcome string, now time.Time, s string) {
	key := name + " " + owner
	rec := r.records[key]
	bad := func(what string) {
		r.recordErrN++
		if len(r.recordErrs) < chaosMaxReports {
			r.recordErrs = append(r.recordErrs, what+": "+s)
		}
	}
	switch kind {
	case "started":
		if rec == nil {
			rec = &chaosRecord{proc: proc}
			r.records[key] = rec
		}
		if rec.live {
			bad("a hold record started again before it ended")
		}
		rec.live, rec.started, rec.starts, rec.outcome = true, now, rec.starts+1, ""
	case "ended":
		if rec == nil || !rec.live {
			bad("a hold record ended that had not started")
			return
		}
		rec.live, rec.ended, rec.ends, rec.outcome = false, now, rec.ends+1, outcome
		if outcome == "closed" {
			bad("a hold record outlived every call (Close ended it; every hold had been released before Close)")
		}
	default:
		r.badLine("unknown hold event: " + s)
	}
}

// chaosEnded reports whether a hold context in state (see exit) had ended by the end of its
// critical section: lost, at its deadline, or cancelled (which countErr fails).
func chaosEnded(state string) bool {
	return state == "lost" || state == "deadline" || state == "canceled"
}

// noteLost marks the call's holds lost when class says the library reported the loss (both
// halves of a downgrade: their leases are renewed together).
func (c *chaosCall) noteLost(class, why string) { noteLost(class, why, c.hold, c.prev) }

// noteLost marks holds lost when class says the library reported the loss.
func noteLost(class, why string, holds ...*chaosHold) {
	for _, h := range holds {
		if h != nil && class == "lost" && !h.lost {
			h.lost, h.why = true, why
		}
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

// chaosVerdict judges an error of class (see chaosClass) at event: a failed call ("lock:" and
// its op), "hold-ended" (a hold context ended before its release), "unlock" (a release), or a
// child's W event. It returns the kind counted ("event:class").
func chaosVerdict(event, class string) (string, int) {
	kind := event + ":" + class
	op, isCall := strings.CutPrefix(event, "lock:")
	try := isCall && (op == "try" || strings.HasSuffix(op, "-try"))
	bounded := isCall && (op == "wait" || strings.HasSuffix(op, "-wait"))
	switch {
	case try && class == "notobtained", bounded && class == "deadline":
		return kind, chaosExpected
	case class == "lost" && slices.Contains([]string{"hold-ended", "unlock", "reenter", "inner-unlock", "downgrade-unlock", "downgrade-ended"}, event):
		// ErrLockLost: the lease ran out under faults, and the library said so.
		return kind, chaosTolerated
	case try && class == "transport":
		// A single attempt (or the last one) whose connection was killed: nothing is held.
		return kind, chaosTolerated
	case event == "outage-unlock" && class == "transport":
		// The outage child's injected fault: a lost reply, then an outage.
		return kind, chaosTolerated
	}
	return kind, chaosFailing
}

// countErr judges an error event of class at event, logged at child time ts by line s
// during call, about holds (none given: the call's hold, and the write hold a downgrade
// ended), and counts it unless it is expected. A hold context that ended at its deadline
// (class deadline) is the end of a fixed lease, tolerated for holds that have one (one that the
// owner's release of its other mode ended as released, class canceled, after its lease had run
// out but before its timer fired fails: such a record ends lost). A loss, or such an end,
// reported before the lease of every one of them could have run out (see chaosLossFrom; a call
// that holds nothing: half a watchdog lease after it began) counts as "lost-early", which fails
// the test. Called with mu held.
func (r *chaosRun) countErr(call *chaosCall, event, class string, ts int64, s string, holds ...*chaosHold) {
	kind, verdict := chaosVerdict(event, class)
	if verdict == chaosExpected {
		return
	}
	if len(holds) == 0 {
		holds = []*chaosHold{call.hold, call.prev}
	}
	lossFrom := call.begin + int64(chaosWatchdog/2)
	some, fixed := false, true
	for _, h := range holds {
		if h != nil {
			if !some || h.lossFrom < lossFrom {
				lossFrom = h.lossFrom
			}
			some, fixed = true, fixed && h.fixed
		}
	}
	leaseEnd := some && fixed && event == "hold-ended" && class == "deadline"
	if leaseEnd {
		verdict = chaosTolerated
	}
	if (class == "lost" || leaseEnd) && ts < lossFrom {
		kind, verdict = event+":lost-early", chaosFailing
		for _, h := range holds {
			if h != nil {
				h.lostEarly = true
			}
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

// kill sends CLIENT KILL TYPE normal and TYPE pubsub alternately to every data node, every
// 20-300 ms, until stop is closed. CLIENT KILL skips the connection that sends it. Errors are
// counted and skipped.
func (r *chaosRun) kill(nodes []node, stop <-chan struct{}) {
	types := [2]string{"normal", "pubsub"}
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(20+rand.IntN(281)) * time.Millisecond):
		}
		for _, n := range nodes {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			k, err := n.RC.Do(ctx, n.RC.B().Arbitrary("CLIENT", "KILL", "TYPE", types[i%2]).Build()).AsInt64()
			cancel()
			if err != nil {
				r.killErrs.Add(1)
				continue
			}
			r.kills.Add(1)
			r.killed.Add(k)
		}
	}
}

// chaosSnapshot is what one monitor tick read from Redis.
type chaosSnapshot struct {
	held    map[string][]string // lock name -> owners (semaphore: hold ids) holding it (live lease)
	semBook []string            // semaphore hashes whose wire.FieldUsed disagrees with their holds
}

// monitor reads every lock every chaosTick until stop is closed and tracks owners that Redis
// shows holding a lock while no live call of theirs is in the logs, and semaphore holds no
// process has a live record of. Failed reads (its connection was killed) are skipped.
//
// What it reads (the layout of each kind): a mutex's hash P:{name} has a field per owner; a
// read-write mutex's hash has fields "r:<owner>" and "w:<owner>", and its zset P:{name}:leases
// the lease end (server ms) of each; a semaphore's hash has a field per hold (its permits) and
// wire.FieldUsed (permits in use), and its leases zset the lease end of each hold. Fields that start
// with NUL or \x01 are internal. A hold counts while its lease has not run out (a field with no
// lease counts too).
func (r *chaosRun) monitor(rc rueidis.Client, stop <-chan struct{}) {
	// TIME first, on its own: a cluster client does not mix it with keyed commands.
	clock := rc.B().Time().Build().Pin()
	var cmds rueidis.Commands
	for _, l := range chaosLocks {
		base := r.prefix + ":{" + l.name + "}"
		cmds = append(cmds, rc.B().Hgetall().Key(base).Build().Pin(),
			rc.B().Zrange().Key(base+":leases").Min("0").Max("-1").Withscores().Build().Pin())
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
		res := append([]rueidis.RedisResult{rc.Do(ctx, clock)}, rc.DoMulti(ctx, cmds...)...)
		cancel()
		snap, err := chaosRead(res)
		if err != nil {
			r.tickErrs.Add(1)
			continue
		}
		r.ticks.Add(1)
		r.observe(time.Now(), snap)
	}
}

// chaosRead makes a snapshot of the replies to the monitor's commands.
func chaosRead(res []rueidis.RedisResult) (*chaosSnapshot, error) {
	t, err := res[0].AsStrSlice()
	if err != nil {
		return nil, err
	}
	if len(t) != 2 {
		return nil, fmt.Errorf("TIME: %q", t)
	}
	sec, err1 := strconv.ParseInt(t[0], 10, 64)
	usec, err2 := strconv.ParseInt(t[1], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	nowMs := float64(sec*1000 + usec/1000)
	snap := &chaosSnapshot{held: make(map[string][]string)}
	for i, l := range chaosLocks {
		fields, err := res[1+2*i].AsStrMap()
		if err != nil {
			return nil, err
		}
		zs, err := res[2+2*i].AsZScores()
		if err != nil {
			return nil, err
		}
		leases := make(map[string]float64, len(zs))
		for _, z := range zs {
			leases[z.Member] = z.Score
		}
		live := func(member string) bool {
			end, ok := leases[member]
			return !ok || end > nowMs
		}
		var sum int64
		for field, value := range fields {
			if strings.HasPrefix(field, "\x00") || strings.HasPrefix(field, "\x01") {
				continue // internal markers
			}
			switch l.kind {
			case chaosMutex:
				snap.held[l.name] = append(snap.held[l.name], field)
			case chaosRW:
				owner, ok := strings.CutPrefix(field, "r:")
				if !ok {
					owner, ok = strings.CutPrefix(field, "w:")
				}
				if ok && live(field) && !slices.Contains(snap.held[l.name], owner) {
					snap.held[l.name] = append(snap.held[l.name], owner)
				}
			case chaosSem:
				n, err := strconv.ParseInt(value, 10, 64)
				if err != nil {
					snap.semBook = append(snap.semBook, fmt.Sprintf("%s: hold %q has %q permits", l.name, field, value))
					continue
				}
				sum += n
				if live(field) {
					snap.held[l.name] = append(snap.held[l.name], field)
				}
			}
		}
		if l.kind == chaosSem {
			if u, ok := fields[wire.FieldUsed]; ok && u != strconv.FormatInt(sum, 10) {
				snap.semBook = append(snap.semBook, fmt.Sprintf("%s: permits in use %q, its holds have %d: %q", l.name, u, sum, fields))
			}
		}
	}
	return snap, nil
}

// observe compares one snapshot of the locks, taken at now, with the live calls of the logs.
func (r *chaosRun) observe(now time.Time, snap *chaosSnapshot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := make(map[string]bool)
	kinds := make(map[string]bool)
	for name, owners := range snap.held {
		kinds[chaosKindOf(name)] = true
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
	for kind := range kinds {
		r.seenTicks[kind]++
	}
	for _, b := range snap.semBook {
		r.semBookCount++
		if len(r.semBook) < chaosMaxReports {
			r.semBook = append(r.semBook, b)
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
	if len(snap.held) == 0 && !r.childrenGone.IsZero() {
		select {
		case <-r.settled:
		default:
			close(r.settled)
		}
	}
}

// credited reports whether a live call accounts for owner holding name in Redis at now (for
// the semaphore: whether a live hold record has hold id owner). An owner the logs have not
// named yet belongs to a call that makes its own owner (its E line, due milliseconds after
// Redis granted the lock, names it; a hold record is reported as the call learns of the
// grant): it is credited for chaosAnonGrace after the monitor first saw it. Past that, a call
// that acquired still has not returned, or a call that failed left its hold behind. Called
// with mu held.
func (r *chaosRun) credited(name, owner string, now time.Time) bool {
	if chaosKindOf(name) == chaosSem {
		if rec := r.records[name+" "+owner]; rec != nil {
			return rec.live
		}
	} else if o := r.owners[owner]; o != nil {
		return o.live
	}
	return now.Sub(r.firstSeen[name+" "+owner]) < chaosAnonGrace
}

// closeStretch ends stretch s (stored under key) and keeps it if it is a phantom or the
// longest. Called with mu held.
func (r *chaosRun) closeStretch(key string, s *chaosStretch) {
	delete(r.stretches, key)
	rec := r.records[s.name+" "+s.owner]
	switch o := r.owners[s.owner]; {
	case o != nil:
		s.about = fmt.Sprintf("owner of process %d goroutine %d, %s call on %s began at %s, %s at %s",
			o.proc, o.g, o.op, o.name, r.rel(o.began.UnixNano()), o.outcome, r.rel(o.ended.UnixNano()))
	case rec != nil:
		s.about = fmt.Sprintf("a hold of process %d whose record started at %s and ended (%s) at %s",
			rec.proc, r.rel(rec.started.UnixNano()), rec.outcome, r.rel(rec.ended.UnixNano()))
	default:
		s.about = "an owner or hold not named in the logs (made by a call that failed, or has not returned)"
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
	what := map[byte]string{'w': "write", 'r': "read", 's': fmt.Sprintf("%d permits", h.n)}[h.mode]
	lease := "watchdog"
	if h.lease > 0 {
		lease = h.lease.String()
	}
	s := fmt.Sprintf("[proc %d g %d %s (%s, lease %s) owner %s token %d: called %s, entered %s, exited %s (%s), released %s (%s)",
		h.proc, h.g, h.op, what, lease, h.owner, h.token, r.rel(h.begin), r.rel(h.enter), r.rel(h.exit), h.exitState,
		r.rel(h.unlocked), h.unlockClass)
	if h.lost {
		s += ", reported lost: " + h.why
	}
	if h.lostEarly {
		s += " (too early for its lease to have run out)"
	}
	return s + "]"
}

// describeAll formats holds for a report.
func (r *chaosRun) describeAll(hs []*chaosHold) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = r.describe(h)
	}
	return strings.Join(parts, " and ")
}

// chaosPair is two holds of one name that break a check.
type chaosPair struct{ a, b *chaosHold }

// chaosConflict is a set of holds of one name that were out together although the lock does
// not allow it: two holds of different owners of which one writes, or semaphore holds with
// more permits than it has.
type chaosConflict struct {
	name    string
	holds   []*chaosHold
	permits int64 // semaphore: the permits they held together
}

// conflicts returns the sets of holds, per name, that were out together against the rules of
// their lock: each hold with the holds out when it entered that it conflicts with. They are
// split into those the API allows (the conflict disappears without the holds the library
// reported lost at a time their lease could have run out) and the others.
func conflicts(holds []*chaosHold) (bad, excused []chaosConflict) {
	byName := make(map[string][]*chaosHold)
	for _, h := range holds {
		byName[h.name] = append(byName[h.name], h)
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		hs := byName[name]
		sort.SliceStable(hs, func(i, j int) bool { return hs[i].enter < hs[j].enter })
		var out []*chaosHold // the holds not yet exited when the current one entered
		for _, h := range hs {
			out = slices.DeleteFunc(out, func(o *chaosHold) bool { return exitOf(o) <= h.enter })
			if chaosKindOf(name) == chaosSem {
				var all, counted int64
				for _, o := range append(slices.Clone(out), h) {
					all += o.n
					if !o.excused() {
						counted += o.n
					}
				}
				if all > chaosSemPermits {
					c := chaosConflict{name: name, holds: append(slices.Clone(out), h), permits: all}
					if counted > chaosSemPermits {
						bad = append(bad, c)
					} else {
						excused = append(excused, c)
					}
				}
			} else {
				for _, o := range out {
					if o.owner == h.owner || o.mode != 'w' && h.mode != 'w' {
						continue
					}
					c := chaosConflict{name: name, holds: []*chaosHold{o, h}}
					if o.excused() || h.excused() {
						excused = append(excused, c)
					} else {
						bad = append(bad, c)
					}
				}
			}
			out = append(out, h)
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

// fencingViolations returns pairs (a, b) of holds of one mutex or rw mutex where b's call began
// after a exited (so Redis granted b after a) but b's token is smaller than a's, or not larger
// if b is a write hold.
func fencingViolations(holds []*chaosHold) []chaosPair {
	byName := make(map[string][]*chaosHold)
	for _, h := range holds {
		if h.kind != chaosSem {
			byName[h.name] = append(byName[h.name], h)
		}
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
			k := sort.Search(len(byExit), func(i int) bool { return exitOf(byExit[i]) >= b.begin })
			if k == 0 {
				continue
			}
			if a := maxTok[k-1]; a.token > b.token || a.token == b.token && b.mode == 'w' {
				bad = append(bad, chaosPair{a, b})
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
	bad, excused := conflicts(r.holds)
	fencing := fencingViolations(r.holds)
	lost := 0
	perKind := make(map[string]int)
	for _, h := range r.holds {
		if h.lost {
			lost++
		}
		if h.exit == 0 || h.unlocked == 0 {
			t.Errorf("hold never finished in the log: %s", r.describe(h))
		}
		if h.unlockClass != "downgraded" {
			perKind[h.kind]++
		}
	}
	for _, kind := range []string{chaosMutex, chaosRW, chaosSem} {
		// A monitor that never sees a kind held checks nothing for it: the layout it reads
		// (see monitor) is not the library's any more.
		if perKind[kind] >= 20 && r.seenTicks[kind] == 0 && r.ticks.Load() > 20 {
			t.Errorf("test bug: the monitor never saw a %s held in Redis in %d ticks (%d acquisitions): has the key layout changed?",
				kind, r.ticks.Load(), perKind[kind])
		}
	}
	for _, msg := range r.recordErrs {
		t.Errorf("HOLD RECORD: %s", msg)
	}
	if r.recordErrN > len(r.recordErrs) {
		t.Errorf("... %d hold record findings in all", r.recordErrN)
	}
	started, stillLive := 0, 0
	for key, rec := range r.records {
		started += rec.starts
		if rec.live {
			stillLive++
			if stillLive <= chaosMaxReports {
				t.Errorf("HOLD RECORD of process %d on %s never ended (started at %s)", rec.proc, key, r.rel(rec.started.UnixNano()))
			}
		}
	}
	if started == 0 && len(r.holds) > 0 {
		t.Errorf("test bug: no hold record reported (the children's Observer)")
	}
	for i, b := range r.semBook {
		if i == 0 {
			t.Errorf("SEMAPHORE BOOKKEEPING: %d monitor ticks found the permits in use differ from the holds", r.semBookCount)
		}
		t.Errorf("  %s", b)
	}
	describeConflict := func(c chaosConflict) string {
		if c.permits > 0 {
			return fmt.Sprintf("%d permits of %d held by %s", c.permits, chaosSemPermits, r.describeAll(c.holds))
		}
		return r.describeAll(c.holds)
	}
	for i, c := range bad {
		if i == chaosMaxReports {
			t.Errorf("... %d overlaps in all", len(bad))
			break
		}
		t.Errorf("OVERLAP on %s: %s", c.name, describeConflict(c))
	}
	for i, c := range excused {
		if i == chaosMaxReports {
			break
		}
		t.Logf("overlap with a hold reported lost, on %s: %s", c.name, describeConflict(c))
	}
	for i, p := range fencing {
		if i == chaosMaxReports {
			t.Errorf("... %d fencing violations in all", len(fencing))
			break
		}
		t.Errorf("FENCING on %s: %s exited before %s entered, but its token is larger (or not smaller than a write hold's)",
			p.a.name, r.describe(p.a), r.describe(p.b))
	}
	for i, s := range r.phantoms {
		if i == chaosMaxReports {
			t.Errorf("... %d phantom stalls in all", len(r.phantoms))
			break
		}
		t.Errorf("PHANTOM on %s: Redis showed %s holding it from %s to %s (%v) with no live call of it; %s",
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
	for _, op := range chaosOps {
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
	for op := range r.ops {
		if !slices.Contains(chaosOps, op) {
			t.Errorf("test bug: unknown op %q", op)
		}
	}
	longest := time.Duration(0)
	if r.longest != nil && r.longest.last.After(r.longest.start) {
		longest = r.longest.last.Sub(r.longest.start)
		t.Logf("longest stretch with no live call: %v on %s, %s (%s)", longest.Round(time.Millisecond), r.longest.name, r.longest.owner, r.longest.about)
	}
	t.Logf("worst wait %v: %s call of %s", worst.Round(time.Microsecond), worstOp, worstCall)
	t.Logf("hold records: %d started, %d never ended", started, stillLive)
	t.Logf("monitor: %d ticks read, %d failed (ticks with a hold seen: %d mutex, %d rw, %d semaphore); killer: %d kills, %d connections killed, %d failed",
		r.ticks.Load(), r.tickErrs.Load(), r.seenTicks[chaosMutex], r.seenTicks[chaosRW], r.seenTicks[chaosSem],
		r.kills.Load(), r.killed.Load(), r.killErrs.Load())
	faults := "off"
	if *chaosFaults {
		faults = fmt.Sprintf("%d kills sent, %d connections killed; %d lost release replies with an outage",
			r.kills.Load(), r.killed.Load(), r.outages)
	}
	doubles := 0
	for k, n := range r.errCounts {
		if strings.HasPrefix(k, "double-release:") {
			doubles += n
		}
	}
	fmt.Printf("chaos %s: %v, %d procs x %d goroutines and an outage child: %d acquisitions (mutex %d, rw %d, semaphore %d; %s); faults: %s; overlaps %d (+%d with a hold reported lost); double releases %d; fencing violations %d; phantom stalls %d (longest stretch %v); worst wait %v (%s), worst overshoot %v; lost holds %d; errors: %s\n",
		config, *chaosDuration, chaosProcs, chaosGoroutines, perKind[chaosMutex]+perKind[chaosRW]+perKind[chaosSem],
		perKind[chaosMutex], perKind[chaosRW], perKind[chaosSem], strings.Join(opParts, ", "), faults,
		len(bad), len(excused), doubles, len(fencing), len(r.phantoms), longest.Round(time.Millisecond),
		worst.Round(time.Millisecond), worstOp, overshoot.Round(time.Millisecond), lost, strings.Join(errSummary, " "))
}

// ---- child side ----

// runChaosChild is main() of a TestChaos child process (RLOCK_TEST_HELPER=chaos): 8 goroutines
// take the locks in random ways for DURATION and log every step on stdout. It returns 0 when
// every goroutine finished, all holds were released and Close left nothing behind, 1 when
// Close failed, 2 on a setup error, 3 when goroutines were still busy chaosChildGrace after the
// run (they are listed on stderr), and 4 when a subscription or a goroutine outlived Close.
func runChaosChild() int {
	goroutinesBefore := goleak.IgnoreCurrent()
	proc, err1 := strconv.Atoi(os.Getenv("PROC"))
	dur, err2 := time.ParseDuration(os.Getenv("DURATION"))
	watchdog, err3 := time.ParseDuration(os.Getenv("WATCHDOG"))
	fairWait, err4 := time.ParseDuration(os.Getenv("FAIRWAIT"))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		fmt.Fprintln(os.Stderr, "chaos child:", err)
		return 2
	}
	clientName := fmt.Sprintf("rlock-chaos-%s-%d", os.Getenv("PREFIX"), proc)
	d, err := redistest.DeploymentFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos child:", err)
		return 2
	}
	rc, err := chaosRueidis(d, clientName)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos child:", err)
		return 2
	}
	log := newChaosLog(os.Stdout)
	opts := rlock.Options{KeyPrefix: os.Getenv("PREFIX"), WatchdogTimeout: watchdog, FairWaitTimeout: fairWait, Wait: rlock.PubSub(),
		Observer: chaosObserver{proc: proc, log: log}}
	if os.Getenv("WAIT") == "spin" {
		opts.Wait = rlock.Spin(5 * time.Millisecond)
	}
	c, err := rlock.New(rc, opts)
	if err != nil {
		rc.Close()
		log.close()
		fmt.Fprintln(os.Stderr, "chaos child:", err)
		return 2
	}
	newMutex, newRW := c.NewMutex, c.NewRWMutex
	if os.Getenv("KIND") == "fair" {
		newMutex, newRW = c.NewFairMutex, c.NewFairRWMutex
	}
	var targets []*chaosTarget
	for _, l := range chaosLocks {
		if l.outage != (proc == chaosOutageProc) {
			continue
		}
		t := &chaosTarget{name: l.name, kind: l.kind}
		switch l.kind {
		case chaosMutex:
			t.m = newMutex(l.name, rlock.WithFencing())
			t.leased = func(lease time.Duration) chaosMode {
				return mutexMode(newMutex(l.name, rlock.WithFencing(), rlock.WithLease(lease)))
			}
		case chaosRW:
			t.rw = newRW(l.name, rlock.WithFencing())
			t.leasedRW = func(lease time.Duration) *rlock.RWMutex {
				if lease == 0 {
					return t.rw
				}
				return newRW(l.name, rlock.WithFencing(), rlock.WithLease(lease))
			}
		case chaosSem:
			t.s = c.NewSemaphore(l.name, chaosSemPermits)
		}
		targets = append(targets, t)
	}

	end := time.Now().Add(dur)
	goroutines, outage := chaosGoroutines, proc == chaosOutageProc
	if outage {
		goroutines = 1
	}
	workers := make([]*chaosWorker, goroutines)
	var wg sync.WaitGroup
	for g := range workers {
		w := &chaosWorker{proc: proc, g: g, log: log, targets: targets, newMulti: c.NewMultiLock,
			rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(proc*chaosGoroutines+g)))}
		workers[g] = w
		wg.Add(1)
		if outage {
			w.faulted = bufio.NewScanner(os.Stdin)
			go func() { defer wg.Done(); w.runOutage(end) }()
			continue
		}
		go func() { defer wg.Done(); w.run(end) }()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		// Every hold was released: nothing is left for Close to drop.
		return chaosChildClosed("chaos child", proc, c, rc, d, clientName, log.close, goroutinesBefore)
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

// chaosRueidis connects to d with client name name on every connection, retrying for a while:
// the parent's killer may already be closing connections, the first one included.
func chaosRueidis(d redistest.Deployment, name string) (rueidis.Client, error) {
	o := d.ClientOption()
	o.ClientName = name
	if routes := os.Getenv("PROXY"); routes != "" {
		o.DialCtxFn = redistest.DialRoutes(routes)
	}
	var err error
	for range 50 {
		var rc rueidis.Client
		if rc, err = rueidis.NewClient(o); err == nil {
			return rc, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, err
}

// chaosChildClosed closes a chaos child's client c, its direct client rc, then anything else
// closeRest closes (nil: nothing), once its workers are done, and returns the child's exit
// code: 0 when Close succeeded (else 1) and left no subscription on any data node of d and no
// goroutine beyond those of before (else 4). what names the child in its messages.
func chaosChildClosed(what string, proc int, c *rlock.Client, rc rueidis.Client, d redistest.Deployment,
	clientName string, closeRest func(), before goleak.Option) int {
	err := c.Close()
	left := chaosSubscriptionsLeft(d, clientName)
	rc.Close()
	if closeRest != nil {
		closeRest()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s %d: Close: %v\n", what, proc, err)
		return 1
	}
	if left != nil {
		fmt.Fprintf(os.Stderr, "%s %d: after Close: %v\n", what, proc, left)
		return 4
	}
	if err := goleak.Find(append([]goleak.Option{before}, redistest.IgnoreRueidisRefresh...)...); err != nil {
		fmt.Fprintf(os.Stderr, "%s %d: goroutines left after Close: %v\n", what, proc, err)
		return 4
	}
	return 0
}

// chaosSubscriptionsLeft returns an error naming the connections called name (this child's)
// that a data node of d shows subscribed to anything, nil when there are none. An UNSUBSCRIBE
// sent by Close may still be on its way: it asks each node again, until it answers with none
// of them, for up to 3 s (also through the killer's kills).
func chaosSubscriptionsLeft(d redistest.Deployment, name string) error {
	pending := map[string]*node{} // nil until connected
	for _, a := range d.Data {
		pending[a] = nil
	}
	defer func() {
		for _, n := range pending {
			if n != nil {
				n.RC.Close()
			}
		}
	}()
	deadline := time.Now().Add(3 * time.Second)
	for {
		var errs []error
		for a, n := range pending {
			if n == nil {
				c, err := redistest.OpenNode(a)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", a, err))
					continue
				}
				n = &c
				pending[a] = n
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			list, err := n.RC.Do(ctx, n.RC.B().ClientList().Build()).ToString()
			cancel()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", a, err))
				continue
			}
			var subscribed []string
			for line := range strings.Lines(list) {
				f := make(map[string]string)
				for kv := range strings.FieldsSeq(line) {
					if k, v, ok := strings.Cut(kv, "="); ok {
						f[k] = v
					}
				}
				nonzero := func(k string) bool { return f[k] != "" && f[k] != "0" }
				if f["name"] == name && (nonzero("sub") || nonzero("psub") || nonzero("ssub")) {
					subscribed = append(subscribed, strings.TrimSpace(line))
				}
			}
			if len(subscribed) == 0 {
				n.RC.Close()
				delete(pending, a)
				continue
			}
			errs = append(errs, fmt.Errorf("%s: connections still subscribed: %s", a, strings.Join(subscribed, "; ")))
		}
		if len(pending) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.Join(errs...)
		}
		time.Sleep(50 * time.Millisecond)
	}
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

// chaosObserver logs the hold events of a child's Client (H lines); Start and End do nothing.
type chaosObserver struct {
	proc int
	log  *chaosLog
}

// Start keeps the call's context.
func (chaosObserver) Start(context.Context, rlock.Op, rlock.LockInfo) context.Context { return nil }

// End does nothing.
func (chaosObserver) End(context.Context, rlock.Op, rlock.LockInfo, rlock.Outcome, time.Duration, error) {
}

// Event logs hold_started and hold_ended events.
func (o chaosObserver) Event(ev rlock.Event) {
	kind, outcome := "started", "-"
	switch ev.Type {
	case rlock.EventHoldStarted:
	case rlock.EventHoldEnded:
		kind, outcome = "ended", ev.Outcome.String()
	default:
		return
	}
	o.log.printf("H %d -1 %s %s %d %s %s -\n", o.proc, ev.Lock.Name, ev.Owner, time.Now().UnixNano(), kind, outcome)
}

// chaosTarget is one lock of a child: exactly one of m, rw and s is set, after kind.
type chaosTarget struct {
	name, kind string
	m          *rlock.Mutex
	rw         *rlock.RWMutex
	s          *rlock.Semaphore
	// leased makes the mutex with a fixed lease; leasedRW the read-write mutex with a fixed
	// lease (0: rw).
	leased   func(lease time.Duration) chaosMode
	leasedRW func(lease time.Duration) *rlock.RWMutex
}

// chaosMode is one way to hold a target: a mutex, a read-write mutex for reading or for
// writing, or n permits of a semaphore.
type chaosMode struct {
	lock     func(context.Context) (context.Context, error)
	try      func(context.Context, time.Duration) (context.Context, error)
	release  func(context.Context) error
	token    func(context.Context) (int64, bool) // nil: no fencing (semaphore)
	minToken int64                               // the smallest valid token (0 for read holds)
}

// mutexMode holds m.
func mutexMode(m *rlock.Mutex) chaosMode {
	return chaosMode{lock: m.Lock, try: m.TryLock, release: m.Unlock, token: m.Token, minToken: 1}
}

// electionMode campaigns in el with value: a hold is a term, its token the term.
func electionMode(el *rlock.Election, value string) chaosMode {
	return chaosMode{
		lock: func(ctx context.Context) (context.Context, error) { return el.Campaign(ctx, value) },
		try: func(ctx context.Context, wait time.Duration) (context.Context, error) {
			return el.TryCampaign(ctx, value, wait)
		},
		release: el.Resign, token: el.Term, minToken: 1,
	}
}

// readMode holds rw for reading.
func readMode(rw *rlock.RWMutex) chaosMode {
	return chaosMode{lock: rw.RLock, try: rw.TryRLock, release: rw.RUnlock, token: rw.Token}
}

// writeMode holds rw for writing.
func writeMode(rw *rlock.RWMutex) chaosMode {
	return chaosMode{lock: rw.Lock, try: rw.TryLock, release: rw.Unlock, token: rw.Token, minToken: 1}
}

// semMode holds n permits of s.
func semMode(s *rlock.Semaphore, n int64) chaosMode {
	return chaosMode{
		lock: func(ctx context.Context) (context.Context, error) { return s.Acquire(ctx, n) },
		try: func(ctx context.Context, wait time.Duration) (context.Context, error) {
			return s.TryAcquire(ctx, n, wait)
		},
		release: s.Release,
	}
}

// chaosOp is one call of a worker on a target.
type chaosOp struct {
	t     *chaosTarget
	mode  chaosMode
	name  string        // the op (see chaosOps)
	owner string        // as logged: "-" until the hold context names it; a semaphore call's own id
	asked string        // the owner of the context the call was given ("" if none)
	n     int64         // permits (semaphore)
	lease time.Duration // the fixed lease of its hold (0: the watchdog's)
}

// chaosWorker is one goroutine of a child.
type chaosWorker struct {
	proc, g int
	rng     *rand.Rand
	log     *chaosLog
	targets []*chaosTarget
	seq     int                         // semaphore calls made, for their ids
	status  atomic.Pointer[chaosStatus] // what it is doing, for the report of a stuck child
	faulted *bufio.Scanner              // the outage child's: the parent says "go" once its fault is armed
	// newMulti is the child's Client.NewMultiLock.
	newMulti func(members ...*rlock.Mutex) *rlock.MultiLock
}

// chaosStatus is a worker's current step.
type chaosStatus struct {
	step, name string
	since      time.Time
}

// run does random ops until end: each picks a lock, an owner (half the time one of its own
// through WithOwner, so the monitor knows it from the start; else the call makes one) and an
// op: read ops are 60 % of a read-write mutex's.
func (w *chaosWorker) run(end time.Time) {
	for time.Now().Before(end) {
		t := w.targets[w.rng.IntN(len(w.targets))]
		base, o := bg, &chaosOp{t: t, owner: "-"}
		if w.rng.IntN(2) == 0 {
			o.owner = rlock.NewOwnerID()
			o.asked, base = o.owner, rlock.WithOwner(bg, o.owner)
		}
		switch t.kind {
		case chaosMutex:
			o.mode = mutexMode(t.m)
			switch w.rng.IntN(13) {
			case 0, 1, 2:
				o.name = "nested"
				w.nested(o, base, 1+w.rng.IntN(3), nil)
			case 3, 4, 5:
				o.name = "try"
				w.try(o, base)
			case 6, 7, 8:
				o.name = "wait"
				w.wait(o, base)
			case 9:
				o.name, o.lease, o.mode = "mixed-lease", chaosLongLease, t.leased(chaosLongLease)
				w.mixedLease(o, base, t.leased)
			default:
				w.multi(o, base)
			}
		case chaosRW:
			read, write := readMode(t.rw), writeMode(t.rw)
			switch w.rng.IntN(12) {
			case 0, 1:
				o.name, o.mode = "read-nested", read
				w.nested(o, base, 1+w.rng.IntN(2), nil)
			case 2, 3:
				o.name, o.mode = "read-try", read
				w.try(o, base)
			case 4, 5:
				o.name, o.mode = "read-wait", read
				w.wait(o, base)
			case 6:
				o.name, o.mode = "write-nested", write
				w.nested(o, base, 1+w.rng.IntN(3), &read)
			case 7:
				o.name, o.mode = "write-try", write
				w.try(o, base)
			case 8:
				o.name, o.mode = "write-wait", write
				w.wait(o, base)
			case 9:
				o.name, o.mode = "downgrade", write
				w.downgrade(o, base)
			case 10:
				o.name, o.lease = "write-mixed-lease", chaosLongLease
				o.mode = writeMode(t.leasedRW(chaosLongLease))
				w.mixedLease(o, base, func(d time.Duration) chaosMode { return writeMode(t.leasedRW(d)) })
			default:
				o.name = "rw-modes"
				w.rwModes(o, base)
			}
		case chaosSem:
			w.seq++
			o.n = int64(1 + w.rng.IntN(2))
			o.mode, o.owner = semMode(t.s, o.n), fmt.Sprintf("sem.%d.%d.%d", w.proc, w.g, w.seq)
			switch w.rng.IntN(3) {
			case 0:
				o.name = "sem-acquire"
				w.nested(o, base, 0, nil)
			case 1:
				o.name = "sem-try"
				w.try(o, base)
			default:
				o.name = "sem-wait"
				w.wait(o, base)
			}
		}
	}
	w.status.Store(nil)
}

// nested takes o's lock with a blocking call, re-enters it reentries times through the latest
// hold context (each time for reading, with alt, half the time when alt is set: a writer's
// read holds), and releases the re-entries in reverse order before the outer hold. Its
// critical section goes on after the re-entries are released (where a miscounted release
// shows).
func (w *chaosWorker) nested(o *chaosOp, base context.Context, reentries int, alt *chaosMode) {
	w.begin(o, 0)
	h, err := o.mode.lock(base)
	if err != nil {
		w.failed(o, err)
		return
	}
	token := w.enter(o, h)
	cur := h
	type inner struct {
		ctx     context.Context
		release func(context.Context) error
	}
	var inners []inner
	for range reentries {
		w.setStatus("re-entry", o)
		mode := o.mode
		if alt != nil && w.rng.IntN(2) == 0 {
			mode = *alt
		}
		hi, err := mode.lock(cur)
		if err != nil {
			w.event(o, "reenter", chaosCauseClass(err, cur), err)
			break
		}
		if tok, ok := mode.token(hi); !ok || tok != token {
			w.event(o, "token-changed", "bad", fmt.Errorf("re-entry has token %d (%v), the hold %d", tok, ok, token))
		}
		inners, cur = append(inners, inner{hi, mode.release}), hi
	}
	w.critical()
	for i := len(inners) - 1; i >= 0; i-- {
		w.setStatus("inner unlock", o)
		if err := inners[i].release(inners[i].ctx); err != nil {
			w.event(o, "inner-unlock", chaosClass(err), err)
		}
	}
	w.critical()
	w.exit(o, token, h, false)
	w.release(o, o.mode, h)
}

// try takes o's lock with its try call, waiting 0-20 ms; ErrNotObtained is normal.
func (w *chaosWorker) try(o *chaosOp, base context.Context) {
	wait := time.Duration(w.rng.IntN(21)) * time.Millisecond
	w.begin(o, wait)
	h, err := o.mode.try(base, wait)
	if err != nil {
		w.failed(o, err)
		return
	}
	token := w.enter(o, h)
	w.critical()
	w.exit(o, token, h, false)
	w.release(o, o.mode, h)
}

// wait takes o's lock with a blocking call and a context that times out after 1-30 ms; the
// timeout is normal. The hold context derives from that context, so it ends with it: only
// another cause counts.
func (w *chaosWorker) wait(o *chaosOp, base context.Context) {
	d := time.Duration(1+w.rng.IntN(30)) * time.Millisecond
	ctx, cancel := context.WithTimeout(base, d)
	defer cancel()
	w.begin(o, d)
	h, err := o.mode.lock(ctx)
	if err != nil {
		w.failed(o, err)
		return
	}
	token := w.enter(o, h)
	w.critical()
	w.exit(o, token, h, true)
	w.release(o, o.mode, h)
}

// multi takes a MultiLock of o's mutex and another of the child's (given in a random order)
// with a blocking Lock (multi-lock), a TryLock waiting 0-20 ms (multi-try) or a Lock whose
// context times out after 1-30 ms (multi-wait), and logs its hold of o's mutex as the call's
// (E, X, U) and of the other as its second hold (G, x, u): exclusion is checked per member.
func (w *chaosWorker) multi(o *chaosOp, base context.Context) {
	var others []*chaosTarget
	for _, t := range w.targets {
		if t.kind == chaosMutex && t != o.t {
			others = append(others, t)
		}
	}
	other := others[w.rng.IntN(len(others))]
	members := []*rlock.Mutex{o.t.m, other.m}
	if w.rng.IntN(2) == 0 {
		members[0], members[1] = members[1], members[0]
	}
	ml := w.newMulti(members...)
	ctx, bound, lock := base, time.Duration(0), ml.Lock
	switch w.rng.IntN(3) {
	case 0:
		o.name = "multi-lock"
	case 1:
		o.name, bound = "multi-try", time.Duration(w.rng.IntN(21))*time.Millisecond
		lock = func(ctx context.Context) (context.Context, error) { return ml.TryLock(ctx, bound) }
	default:
		o.name, bound = "multi-wait", time.Duration(1+w.rng.IntN(30))*time.Millisecond
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(base, bound)
		defer cancel()
	}
	began := time.Now()
	w.begin(o, bound)
	h, err := lock(ctx)
	if err != nil {
		w.failed(o, err)
		return
	}
	token := w.enter(o, h)
	o2 := *o
	o2.t, o2.mode = other, mutexMode(other.m)
	tok2, ok := other.m.Token(h)
	if !ok || tok2 < 1 {
		w.event(o, "token-missing", "bad", fmt.Errorf("second member's Token = %d, %v", tok2, ok))
	}
	w.line('G', &o2, strconv.FormatInt(tok2, 10), "w", fmt.Sprintf("%d 0", began.UnixNano()))
	w.critical()
	deadlineOK := o.name == "multi-wait"
	w.exitAs('x', &o2, tok2, h, deadlineOK)
	w.exit(o, token, h, deadlineOK)
	w.setStatus("unlock", o)
	err = w.retried(o, ml.Unlock, h)
	w.released('u', &o2, err)
	w.released('U', o, err)
}

// downgrade takes o's read-write mutex for writing, takes a read hold through the write hold,
// releases the write hold and goes on as a reader: the write hold's context lives on while
// the owner reads.
func (w *chaosWorker) downgrade(o *chaosOp, base context.Context) {
	read := readMode(o.t.rw)
	w.begin(o, 0)
	h, err := o.mode.lock(base)
	if err != nil {
		w.failed(o, err)
		return
	}
	token := w.enter(o, h)
	w.setStatus("downgrade: read hold", o)
	hr, err := read.lock(h)
	if err != nil { // stay a writer
		w.event(o, "reenter", chaosCauseClass(err, h), err)
		w.critical()
		w.exit(o, token, h, false)
		w.release(o, o.mode, h)
		return
	}
	if tok, ok := read.token(hr); !ok || tok != token {
		w.event(o, "token-changed", "bad", fmt.Errorf("the writer's read hold has token %d (%v), the write hold %d", tok, ok, token))
	}
	w.critical()
	state, msg, at := "ok", "", time.Now() // stamped before the check (see exitAs)
	if h.Err() != nil {
		state, msg = chaosClass(context.Cause(h)), context.Cause(h).Error()
	}
	w.lineAt(at, 'D', o, strconv.FormatInt(token, 10), state, msg)
	w.setStatus("downgrade: write unlock", o)
	if err := w.retried(o, o.mode.release, h); err != nil {
		w.event(o, "downgrade-unlock", chaosClass(err), err)
	} else if h.Err() != nil {
		cause := context.Cause(h)
		w.event(o, "downgrade-ended", chaosClass(cause), fmt.Errorf("the write hold's context ended with the write hold: %w", cause))
	}
	w.critical()
	w.exit(o, token, hr, false)
	w.release(o, read, hr)
}

// mixedLease takes o's lock with its fixed lease (chaosLongLease), re-enters it through a lock
// of that name with a much shorter fixed lease (10-30 ms), releases the re-entry and holds on
// until 30 ms after the shorter lease would have ended. A re-entry must not shorten the lease
// Redis has under the outer hold, or if it does, the outer hold context must end with it: else
// the key expires and another owner takes the lock while the outer hold context is live (an
// overlap that nothing excuses). leased makes o's lock with another fixed lease.
func (w *chaosWorker) mixedLease(o *chaosOp, base context.Context, leased func(time.Duration) chaosMode) {
	w.begin(o, 0)
	h, err := o.mode.lock(base)
	if err != nil {
		w.failed(o, err)
		return
	}
	token := w.enter(o, h)
	short := time.Duration(10+w.rng.IntN(21)) * time.Millisecond
	inner := leased(short)
	w.setStatus("re-entry", o)
	reentered := time.Now()
	w.line('R', o, strconv.FormatInt(int64(short), 10), "-", "")
	if hi, err := inner.lock(h); err != nil {
		w.event(o, "reenter", chaosCauseClass(err, h), err)
	} else {
		if tok, ok := inner.token(hi); !ok || tok != token {
			w.event(o, "token-changed", "bad", fmt.Errorf("re-entry has token %d (%v), the hold %d", tok, ok, token))
		}
		w.critical()
		w.setStatus("inner unlock", o)
		if err := inner.release(hi); err != nil {
			w.event(o, "inner-unlock", chaosClass(err), err)
		}
	}
	time.Sleep(time.Until(reentered.Add(short + 30*time.Millisecond)))
	w.exit(o, token, h, false)
	w.release(o, o.mode, h)
}

// rwModes holds o's read-write mutex for writing and then, as the same owner, for reading
// (through a context that carries the owner, not the write hold's, whose deadline it would
// inherit), each with a lease of its own (the watchdog's, or a fixed one of 20-80 ms), holds on
// for a while that may outlast the shorter lease, and releases the two in either order. Each
// hold ends with its own lease: a lapsed write hold neither ends the read hold nor takes its
// release along, and a lapsed read hold does not end the write hold.
func (w *chaosWorker) rwModes(o *chaosOp, base context.Context) {
	pick := func() time.Duration {
		if w.rng.IntN(3) == 0 {
			return 0
		}
		return time.Duration(20+w.rng.IntN(61)) * time.Millisecond
	}
	lw, lr := pick(), pick()
	o.lease, o.mode = lw, writeMode(o.t.leasedRW(lw))
	read := readMode(o.t.leasedRW(lr))
	w.begin(o, 0)
	h, err := o.mode.lock(base)
	if err != nil {
		w.failed(o, err)
		return
	}
	token := w.enter(o, h)
	w.setStatus("second hold", o)
	began := time.Now()
	owner, _ := rlock.Owner(h)
	hr, err := read.lock(rlock.WithOwner(bg, owner))
	if err != nil {
		w.event(o, "reenter", chaosCauseClass(err, h), err)
		w.critical()
		w.exit(o, token, h, false)
		w.release(o, o.mode, h)
		return
	}
	// A write hold whose lease ran out before the read hold was taken (the RLock waited: a
	// killed connection, a stalled process) leaves a new read hold, with the counter as it was
	// then: its newer token is no error once the write hold's context has ended (it has, if the
	// lease ran out in Redis first).
	rtok := w.second(o, read, hr, token, 'r', began, lr, h.Err() != nil)
	time.Sleep(time.Duration(w.rng.IntN(int(max(lw, lr, 40*time.Millisecond)/time.Millisecond)+21)) * time.Millisecond)
	if w.rng.IntN(2) == 0 {
		w.exit(o, token, h, false)
		w.release(o, o.mode, h)
		w.critical()
		w.exitAs('x', o, rtok, hr, false)
		w.releaseAs('u', o, read, hr)
		return
	}
	w.exitAs('x', o, rtok, hr, false)
	w.releaseAs('u', o, read, hr)
	w.critical()
	w.exit(o, token, h, false)
	w.release(o, o.mode, h)
}

// second logs a second hold h of o's call (a G line), taken with mode (mode byte m, its fixed
// lease: 0 for the watchdog's) in a call that began at began, and returns its token; a token
// other than the first hold's, token, is an error event, but a larger one when newer (the first
// hold had ended: the second is a hold of its own).
func (w *chaosWorker) second(o *chaosOp, mode chaosMode, h context.Context, token int64, m byte, began time.Time, lease time.Duration,
	newer bool) int64 {
	tok, ok := mode.token(h)
	if !ok || tok != token && !(newer && tok > token) {
		w.event(o, "token-changed", "bad", fmt.Errorf("the second hold has token %d (%v), the first %d", tok, ok, token))
	}
	w.line('G', o, strconv.FormatInt(tok, 10), string(m), fmt.Sprintf("%d %d", began.UnixNano(), int64(lease)))
	return tok
}

// runOutage is the outage child's goroutine: until end it alternates retry-modes (on its
// read-write mutex) and retry-twice (on its mutex), each as an owner of its own
// (chaosOwnerPrefix), starting none that might not end before end.
func (w *chaosWorker) runOutage(end time.Time) {
	var mutexes, rws []*chaosTarget
	for _, t := range w.targets {
		switch t.kind {
		case chaosMutex:
			mutexes = append(mutexes, t)
		case chaosRW:
			rws = append(rws, t)
		}
	}
	for i := 0; time.Until(end) > chaosOutageOp; i++ {
		o := &chaosOp{owner: chaosOwnerPrefix + rlock.NewOwnerID()}
		o.asked = o.owner
		base := rlock.WithOwner(bg, o.owner)
		if i%2 == 1 {
			o.t = mutexes[w.rng.IntN(len(mutexes))]
			o.name, o.mode = "retry-twice", mutexMode(o.t.m)
			w.retryTwice(o, base)
		} else {
			o.t = rws[w.rng.IntN(len(rws))]
			o.name, o.mode = "retry-modes", writeMode(o.t.rw)
			w.retryModes(o, base)
		}
	}
	w.status.Store(nil)
}

// beginFaulted logs the start of o (see begin) and waits until the parent says its fault is
// armed: its first release will lose its reply, and an outage of chaosOutage follows.
func (w *chaosWorker) beginFaulted(o *chaosOp) {
	w.begin(o, 0)
	w.setStatus("waiting for the parent", o)
	w.faulted.Scan()
}

// firstRelease is the faulted release of an outage op: release(h), which fails once its retries
// are spent during the outage (an outage-unlock event); it reports whether it failed so.
func (w *chaosWorker) firstRelease(o *chaosOp, release func(context.Context) error, h context.Context) (faulted bool, err error) {
	w.setStatus("faulted unlock", o)
	err = release(h)
	if chaosClass(err) != "transport" {
		return false, err
	}
	w.event(o, "outage-unlock", "transport", err)
	return true, err
}

// retryTwice holds o's mutex twice as one owner (a WithOwner context, base) and releases one
// hold, with Unlock given base, into the fault: Unlock fails after its retries. Once Redis
// answers again and a watchdog pass has settled the request (a third of the lease), it retries
// that Unlock, which must return the first release's outcome and release nothing more: the
// second hold must still be held, its context live. A retried release that freed it is a
// double release.
func (w *chaosWorker) retryTwice(o *chaosOp, base context.Context) {
	w.beginFaulted(o)
	h, err := o.mode.lock(base)
	if err != nil {
		w.failed(o, err)
		return
	}
	token := w.enter(o, h)
	began := time.Now()
	h2, err := o.mode.lock(base)
	if err != nil {
		w.event(o, "reenter", chaosCauseClass(err, h), err)
		w.exit(o, token, h, false)
		faulted, err := w.firstRelease(o, o.mode.release, h)
		if faulted {
			time.Sleep(chaosOutage)
			err = w.retried(o, o.mode.release, h)
		}
		w.released('U', o, err)
		return
	}
	tok2 := w.second(o, o.mode, h2, token, 'w', began, 0, false)
	w.critical()
	w.exit(o, token, h, false)
	unlocked := time.Now()
	faulted, err := w.firstRelease(o, o.mode.release, base)
	if faulted {
		// The outage began as Redis ran the release; a watchdog pass settles the request
		// within a third of the lease after it ends.
		time.Sleep(time.Until(unlocked.Add(chaosOutage + chaosOutageWatchdog/3 + time.Second)))
		w.setStatus("retried unlock", o)
		err = w.retried(o, o.mode.release, base)
	}
	w.released('U', o, err)
	if h2.Err() != nil {
		w.event(o, "double-release", "bad", fmt.Errorf("the second hold's context ended: %w", context.Cause(h2)))
	} else if n, err := o.t.m.HoldCount(h2); err == nil && n != 1 {
		w.event(o, "double-release", "bad", fmt.Errorf("the owner has %d holds in Redis after the first hold's release, not 1", n))
	}
	w.critical()
	w.exitAs('x', o, tok2, h2, false)
	w.releaseAs('u', o, o.mode, h2)
}

// retryModes holds o's read-write mutex for writing, and for reading through that hold, and
// releases the write hold into the fault: Unlock fails after its retries. Once Redis answers
// again it releases the read hold with RUnlock given the write hold's context (which carries
// the owner), which must release the read hold, not take the pending write release's outcome
// as its own; then it retries the Unlock, which must return the write release's outcome. A
// RUnlock that leaves the read hold in Redis is a double release (of the write hold's).
func (w *chaosWorker) retryModes(o *chaosOp, base context.Context) {
	read := readMode(o.t.rw)
	w.beginFaulted(o)
	h, err := o.mode.lock(base)
	if err != nil {
		w.failed(o, err)
		return
	}
	token := w.enter(o, h)
	began := time.Now()
	hr, err := read.lock(h)
	if err != nil {
		w.event(o, "reenter", chaosCauseClass(err, h), err)
		w.exit(o, token, h, false)
		faulted, err := w.firstRelease(o, o.mode.release, h)
		if faulted {
			time.Sleep(chaosOutage)
			err = w.retried(o, o.mode.release, h)
		}
		w.released('U', o, err)
		return
	}
	rtok := w.second(o, read, hr, token, 'r', began, 0, false)
	w.critical()
	w.exit(o, token, h, false)
	unlocked := time.Now()
	faulted, err := w.firstRelease(o, o.mode.release, h)
	if faulted {
		time.Sleep(time.Until(unlocked.Add(chaosOutage + 500*time.Millisecond))) // Redis answers again
	}
	w.exitAs('x', o, rtok, hr, false)
	w.setStatus("unlock", o)
	rerr := w.retried(o, read.release, h)
	w.released('u', o, rerr)
	if rerr == nil {
		if r, _, err := o.t.rw.HoldCount(h); err == nil && r != 0 {
			w.event(o, "double-release", "bad", fmt.Errorf("RUnlock returned nil, but the owner still has %d read holds in Redis", r))
		}
	}
	if faulted {
		w.setStatus("retried unlock", o)
		err = w.retried(o, o.mode.release, h)
	}
	w.released('U', o, err)
}

// critical is the critical section: a sleep of 0-2 ms.
func (w *chaosWorker) critical() {
	time.Sleep(time.Duration(w.rng.IntN(2001)) * time.Microsecond)
}

// setStatus records the worker's current step.
func (w *chaosWorker) setStatus(step string, o *chaosOp) {
	w.status.Store(&chaosStatus{step: step, name: o.t.name, since: time.Now()})
}

// line writes one log line (see the file comment) of op o stamped now.
func (w *chaosWorker) line(kind byte, o *chaosOp, a, b, msg string) {
	w.lineAt(time.Now(), kind, o, a, b, msg)
}

// lineAt is line stamped at.
func (w *chaosWorker) lineAt(at time.Time, kind byte, o *chaosOp, a, b, msg string) {
	if msg == "" {
		msg = "-"
	}
	msg = strings.ReplaceAll(msg, "\n", " ")
	w.log.printf("%c %d %d %s %s %d %s %s %s\n", kind, w.proc, w.g, o.t.name, o.owner, at.UnixNano(), a, b, msg)
}

// begin logs the start of o's acquiring call bounded by bound (0: unbounded).
func (w *chaosWorker) begin(o *chaosOp, bound time.Duration) {
	w.setStatus(o.name, o)
	msg := ""
	switch {
	case o.n > 0:
		msg = strconv.FormatInt(o.n, 10)
	case o.lease > 0:
		msg = strconv.FormatInt(int64(o.lease), 10)
	}
	w.line('B', o, o.name, strconv.FormatInt(int64(bound), 10), msg)
}

// failed logs an acquiring call that returned err.
func (w *chaosWorker) failed(o *chaosOp, err error) {
	class, msg := chaosClass(err), ""
	if class != "notobtained" && class != "deadline" {
		msg = err.Error()
	}
	w.line('F', o, class, "-", msg)
}

// enter logs an acquisition through hold context h and returns its token (0 for a
// semaphore). An owner other than the one asked for, or a missing token, is logged as an error
// event. For a mutex or rw mutex, o.owner becomes the hold's owner.
func (w *chaosWorker) enter(o *chaosOp, h context.Context) int64 {
	owner, ok := rlock.Owner(h)
	if o.t.kind == chaosSem {
		w.line('E', o, "0", "-", "")
		if o.asked != "" && owner != o.asked {
			w.event(o, "owner-mismatch", "bad", fmt.Errorf("semaphore hold context carries owner %q (%v), its context had %q", owner, ok, o.asked))
		}
		return 0
	}
	o.owner = owner
	token, tokOK := o.mode.token(h)
	w.line('E', o, strconv.FormatInt(token, 10), "-", "")
	if !ok || o.asked != "" && owner != o.asked {
		w.event(o, "owner-mismatch", "bad", fmt.Errorf("hold context carries owner %q (%v), asked for %q", owner, ok, o.asked))
	}
	if !tokOK || token < o.mode.minToken {
		w.event(o, "token-missing", "bad", fmt.Errorf("Token = %d, %v", token, tokOK))
	}
	return token
}

// exit logs the end of the critical section of the hold h, with the cause if h ended early (a
// deadline of the caller's context does not count when deadlineOK).
func (w *chaosWorker) exit(o *chaosOp, token int64, h context.Context, deadlineOK bool) {
	w.exitAs('X', o, token, h, deadlineOK)
}

// exitAs is exit logged as kind: X, or x for a call's second hold. The line is stamped before
// h is checked: a context found live was live then too, while a stamp taken after the check
// may come any time later (the goroutine may be descheduled in between: stalls of 1-19ms were
// measured under TestChaos), after its lease has ended and another owner has entered, which
// would show as an overlap that never was.
func (w *chaosWorker) exitAs(kind byte, o *chaosOp, token int64, h context.Context, deadlineOK bool) {
	state, msg, at := "ok", "", time.Now()
	if h.Err() != nil {
		cause := context.Cause(h)
		if !deadlineOK || !errors.Is(cause, context.DeadlineExceeded) {
			state, msg = chaosClass(cause), cause.Error()
		}
	}
	w.lineAt(at, kind, o, strconv.FormatInt(token, 10), state, msg)
}

// release releases the hold h with mode's release and logs the outcome (a U line).
func (w *chaosWorker) release(o *chaosOp, mode chaosMode, h context.Context) {
	w.releaseAs('U', o, mode, h)
}

// releaseAs is release logged as kind: U, or u for a call's second hold.
func (w *chaosWorker) releaseAs(kind byte, o *chaosOp, mode chaosMode, h context.Context) {
	w.setStatus("unlock", o)
	w.released(kind, o, w.retried(o, mode.release, h))
}

// released logs the outcome err of a release as kind (U or u).
func (w *chaosWorker) released(kind byte, o *chaosOp, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	w.line(kind, o, chaosClass(err), "-", msg)
}

// retried calls release(h); a release that failed without a verdict (transport or Redis
// error) is retried up to twice, as the API allows, each failure logged as an event.
func (w *chaosWorker) retried(o *chaosOp, release func(context.Context) error, h context.Context) error {
	var err error
	for range 3 {
		err = release(h)
		if class := chaosClass(err); class != "transport" && class != "redis" {
			break
		}
		w.event(o, "unlock-retry", chaosClass(err), err)
	}
	return err
}

// event logs an error event (a W line).
func (w *chaosWorker) event(o *chaosOp, event, class string, err error) {
	w.line('W', o, event, class, err.Error())
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
