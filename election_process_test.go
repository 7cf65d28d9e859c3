package rlock_test

// Elections across real OS processes (re-executions of the test binary, see redistest.Child):
// terms never overlap and always rise over hundreds of campaigns, resignations and kills
// (SIGKILL); candidates lead in the order they began; a stopped (SIGSTOP) leader finds its term
// over at its first check after it resumes.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
)

func init() {
	helpers["elect"] = helperElect
	helpers["electorder"] = helperElectOrder
	helpers["electpause"] = helperElectPause
}

// election is the child's election, LOCK.
func (ch child) election(opts ...rlock.MutexOption) *rlock.Election {
	return ch.c.NewElection(ch.name, opts...)
}

// helperElect campaigns until the file STOP exists; each term logs its section ("enter", then
// "exit" if the term context is still live; see sectionLog) with its term, and resigns.
func helperElect(ch child) error {
	el := ch.election()
	log, err := openSectionLog()
	if err != nil {
		return err
	}
	defer log.f.Close()
	fmt.Println("ready")
	stop := os.Getenv("STOP")
	for {
		if _, err := os.Stat(stop); err == nil {
			return nil
		}
		term, err := el.Campaign(bg, log.id)
		if err != nil {
			return err
		}
		n, _ := el.Term(term)
		if term.Err() == nil {
			if err := log.line("enter", "el", n); err != nil {
				return err
			}
			time.Sleep(300 * time.Microsecond)
			event := "exit"
			if term.Err() != nil {
				event = "lost"
			}
			if err := log.line(event, "el", n); err != nil {
				return err
			}
		}
		if err := el.Resign(term); err != nil && !errors.Is(err, rlock.ErrLockLost) {
			return err
		}
	}
}

// checkTermLog checks a log of helperElect's sections, and the parent's "kill" lines (written
// before each SIGKILL): sections never overlap (a section of a killed process is over at its
// kill line), terms rise from section to section, and no live process lost a term. It returns
// the sections.
func checkTermLog(t *testing.T, lines []logLine) int {
	t.Helper()
	open := map[string]int64{} // pid -> the term of its open section
	killed := map[string]bool{}
	var last int64
	sections := 0
	for i, l := range lines {
		switch l.event {
		case "kill":
			killed[l.pid] = true
		case "enter":
			for pid, term := range open {
				require.True(t, killed[pid], "line %d: %s enters term %d while %s is in term %d", i, l.pid, l.n, pid, term)
				delete(open, pid)
			}
			require.Greater(t, l.n, last, "line %d: term %d after term %d", i, l.n, last)
			last = l.n
			open[l.pid] = l.n
			sections++
		case "exit":
			require.Equal(t, l.n, open[l.pid], "line %d: %s exits a term it did not enter", i, l.pid)
			delete(open, l.pid)
		case "lost":
			t.Fatalf("line %d: %s lost term %d while it ran", i, l.pid, l.n)
		}
	}
	return sections
}

// TestElection_processes: 3 processes campaign and resign in a loop while the parent kills
// (SIGKILL) one of them after every 50 terms or so (the leader, or a candidate, by turns) and
// starts another, 4 times, then lets them go on to 300 terms: no two terms' sections ever
// overlap, and terms rise, over every handoff and every crash.
func TestElection_processes(t *testing.T) {
	strategiesInParallel(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		const procs, kills, every, total = 3, 4, 50, 300
		dir := t.TempDir()
		logPath, stop := filepath.Join(dir, "terms.log"), filepath.Join(dir, "stop")
		env := childEnv(e, "procs", wait, "LOG="+logPath, "STOP="+stop, "WATCHDOG=1s", "FAIRWAIT=1s")
		start := func() *redistest.Child {
			c := redistest.StartChild(t, "elect", env...)
			c.Expect(t, "ready")
			return c
		}
		var alive []*redistest.Child
		for range procs {
			alive = append(alive, start())
		}
		logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		require.NoError(t, err)
		defer logf.Close()
		// terms waits for the log to hold n terms.
		terms := func(n int) {
			t.Helper()
			require.Eventually(t, func() bool {
				data, err := os.ReadFile(logPath)
				return err == nil && bytes.Count(data, []byte("enter ")) >= n
			}, 30*time.Second, 5*time.Millisecond, "%d terms", n)
		}
		el := e.client(rlock.Options{}).NewElection("procs")
		began := time.Now()
		leaders := 0
		for k := range kills {
			terms((k + 1) * every)
			// Every other kill is of the leader (its value is its pid), the others of a random
			// process: a candidate, maybe at the head of the queue, or the leader.
			i := rand.IntN(len(alive))
			for try := 0; k%2 == 0 && try < 200; try++ {
				l, err := el.Leader(bg)
				require.NoError(t, err)
				j := slices.IndexFunc(alive, func(c *redistest.Child) bool { return strconv.Itoa(c.Cmd.Process.Pid) == l.Value })
				if j >= 0 {
					i = j
					leaders++
					break
				}
				time.Sleep(10 * time.Millisecond) // between terms, or a grant to the candidate killed last
			}
			c := alive[i]
			_, err := fmt.Fprintf(logf, "kill el 0 %d\n", c.Cmd.Process.Pid)
			require.NoError(t, err)
			if c.Cmd.Process.Signal(syscall.SIGKILL) == nil {
				_ = c.Cmd.Wait()
			}
			alive[i] = start()
		}
		terms(total)
		require.NoError(t, os.WriteFile(stop, nil, 0o644))
		for _, c := range alive {
			c.Wait(t)
		}
		sections := checkTermLog(t, readSectionLog(t, logPath))
		t.Logf("%d terms across %d processes, %d of them killed (%d leading), in %v", sections, procs+kills, kills,
			leaders, time.Since(began).Round(time.Millisecond))
		assert.Equal(t, kills/2, leaders, "leaders killed")
	})
}

// helperElectOrder campaigns once with value ID, appends ID to the list ORDER while it leads,
// and resigns.
func helperElectOrder(ch child) error {
	el := ch.election()
	fmt.Println("waiting")
	term, err := el.Campaign(bg, os.Getenv("ID"))
	if err != nil {
		return err
	}
	if err := ch.rc.Do(term, ch.rc.B().Rpush().Key(os.Getenv("ORDER")).Element(os.Getenv("ID")).Build()).Error(); err != nil {
		return err
	}
	return el.Resign(term)
}

// TestElection_fifoProcesses: 4 processes begin to campaign one after another behind a leader;
// they lead in that order.
func TestElection_fifoProcesses(t *testing.T) {
	strategiesInParallel(t, func(t *testing.T, wait rlock.WaitStrategy) {
		e := newEnv(t)
		el := e.client(rlock.Options{Wait: wait}).NewElection("fifo")
		lead, err := el.Campaign(bg, "parent")
		require.NoError(t, err)
		order := e.Prefix + ":order"
		var children []*redistest.Child
		for i := range 4 {
			c := redistest.StartChild(t, "electorder", childEnv(e, "fifo", wait, "ORDER="+order, "ID="+strconv.Itoa(i))...)
			c.Expect(t, "waiting")
			require.Eventually(t, func() bool {
				st, err := el.State(bg)
				return err == nil && len(st.Waiters) == i+1
			}, 5*time.Second, time.Millisecond, "candidate %d queued", i)
			children = append(children, c)
		}
		require.NoError(t, el.Resign(lead))
		for _, c := range children {
			c.Wait(t)
		}
		got, err := e.Do("LRANGE", order, "0", "-1").AsStrSlice()
		require.NoError(t, err)
		assert.Equal(t, []string{"0", "1", "2", "3"}, got, "candidates lead in the order they began")
		require.NoError(t, e.Do("DEL", order).Error())
	})
}

// helperElectPause campaigns (with LEASE, a fixed lease, if set; else the watchdog of
// WATCHDOG), prints "leading", and checks the term context in a loop that uses no timer, as
// runPauseProbe does; when the clock jumped by more than a second between two checks, it
// prints the first Err after the jump, whether the term was lost and whether Done was closed.
func helperElectPause(ch child) error {
	var opts []rlock.MutexOption
	if d, err := time.ParseDuration(os.Getenv("LEASE")); err == nil {
		opts = append(opts, rlock.WithLease(d))
	}
	el := ch.election(opts...)
	term, err := el.Campaign(bg, "paused")
	if err != nil {
		return err
	}
	fmt.Println("leading")
	last := time.Now()
	for give := last.Add(20 * time.Second); time.Now().Before(give); {
		spin(20000)
		before := time.Now()
		err := term.Err()
		after := time.Now()
		switch {
		case after.Sub(before) > time.Second:
			fmt.Println("ambiguous")
			return nil
		case before.Sub(last) > time.Second:
			done := false
			select {
			case <-term.Done():
				done = true
			default:
			}
			fmt.Printf("first %v; lost: %v; done: %v\n", err, rlock.Lost(term), done)
			bufio.NewReader(os.Stdin).ReadString('\n') //nolint:errcheck // until the parent has read
			return nil
		}
		last = after
		runtime.Gosched()
	}
	fmt.Println("no pause seen")
	return nil
}

// TestElection_pausedLeader stops a leader process (SIGSTOP) for 3s, longer than its lease (a
// 1s watchdog lease, or WithLease(500ms)); meanwhile the parent leads, with a larger term. When
// the leader resumes, its first check of its term context, before any timer of the process can
// run, finds it over (lost; Err DeadlineExceeded for a fixed lease), and Done closed.
func TestElection_pausedLeader(t *testing.T) {
	for _, lease := range []string{"watchdog", "fixed"} {
		t.Run(lease, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			env := []string{"PREFIX=" + e.Prefix, "LOCK=paused", "GOMAXPROCS=1"}
			want := context.Canceled
			if lease == "fixed" {
				env = append(env, "LEASE=500ms")
				want = context.DeadlineExceeded
			} else {
				env = append(env, "WATCHDOG=1s")
			}
			el := e.client(rlock.Options{}).NewElection("paused")
			for try := 0; ; try++ {
				c := redistest.StartChild(t, "electpause", env...)
				c.Expect(t, "leading")
				time.Sleep(100 * time.Millisecond)
				require.NoError(t, c.Cmd.Process.Signal(syscall.SIGSTOP))
				stopped := time.Now()
				ctx, cancel := context.WithTimeout(bg, 2500*time.Millisecond)
				h, err := el.Campaign(ctx, "parent")
				cancel()
				require.NoError(t, err, "the parent leads once the stopped leader's lease ran out")
				t.Logf("the parent led %v after the stop", time.Since(stopped).Round(time.Millisecond))
				time.Sleep(time.Until(stopped.Add(3 * time.Second)))
				require.NoError(t, c.Cmd.Process.Signal(syscall.SIGCONT))
				require.True(t, c.Out.Scan(), "the child ended without a report")
				line := c.Out.Text()
				require.NoError(t, el.Resign(h))
				if line == "ambiguous" && try < 5 {
					t.Logf("try %d: the process was stopped during a check; again", try)
					c.Wait(t)
					continue
				}
				assert.Equal(t, fmt.Sprintf("first %v; lost: true; done: true", want), line, "the first Err after the pause")
				_, _ = c.In.Write([]byte("\n"))
				c.Wait(t)
				break
			}
		})
	}
}
