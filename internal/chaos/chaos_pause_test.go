package chaos_test

// TestChaosPause: the chaos test with paused processes and a stalled server. chaosPauseProcs
// child processes × chaosPauseGoroutines goroutines take seven locks, one of each kind (Mutex,
// fair Mutex, RWMutex for reading and writing, fair RWMutex, Semaphore of 1 permit, Semaphore
// of 3 permits taken 1 or 2 at a time, an Election whose holds are terms: Campaign or
// TryCampaign, then Resign), every mutex WithFencing, while the parent
//
//   - stops a random child (SIGSTOP) every 0.3-1 s, two times in three for longer than both the
//     lease (WatchdogTimeout) and FairWaitTimeout, else briefly, and lets it go on (SIGCONT);
//   - stalls the server (DEBUG SLEEP 0.2-1.5 s) every 2-6 s;
//   - kills Redis connections (CLIENT KILL TYPE normal / pubsub) every 50-500 ms.
//
// It runs only when -chaospause.duration is set (make chaos-pause), once per wait strategy.
//
// # How it detects two holders across processes
//
// Every process appends records to one log file, each with a single write(2) on an O_APPEND
// descriptor: the kernel orders the writes, and a record's line number is its place in that
// order, the same order for every process. The parent's own records (a child stopped, a child
// resumed) go to the same file.
//
// A critical section is a sequence of steps. A step is: write "P id" (about to check), check
// the hold context's Err(), and only if it is nil write "S id" (stepped). So the instant at
// which the hold context was seen live lies, in real time, between the P record and the S record
// of that step: its check window. Between steps the worker spins (no sleep, no yield), so that
// after a SIGCONT its next check runs at once, before its thread runs the timers that are due.
//
// A hold is live at least from the S record of its first step to the P record of its last step:
// it was seen live at both ends, and a hold context that ended never comes back. Two holds are an
// OVERLAP when a check window of one lies wholly inside that span of the other (and their modes
// conflict): both contexts were then live at the same instant. A semaphore's holds overlap when
// the holds whose spans contain one hold's check window, that one included, have more permits
// than the semaphore. The definition uses only the order of the records, never a clock: a loaded
// machine delays records but cannot make a false overlap, and a process stopped between its
// check and its S record (a check that came before the stop) is no overlap either, since the
// stop only moves the S record later, not the P record.
//
// A holder stopped for longer than its lease must find its hold context done at its first check
// after it resumes: a step whose P record follows the parent's CONT record of a stop that lasted
// longer than WatchdogTimeout, of a hold that had entered (E record) before the STOP record and
// not exited, is a LIVE-AFTER-PAUSE violation, whether or not another process took the lock in
// between. (The lease in Redis was last set by a call sent before the stop, so the hold's local
// lease end is at most WatchdogTimeout after the stop.) The parent writes STOP only once every
// thread of the child is stopped (/proc/PID/task/*/stat), and CONT before it sends SIGCONT.
//
// Fencing: a hold whose last check window ends (S record) before another hold's first check
// window begins (P record) was seen live wholly before it; the later one's token must then be
// larger (a write hold) or not smaller (a read hold).
//
// The report names, for each overlap, whether a hold in it stepped after a stop past its lease
// (a hold context that looked live after the stop), or else whether the acquiring call of a hold
// in it spanned such a stop (a grant from before the stop taken as fresh after it); the same
// for fencing violations. TestChaosPauseChecker checks these definitions on hand-written logs.
//
// Leftovers: each child, after Close, has no subscription on any connection (CLIENT LIST) and no
// goroutine (goleak), or exits 4; the parent then finds no keys but fencing counters and no
// channels under its prefix.
//
// Log records, space-separated; id is "proc.goroutine.seq", one per call:
//
//	B id lock mode n   a call begins (mode w, r or s; n permits, 1 for mutexes)
//	E id token         it acquired (token 0 without fencing)
//	F id class         it failed (see chaosClass)
//	P id               a step is about to check the hold context
//	S id               ... which was live: the step is done
//	X id class         the critical section ended: "ok" if the context is live, else the class of its cause
//	U id class         the release returned
//	STOP proc          (parent) every thread of the child is stopped
//	CONT proc ns       (parent) it is about to be resumed, after ns stopped
//	SLEEP ms class     (parent) a DEBUG SLEEP of ms returned

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
)

var (
	chaosPauseDuration = flag.Duration("chaospause.duration", 0,
		"TestChaosPause: run time of each wait strategy (0: skip the test; make chaos-pause sets 60s)")
	chaosPauseFaultsFlag = flag.String("chaospause.faults", "stop,longstop,sleep,kill",
		"TestChaosPause: faults to inject, comma-separated: stop (short SIGSTOPs), longstop (SIGSTOPs past the lease "+
			"and FairWaitTimeout), sleep (DEBUG SLEEP), kill (CLIENT KILL); e.g. stop,kill: no stop outlasts a lease")
	chaosPauseLogDir = flag.String("chaospause.logdir", "",
		"TestChaosPause: keep the log of each failed run in this directory (the report names its line numbers)")
)

// chaosPauseFault reports whether -chaospause.faults names fault.
func chaosPauseFault(fault string) bool {
	return slices.Contains(strings.Split(*chaosPauseFaultsFlag, ","), fault)
}

// Shape of a pause chaos run.
const (
	chaosPauseProcs      = 4
	chaosPauseGoroutines = 3
	chaosPauseLease      = time.Second            // WatchdogTimeout of the children: the lease
	chaosPauseFairWait   = time.Second            // FairWaitTimeout of the children
	chaosPauseStepGap    = 300 * time.Microsecond // spin between two steps
	chaosPauseMaxSteps   = 25
)

// chaosPauseLock is a lock every child uses.
type chaosPauseLock struct {
	name, kind string // kind: mutex, fair-mutex, rw, fair-rw, semaphore, election
	permits    int64  // semaphore
}

// chaosPauseLocks are the locks of a pause chaos run, one per kind.
var chaosPauseLocks = []chaosPauseLock{
	{"m", "mutex", 0}, {"fm", "fair-mutex", 0}, {"rw", "rw", 0}, {"frw", "fair-rw", 0},
	{"s1", "semaphore", 1}, {"sn", "semaphore", 3}, {"el", "election", 0},
}

// TestChaosPause runs the pause chaos test under each wait strategy for -chaospause.duration.
func TestChaosPause(t *testing.T) {
	if *chaosPauseDuration <= 0 {
		t.Skip("runs with -chaospause.duration (make chaos-pause)")
	}
	redistest.NeedsThrowaway(t)
	for _, wait := range []string{"pubsub", "spin"} {
		t.Run(wait, func(t *testing.T) { runChaosPause(t, wait) })
	}
}

// chaosPauseFaults counts the faults the parent injected.
type chaosPauseFaults struct {
	stops, stopFails  atomic.Int64
	sleeps, sleepErrs atomic.Int64
	kills, killed     atomic.Int64
	killErrs          atomic.Int64
}

// runChaosPause runs one wait strategy: children and faults, then the checks and the report.
func runChaosPause(t *testing.T, wait string) {
	e := redistest.NewEnv(t)
	logPath := filepath.Join(t.TempDir(), "log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	var killers, sleepers []node
	for _, a := range e.Dep.Data {
		killers = append(killers, redistest.NewNode(t, a))
	}
	for _, m := range e.Dep.Masters {
		sleepers = append(sleepers, redistest.NewNode(t, m.Addr))
	}

	children := make([]*redistest.Child, chaosPauseProcs)
	for p := range children {
		children[p] = redistest.StartChild(t, "chaos-pause", "PREFIX="+e.Prefix, "WAIT="+wait, "LOG="+logPath,
			"DURATION="+chaosPauseDuration.String(), "WATCHDOG="+chaosPauseLease.String(),
			"FAIRWAIT="+chaosPauseFairWait.String(), "PROC="+strconv.Itoa(p))
	}

	var faults chaosPauseFaults
	end := time.Now().Add(*chaosPauseDuration)
	var bg sync.WaitGroup
	if chaosPauseFault("stop") || chaosPauseFault("longstop") {
		bg.Add(1)
		go func() { defer bg.Done(); chaosPauser(children, logf, end, &faults) }()
	}
	if chaosPauseFault("sleep") {
		bg.Add(1)
		go func() { defer bg.Done(); chaosSleeper(sleepers, logf, end, &faults) }()
	}
	if chaosPauseFault("kill") {
		bg.Add(1)
		go func() { defer bg.Done(); chaosKiller(killers, end, &faults) }()
	}

	exits := make([]error, len(children))
	var readers sync.WaitGroup
	for p, c := range children {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for c.Out.Scan() {
				t.Logf("child %d: %s", p, c.Out.Text())
			}
			exits[p] = c.Cmd.Wait()
		}()
	}
	done := make(chan struct{})
	go func() { readers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(*chaosPauseDuration + chaosChildGrace + 15*time.Second):
		t.Errorf("children did not exit within %v of the end of the run: killing them", chaosChildGrace+15*time.Second)
		for _, c := range children {
			_ = c.Cmd.Process.Signal(syscall.SIGCONT)
			_ = c.Cmd.Process.Kill()
		}
		<-done
	}
	bg.Wait()
	leftChildren := 0
	for p, err := range exits {
		if err != nil {
			t.Errorf("child %d failed: %v (its stderr is above)", p, err)
			var ee interface{ ExitCode() int }
			if errors.As(err, &ee) && ee.ExitCode() == 4 {
				leftChildren++
			}
		}
	}

	// Nothing left in Redis: no keys but fencing counters, no channels. A queue entry outlives
	// its waiter by FairWaitTimeout at most.
	var left []string
	deadline := time.Now().Add(chaosPauseFairWait + chaosPauseLease + 3*time.Second)
	for {
		left = left[:0]
		for _, k := range e.Keys() {
			if !strings.HasSuffix(k, ":fence") {
				left = append(left, k)
			}
		}
		left = append(left, e.Channels()...)
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("LEFT in Redis after every child closed: %v", left)
		e.Dirty = true
	}

	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	a := analyzeChaosPause(strings.Split(strings.TrimSuffix(string(data), "\n"), "\n"))
	a.report(t, wait, &faults, len(left), leftChildren)
	if t.Failed() && *chaosPauseLogDir != "" {
		keep := filepath.Join(*chaosPauseLogDir, fmt.Sprintf("chaos-pause-%s-%s.log", wait, time.Now().UTC().Format("20060102T150405")))
		if err := os.WriteFile(keep, data, 0o644); err != nil {
			t.Errorf("keeping the log: %v", err)
		} else {
			t.Logf("log kept in %s", keep)
		}
	}
}

// chaosPauser stops a random child every 0.3-1 s until end: two times in three (longstop; every
// time without stop) for 1.2-2.5 times the longer of the lease and FairWaitTimeout, else (stop)
// for 20-500 ms. It writes STOP once
// every thread of the child is stopped and CONT just before SIGCONT.
func chaosPauser(children []*redistest.Child, logf *os.File, end time.Time, f *chaosPauseFaults) {
	long := max(chaosPauseLease, chaosPauseFairWait)
	tail, err := os.Open(logf.Name())
	if err != nil {
		panic(err) // the parent just created it
	}
	defer tail.Close()
	tracker := &chaosTail{f: tail}
	for time.Now().Before(end) {
		time.Sleep(time.Duration(300+rand.IntN(701)) * time.Millisecond)
		tracker.read()
		p := tracker.pick(len(children))
		d := time.Duration(20+rand.IntN(481)) * time.Millisecond
		if !chaosPauseFault("stop") || chaosPauseFault("longstop") && rand.IntN(3) > 0 {
			d = long + time.Duration(rand.Int64N(int64(long)*13/10)) + long/5
		}
		proc := children[p].Cmd.Process
		if proc.Signal(syscall.SIGSTOP) != nil {
			f.stopFails.Add(1)
			continue
		}
		if !chaosStopped(proc.Pid, 5*time.Second) {
			f.stopFails.Add(1)
			_ = proc.Signal(syscall.SIGCONT)
			continue
		}
		stopped := time.Now()
		chaosParentRecord(logf, "STOP %d", p)
		time.Sleep(d)
		chaosParentRecord(logf, "CONT %d %d", p, time.Since(stopped).Nanoseconds())
		_ = proc.Signal(syscall.SIGCONT)
		f.stops.Add(1)
	}
}

// chaosTail follows the log as it grows, to know which children hold and which wait, so that
// the pauser stops holders and waiters more often than chance would. It only aims the stops:
// the checks classify each stop from the whole log afterwards.
type chaosTail struct {
	f       *os.File
	partial []byte
	holding map[int]map[string]bool // proc -> ids of its calls between E and X
	waiting map[int]map[string]bool // proc -> ids of its calls between B and E or F
}

// read takes the records appended since the last read.
func (c *chaosTail) read() {
	if c.holding == nil {
		c.holding, c.waiting = make(map[int]map[string]bool), make(map[int]map[string]bool)
	}
	buf := make([]byte, 1<<20)
	for {
		n, _ := c.f.Read(buf)
		if n == 0 {
			return
		}
		c.partial = append(c.partial, buf[:n]...)
		for {
			i := slices.Index(c.partial, '\n')
			if i < 0 {
				break
			}
			f := strings.Fields(string(c.partial[:i]))
			c.partial = c.partial[i+1:]
			if len(f) < 2 || len(f[0]) != 1 {
				continue
			}
			proc, err := strconv.Atoi(strings.SplitN(f[1], ".", 2)[0])
			if err != nil {
				continue
			}
			set := func(m map[int]map[string]bool, on bool) {
				if m[proc] == nil {
					m[proc] = make(map[string]bool)
				}
				if on {
					m[proc][f[1]] = true
				} else {
					delete(m[proc], f[1])
				}
			}
			switch f[0] {
			case "B":
				set(c.waiting, true)
			case "E":
				set(c.waiting, false)
				set(c.holding, true)
			case "F":
				set(c.waiting, false)
			case "X":
				set(c.holding, false)
			}
		}
	}
}

// pick chooses the child to stop: half the time one that holds, a quarter of the time one
// that waits and holds nothing (if there is one), else any.
func (c *chaosTail) pick(procs int) int {
	var holders, waiters []int
	for p := range procs {
		switch {
		case len(c.holding[p]) > 0:
			holders = append(holders, p)
		case len(c.waiting[p]) > 0:
			waiters = append(waiters, p)
		}
	}
	switch r := rand.IntN(4); {
	case r < 2 && len(holders) > 0:
		return holders[rand.IntN(len(holders))]
	case r == 2 && len(waiters) > 0:
		return waiters[rand.IntN(len(waiters))]
	}
	return rand.IntN(procs)
}

// chaosStopped waits up to within for every thread of process pid to be stopped, and reports
// whether they were.
func chaosStopped(pid int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		if err != nil || len(tasks) == 0 {
			return false
		}
		all := true
		for _, path := range tasks {
			b, err := os.ReadFile(path)
			if err != nil {
				all = false
				break
			}
			s := string(b)
			i := strings.LastIndexByte(s, ')')
			if i < 0 || i+2 >= len(s) || (s[i+2] != 'T' && s[i+2] != 't') {
				all = false
				break
			}
		}
		if all {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

// chaosSleeper stalls every master with DEBUG SLEEP of 0.2-1.5 s every 2-6 s until end.
func chaosSleeper(nodes []node, logf *os.File, end time.Time, f *chaosPauseFaults) {
	for time.Now().Before(end) {
		time.Sleep(time.Duration(2000+rand.IntN(4001)) * time.Millisecond)
		ms := 200 + rand.IntN(1301)
		for _, n := range nodes {
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(ms)*time.Millisecond+5*time.Second)
			err := n.RC.Do(ctx, n.RC.B().Arbitrary("DEBUG", "SLEEP", strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64)).Build()).Error()
			cancel()
			if err != nil {
				f.sleepErrs.Add(1) // its connection was killed: the server may have slept anyway
			} else {
				f.sleeps.Add(1)
			}
			chaosParentRecord(logf, "SLEEP %d %s", ms, chaosClass(err))
		}
	}
}

// chaosKiller sends CLIENT KILL TYPE normal and TYPE pubsub alternately to every data node every
// 50-500 ms until end.
func chaosKiller(nodes []node, end time.Time, f *chaosPauseFaults) {
	types := [2]string{"normal", "pubsub"}
	for i := 0; time.Now().Before(end); i++ {
		time.Sleep(time.Duration(50+rand.IntN(451)) * time.Millisecond)
		for _, n := range nodes {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			k, err := n.RC.Do(ctx, n.RC.B().Arbitrary("CLIENT", "KILL", "TYPE", types[i%2]).Build()).AsInt64()
			cancel()
			if err != nil {
				f.killErrs.Add(1)
				continue
			}
			f.kills.Add(1)
			f.killed.Add(k)
		}
	}
}

// chaosParentRecord appends one parent record to the log.
func chaosParentRecord(logf *os.File, format string, args ...any) {
	_, _ = logf.Write([]byte(fmt.Sprintf(format, args...) + "\n"))
}

// ---- analysis ----

// chaosWindow is one passed check of a hold context: the line numbers of its P and S records.
type chaosWindow struct{ pre, step int }

// chaosPauseHold is one call of a child and what it held.
type chaosPauseHold struct {
	id, lock, mode string
	proc           int
	n              int64
	token          int64
	begin          int
	enter, exit    int // line numbers; -1 if none
	released       int
	failAt         int // line of the F record; -1 if none
	fail, exitWhy  string
	unlockWhy      string
	pendingPre     int
	windows        []chaosWindow
}

// span is the first and last line of the stretch over which h was certainly live (see the file
// comment); ok is false when h stepped fewer than twice.
func (h *chaosPauseHold) span() (from, to int, ok bool) {
	if len(h.windows) < 2 {
		return 0, 0, false
	}
	return h.windows[0].step, h.windows[len(h.windows)-1].pre, true
}

// chaosPausePause is one stop of a child: the lines of its STOP and CONT records.
type chaosPausePause struct {
	proc         int
	stop, cont   int
	d            time.Duration
	holders      []*chaosPauseHold // holds of the child entered before the stop and not exited
	waiters      int               // calls of the child waiting at the stop
	liveAfter    []*chaosPauseHold // holders that stepped after the resume although the stop outlasted the lease
	foundDone    int               // holders whose first check after the resume found the context done
	pastLease    bool
	pastFairWait bool
}

// chaosPauseOverlap is one finding of checkOverlaps: the check window at of hold holds[0] lies
// inside the live spans of holds[1:].
type chaosPauseOverlap struct {
	lock  chaosPauseLock
	at    chaosWindow
	holds []*chaosPauseHold
	sum   int64 // semaphore: their permits
}

// chaosPauseAnalysis is what the log says.
type chaosPauseAnalysis struct {
	lines          []string
	holds          []*chaosPauseHold
	pauses         []*chaosPausePause
	parseErrs      []string
	sleeps         int
	overlaps       []chaosPauseOverlap
	liveAfter      map[*chaosPauseHold]bool // holds that stepped after a stop past their lease
	fencing        []string
	fencingN       int
	fencingSpanned int // of fencingN: the later hold's acquiring call spanned a stop past the lease
	liveAfterN     int
	errCounts      map[string]int
}

// analyzeChaosPause parses the log lines and runs the checks.
func analyzeChaosPause(lines []string) *chaosPauseAnalysis {
	a := &chaosPauseAnalysis{lines: lines, errCounts: make(map[string]int), liveAfter: make(map[*chaosPauseHold]bool)}
	byID := make(map[string]*chaosPauseHold)
	open := make(map[int]int) // proc -> line of its pending STOP
	bad := func(i int, why string) {
		if len(a.parseErrs) < chaosMaxReports {
			a.parseErrs = append(a.parseErrs, fmt.Sprintf("line %d %q: %s", i, lines[i-1], why))
		}
	}
	for i, s := range lines {
		i := i + 1 // line numbers count from 1, as in an editor
		f := strings.Fields(s)
		if len(f) < 2 {
			bad(i, "too short")
			continue
		}
		switch f[0] {
		case "STOP":
			p, _ := strconv.Atoi(f[1])
			open[p] = i
			continue
		case "CONT":
			if len(f) != 3 {
				bad(i, "bad CONT")
				continue
			}
			p, _ := strconv.Atoi(f[1])
			ns, _ := strconv.ParseInt(f[2], 10, 64)
			st, ok := open[p]
			if !ok {
				bad(i, "CONT without STOP")
				continue
			}
			delete(open, p)
			a.pauses = append(a.pauses, &chaosPausePause{proc: p, stop: st, cont: i, d: time.Duration(ns)})
			continue
		case "SLEEP":
			if len(f) == 3 && f[2] == "ok" {
				a.sleeps++
			}
			continue
		}
		if f[0] == "B" {
			if len(f) != 5 {
				bad(i, "bad B")
				continue
			}
			proc, _ := strconv.Atoi(strings.SplitN(f[1], ".", 2)[0])
			n, _ := strconv.ParseInt(f[4], 10, 64)
			h := &chaosPauseHold{id: f[1], lock: f[2], mode: f[3], proc: proc, n: n, begin: i, enter: -1, exit: -1, released: -1, pendingPre: -1, failAt: -1}
			byID[f[1]] = h
			a.holds = append(a.holds, h)
			continue
		}
		h := byID[f[1]]
		if h == nil {
			bad(i, "no call")
			continue
		}
		arg := ""
		if len(f) > 2 {
			arg = f[2]
		}
		switch f[0] {
		case "E":
			h.enter = i
			h.token, _ = strconv.ParseInt(arg, 10, 64)
		case "F":
			h.fail, h.failAt = arg, i
			if arg != "notobtained" {
				a.errCounts["lock:"+arg]++
			}
		case "P":
			h.pendingPre = i
		case "S":
			if h.pendingPre < 0 {
				bad(i, "S without P")
				continue
			}
			h.windows = append(h.windows, chaosWindow{h.pendingPre, i})
			h.pendingPre = -1
		case "X":
			h.exit, h.exitWhy = i, arg
			if arg != "ok" {
				a.errCounts["hold-ended:"+arg]++
			}
		case "U":
			h.released, h.unlockWhy = i, arg
			if arg != "ok" {
				a.errCounts["unlock:"+arg]++
			}
		default:
			bad(i, "unknown record")
		}
	}
	a.checkPauses()
	a.checkOverlaps()
	a.checkFencing()
	return a
}

// checkPauses classifies each stop and finds holders that stepped after a stop longer than
// their lease.
func (a *chaosPauseAnalysis) checkPauses() {
	byProc := make(map[int][]*chaosPauseHold)
	for _, h := range a.holds {
		byProc[h.proc] = append(byProc[h.proc], h)
	}
	for _, p := range a.pauses {
		p.pastLease, p.pastFairWait = p.d > chaosPauseLease, p.d > chaosPauseFairWait
		for _, h := range byProc[p.proc] {
			switch {
			case h.enter >= 0 && h.enter < p.stop && (h.exit < 0 || h.exit > p.stop):
				p.holders = append(p.holders, h)
				if !p.pastLease {
					continue
				}
				stepped := false
				for _, w := range h.windows {
					if w.pre > p.cont {
						stepped = true
						break
					}
				}
				if stepped {
					p.liveAfter = append(p.liveAfter, h)
					a.liveAfter[h] = true
					a.liveAfterN++
				} else if h.exit > p.cont && h.exitWhy != "ok" {
					p.foundDone++
				}
			case h.begin < p.stop && (h.enter < 0 || h.enter > p.stop) && (h.failAt < 0 || h.failAt > p.stop):
				p.waiters++
			}
		}
	}
}

// conflicts reports whether holds of modes m1 and m2 of a mutex or read-write mutex may not be
// out together.
func chaosPauseConflict(m1, m2 string) bool { return m1 == "w" || m2 == "w" }

// checkOverlaps finds, per lock, check windows of one hold that lie inside the certain span of
// conflicting holds (see the file comment).
func (a *chaosPauseAnalysis) checkOverlaps() {
	byLock := make(map[string][]*chaosPauseHold)
	for _, h := range a.holds {
		if len(h.windows) > 0 {
			byLock[h.lock] = append(byLock[h.lock], h)
		}
	}
	seen := make(map[[2]string]bool)
	for _, l := range chaosPauseLocks {
		hs := byLock[l.name]
		// Spans sorted by their first line; windows of every hold sorted by their P line.
		type spanned struct {
			h        *chaosPauseHold
			from, to int
		}
		var spans []spanned
		type win struct {
			h *chaosPauseHold
			w chaosWindow
		}
		var wins []win
		for _, h := range hs {
			if from, to, ok := h.span(); ok {
				spans = append(spans, spanned{h, from, to})
			}
			for _, w := range h.windows {
				wins = append(wins, win{h, w})
			}
		}
		sort.Slice(spans, func(i, j int) bool { return spans[i].from < spans[j].from })
		sort.Slice(wins, func(i, j int) bool { return wins[i].w.pre < wins[j].w.pre })
		var active []spanned
		next := 0
		for _, w := range wins {
			for next < len(spans) && spans[next].from < w.w.pre {
				active = append(active, spans[next])
				next++
			}
			active = slices.DeleteFunc(active, func(s spanned) bool { return s.to <= w.w.pre })
			var inside []*chaosPauseHold
			for _, s := range active {
				if s.h != w.h && s.to > w.w.step {
					inside = append(inside, s.h)
				}
			}
			if len(inside) == 0 {
				continue
			}
			if l.kind == "semaphore" {
				sum := w.h.n
				for _, h := range inside {
					sum += h.n
				}
				if sum <= l.permits {
					continue
				}
				key := [2]string{w.h.id, "sem"}
				if seen[key] {
					continue
				}
				seen[key] = true
				a.overlaps = append(a.overlaps, chaosPauseOverlap{lock: l, at: w.w, holds: append([]*chaosPauseHold{w.h}, inside...), sum: sum})
				continue
			}
			for _, h := range inside {
				if !chaosPauseConflict(w.h.mode, h.mode) {
					continue
				}
				key := [2]string{min(w.h.id, h.id), max(w.h.id, h.id)}
				if seen[key] {
					continue
				}
				seen[key] = true
				a.overlaps = append(a.overlaps, chaosPauseOverlap{lock: l, at: w.w, holds: []*chaosPauseHold{w.h, h}})
			}
		}
	}
}

// checkFencing finds, per fenced lock, holds seen live wholly before another whose token is
// smaller (or, for a write hold, not larger).
func (a *chaosPauseAnalysis) checkFencing() {
	byLock := make(map[string][]*chaosPauseHold)
	for _, h := range a.holds {
		if len(h.windows) > 0 && h.mode != "s" {
			byLock[h.lock] = append(byLock[h.lock], h)
		}
	}
	for _, l := range chaosPauseLocks {
		hs := byLock[l.name]
		last := func(h *chaosPauseHold) int { return h.windows[len(h.windows)-1].step }
		byLast := slices.Clone(hs)
		sort.Slice(byLast, func(i, j int) bool { return last(byLast[i]) < last(byLast[j]) })
		maxTok := make([]*chaosPauseHold, len(byLast))
		for i, h := range byLast {
			maxTok[i] = h
			if i > 0 && maxTok[i-1].token > h.token {
				maxTok[i] = maxTok[i-1]
			}
		}
		for _, b := range hs {
			first := b.windows[0].pre
			k := sort.Search(len(byLast), func(i int) bool { return last(byLast[i]) >= first })
			if k == 0 {
				continue
			}
			if x := maxTok[k-1]; x.token > b.token || x.token == b.token && b.mode == "w" {
				a.fencingN++
				why := ""
				if a.spannedStop(b) {
					a.fencingSpanned++
					why = " (the later one's acquiring call spanned a stop of its process past the lease: its grant came before the other's, and its context looked live after the stop)"
				}
				if len(a.fencing) < chaosMaxReports {
					a.fencing = append(a.fencing, fmt.Sprintf("%s: %s was seen live wholly before %s, but its token is larger (or not smaller than a write hold's)%s",
						l.name, a.describe(x), a.describe(b), why))
				}
			}
		}
	}
}

// spannedStop reports whether h's acquiring call began before a stop of its process longer
// than the lease and returned after it.
func (a *chaosPauseAnalysis) spannedStop(h *chaosPauseHold) bool {
	return slices.ContainsFunc(a.pauses, func(p *chaosPausePause) bool {
		return p.proc == h.proc && p.pastLease && h.begin < p.stop && h.enter > p.cont
	})
}

// explained reports whether a hold of o stepped after a stop of its process past its lease.
func (a *chaosPauseAnalysis) explained(o chaosPauseOverlap) bool {
	return slices.ContainsFunc(o.holds, func(h *chaosPauseHold) bool { return a.liveAfter[h] })
}

// describe formats a hold for a report: its records' line numbers.
func (a *chaosPauseAnalysis) describe(h *chaosPauseHold) string {
	s := fmt.Sprintf("[%s %s n=%d token %d: began line %d, entered %d, steps %d", h.id, h.mode, h.n, h.token, h.begin, h.enter, len(h.windows))
	if len(h.windows) > 0 {
		s += fmt.Sprintf(" (first check %d-%d, last %d-%d)", h.windows[0].pre, h.windows[0].step,
			h.windows[len(h.windows)-1].pre, h.windows[len(h.windows)-1].step)
	}
	s += fmt.Sprintf(", exited %d (%s), released %d (%s)", h.exit, h.exitWhy, h.released, h.unlockWhy)
	for _, p := range a.pauses {
		if p.proc == h.proc && p.cont > h.begin && p.stop < max(h.released, h.exit) {
			s += fmt.Sprintf(", its process stopped lines %d-%d for %v", p.stop, p.cont, p.d.Round(time.Millisecond))
		}
	}
	return s + "]"
}

// describeAll formats holds for a report.
func (a *chaosPauseAnalysis) describeAll(hs []*chaosPauseHold) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = a.describe(h)
	}
	return strings.Join(parts, " and ")
}

// report fails t on any finding and prints the run's figures on stdout.
func (a *chaosPauseAnalysis) report(t *testing.T, wait string, f *chaosPauseFaults, leftKeys, leftChildren int) {
	for _, msg := range a.parseErrs {
		t.Errorf("test bug: %s", msg)
	}
	// Overlaps that a hold live after a stop past its lease explains are reported after the
	// others, and at most chaosMaxReports of each sort per lock.
	perLock := make(map[string][2]int) // lock -> overlaps not explained, explained
	for _, explained := range []bool{false, true} {
		for _, o := range a.overlaps {
			if a.explained(o) != explained {
				continue
			}
			n := perLock[o.lock.name]
			i := 0
			if explained {
				i = 1
			}
			n[i]++
			perLock[o.lock.name] = n
			if n[i] > chaosMaxReports {
				continue
			}
			why := ""
			switch {
			case explained:
				why = " (a hold in it stepped after a stop past its lease: see LIVE AFTER PAUSE)"
			case slices.ContainsFunc(o.holds, a.spannedStop):
				why = " (the acquiring call of a hold in it spanned a stop of its process past the lease)"
			}
			if o.sum > 0 {
				t.Errorf("OVERLAP on %s%s: %d permits of %d at the check at lines %d-%d of the first of %s",
					o.lock.name, why, o.sum, o.lock.permits, o.at.pre, o.at.step, a.describeAll(o.holds))
			} else {
				t.Errorf("OVERLAP on %s%s: the check at lines %d-%d of %s lies inside the live span of %s",
					o.lock.name, why, o.at.pre, o.at.step, a.describe(o.holds[0]), a.describe(o.holds[1]))
			}
		}
	}
	var overlapParts []string
	unexplained, spanned := 0, 0
	for _, o := range a.overlaps {
		if !a.explained(o) && slices.ContainsFunc(o.holds, a.spannedStop) {
			spanned++
		}
	}
	for _, l := range chaosPauseLocks {
		if n := perLock[l.name]; n != [2]int{} {
			overlapParts = append(overlapParts, fmt.Sprintf("%s %d+%d", l.name, n[0], n[1]))
			unexplained += n[0]
		}
	}
	overlapSummary := "0"
	if len(a.overlaps) > 0 {
		overlapSummary = fmt.Sprintf("%d, %d of them without a hold live after a stop past its lease (%d of those with an acquire that spanned such a stop; per lock, without+with: %s)",
			len(a.overlaps), unexplained, spanned, strings.Join(overlapParts, ", "))
	}
	for _, fv := range a.fencing {
		t.Errorf("FENCING on %s", fv)
	}
	if a.fencingN > len(a.fencing) {
		t.Errorf("... %d fencing violations in all", a.fencingN)
	}
	holderPauses, waiterPauses, short, foundDone, holdersPaused := 0, 0, 0, 0, 0
	reported := 0
	for _, p := range a.pauses {
		if !p.pastLease && !p.pastFairWait {
			short++
		}
		if p.pastLease && len(p.holders) > 0 {
			holderPauses++
			holdersPaused += len(p.holders)
			foundDone += p.foundDone
		}
		if p.pastFairWait && p.waiters > 0 {
			waiterPauses++
		}
		for _, h := range p.liveAfter {
			if reported < chaosMaxReports {
				t.Errorf("LIVE AFTER PAUSE: process %d was stopped for %v (lines %d-%d, lease %v) while it held %s, and the hold stepped after it resumed",
					p.proc, p.d.Round(time.Millisecond), p.stop, p.cont, chaosPauseLease, a.describe(h))
			}
			reported++
		}
	}
	if reported > chaosMaxReports {
		t.Errorf("... %d live-after-pause holds in all", reported)
	}
	acq := make(map[string]int)
	calls := 0
	for _, h := range a.holds {
		calls++
		if h.enter >= 0 {
			key := h.lock
			if h.lock == "rw" || h.lock == "frw" {
				key += "/" + h.mode
			}
			acq[key]++
		}
		if h.released < 0 && h.fail == "" {
			t.Errorf("call never finished in the log: %s", a.describe(h))
		}
	}
	var acqParts []string
	for _, k := range []string{"m", "fm", "rw/r", "rw/w", "frw/r", "frw/w", "s1", "sn", "el"} {
		acqParts = append(acqParts, fmt.Sprintf("%s %d", k, acq[k]))
	}
	errKinds := make([]string, 0, len(a.errCounts))
	for k, n := range a.errCounts {
		errKinds = append(errKinds, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(errKinds)
	if len(errKinds) == 0 {
		errKinds = []string{"none"}
	}
	for _, k := range []string{"m", "fm", "rw/r", "rw/w", "frw/r", "frw/w", "s1", "sn", "el"} {
		if acq[k] == 0 && *chaosPauseDuration >= 10*time.Second {
			t.Errorf("no acquisition of %s in %v: the run checked nothing there", k, *chaosPauseDuration)
		}
	}
	fmt.Printf("chaos-pause %s: %v, faults %s, %d procs x %d goroutines, %d calls; acquisitions: %s; "+
		"stops %d (holder stopped past the lease %d, holding %d holds, of which %d found their context done at the first check; waiter stopped past FairWaitTimeout %d; short %d; failed %d); "+
		"DEBUG SLEEPs %d (%d failed); kills %d (%d connections, %d failed); "+
		"overlaps %s; live after pause %d; fencing violations %d (%d after a call that spanned a stop past the lease); leftovers: %d in Redis, %d children with subscriptions or goroutines; errors: %s\n",
		wait, *chaosPauseDuration, *chaosPauseFaultsFlag, chaosPauseProcs, chaosPauseGoroutines, calls, strings.Join(acqParts, ", "),
		len(a.pauses), holderPauses, holdersPaused, foundDone, waiterPauses, short, f.stopFails.Load(),
		a.sleeps, f.sleepErrs.Load(), f.kills.Load(), f.killed.Load(), f.killErrs.Load(),
		overlapSummary, a.liveAfterN, a.fencingN, a.fencingSpanned, leftKeys, leftChildren, strings.Join(errKinds, " "))
}

// ---- child side ----

// chaosPauseTarget is one lock of a child and the ways to hold it.
type chaosPauseTarget struct {
	chaosPauseLock
	m  *rlock.Mutex
	rw *rlock.RWMutex
	s  *rlock.Semaphore
	el *rlock.Election
}

// runChaosPauseChild is main() of a TestChaosPause child (RLOCK_TEST_HELPER=chaos-pause):
// chaosPauseGoroutines goroutines take the locks for DURATION and append their records to LOG.
// It returns 0 when every goroutine finished and Close left nothing behind, 1 when Close failed,
// 2 on a setup error, 3 when goroutines were still busy chaosChildGrace after the run, and 4
// when a subscription or a goroutine outlived Close.
func runChaosPauseChild() int {
	goroutinesBefore := goleak.IgnoreCurrent()
	proc, err1 := strconv.Atoi(os.Getenv("PROC"))
	dur, err2 := time.ParseDuration(os.Getenv("DURATION"))
	watchdog, err3 := time.ParseDuration(os.Getenv("WATCHDOG"))
	fairWait, err4 := time.ParseDuration(os.Getenv("FAIRWAIT"))
	logf, err5 := os.OpenFile(os.Getenv("LOG"), os.O_WRONLY|os.O_APPEND, 0)
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
		fmt.Fprintln(os.Stderr, "chaos-pause child:", err)
		return 2
	}
	defer logf.Close()
	clientName := fmt.Sprintf("rlock-chaospause-%s-%d", os.Getenv("PREFIX"), proc)
	d, err := redistest.DeploymentFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos-pause child:", err)
		return 2
	}
	rc, err := chaosRueidis(d, clientName)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos-pause child:", err)
		return 2
	}
	opts := rlock.Options{KeyPrefix: os.Getenv("PREFIX"), WatchdogTimeout: watchdog, FairWaitTimeout: fairWait, Wait: rlock.PubSub()}
	if os.Getenv("WAIT") == "spin" {
		opts.Wait = rlock.Spin(5 * time.Millisecond)
	}
	c, err := rlock.New(rc, opts)
	if err != nil {
		rc.Close()
		fmt.Fprintln(os.Stderr, "chaos-pause child:", err)
		return 2
	}
	targets := make([]*chaosPauseTarget, len(chaosPauseLocks))
	for i, l := range chaosPauseLocks {
		t := &chaosPauseTarget{chaosPauseLock: l}
		switch l.kind {
		case "mutex":
			t.m = c.NewMutex(l.name, rlock.WithFencing())
		case "fair-mutex":
			t.m = c.NewFairMutex(l.name, rlock.WithFencing())
		case "rw":
			t.rw = c.NewRWMutex(l.name, rlock.WithFencing())
		case "fair-rw":
			t.rw = c.NewFairRWMutex(l.name, rlock.WithFencing())
		case "semaphore":
			t.s = c.NewSemaphore(l.name, l.permits)
		case "election":
			t.el = c.NewElection(l.name)
		}
		targets[i] = t
	}

	end := time.Now().Add(dur)
	workers := make([]*chaosPauseWorker, chaosPauseGoroutines)
	var wg sync.WaitGroup
	for g := range workers {
		w := &chaosPauseWorker{proc: proc, g: g, logf: logf, targets: targets,
			rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(proc*chaosPauseGoroutines+g)))}
		workers[g] = w
		wg.Add(1)
		go func() { defer wg.Done(); w.run(end) }()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return chaosChildClosed("chaos-pause child", proc, c, rc, d, clientName, nil, goroutinesBefore)
	case <-time.After(dur + chaosChildGrace):
		for _, w := range workers {
			if st := w.status.Load(); st != nil {
				fmt.Fprintf(os.Stderr, "chaos-pause child %d goroutine %d: stuck in %s on %s for %v\n",
					proc, w.g, st.step, st.name, time.Since(st.since).Round(time.Millisecond))
			}
		}
		return 3
	}
}

// chaosPauseWorker is one goroutine of a child.
type chaosPauseWorker struct {
	proc, g int
	seq     int
	rng     *rand.Rand
	logf    *os.File
	targets []*chaosPauseTarget
	status  atomic.Pointer[chaosStatus]
}

// record appends one record with a single write.
func (w *chaosPauseWorker) record(format string, args ...any) {
	_, _ = w.logf.Write([]byte(fmt.Sprintf(format, args...) + "\n"))
}

// run takes random locks until end. Half the calls block (Lock, RLock, Acquire); the others
// try for 0-2 s.
func (w *chaosPauseWorker) run(end time.Time) {
	for time.Now().Before(end) {
		t := w.targets[w.rng.IntN(len(w.targets))]
		w.seq++
		id := fmt.Sprintf("%d.%d.%d", w.proc, w.g, w.seq)
		var mode chaosMode
		modeName, n := "w", int64(1)
		switch {
		case t.m != nil:
			mode = mutexMode(t.m)
		case t.el != nil:
			mode = electionMode(t.el, id)
		case t.rw != nil && w.rng.IntN(5) < 3:
			mode, modeName = readMode(t.rw), "r"
		case t.rw != nil:
			mode = writeMode(t.rw)
		default:
			n = 1 + w.rng.Int64N(min(2, t.permits))
			mode, modeName = semMode(t.s, n), "s"
		}
		w.status.Store(&chaosStatus{step: "acquire", name: t.name, since: time.Now()})
		w.record("B %s %s %s %d", id, t.name, modeName, n)
		var h context.Context
		var err error
		if w.rng.IntN(2) == 0 {
			h, err = mode.lock(bg)
		} else {
			h, err = mode.try(bg, time.Duration(w.rng.IntN(2001))*time.Millisecond)
		}
		if err != nil {
			w.record("F %s %s", id, chaosClass(err))
			continue
		}
		var token int64
		if mode.token != nil {
			token, _ = mode.token(h)
		}
		w.record("E %s %d", id, token)
		w.status.Store(&chaosStatus{step: "critical section", name: t.name, since: time.Now()})
		why := "ok"
		for range 1 + w.rng.IntN(chaosPauseMaxSteps) {
			w.record("P %s", id)
			if h.Err() != nil {
				why = chaosClass(context.Cause(h))
				break
			}
			w.record("S %s", id)
			// Spin, neither sleep nor yield: after a SIGCONT the next check runs at once, before
			// this goroutine gives its thread to the scheduler, which would run the timers due.
			for start := time.Now(); time.Since(start) < chaosPauseStepGap; {
			}
		}
		if why == "ok" && h.Err() != nil {
			why = chaosClass(context.Cause(h))
		}
		w.record("X %s %s", id, why)
		w.status.Store(&chaosStatus{step: "release", name: t.name, since: time.Now()})
		for range 3 {
			err = mode.release(h)
			if class := chaosClass(err); class != "transport" && class != "redis" {
				break
			}
		}
		w.record("U %s %s", id, chaosClass(err))
		w.status.Store(nil)
		time.Sleep(time.Duration(w.rng.IntN(5)) * time.Millisecond)
	}
}
