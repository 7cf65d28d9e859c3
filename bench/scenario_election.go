package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock"
)

// Scenario 13 measures rlock's leader election alone (no other library has one here): how long
// a leadership takes to change hands, and how long observers take to see the change. Where a
// bare mechanism bounds the figure, it runs beside it and the ratio is shown: the floor's
// release -> SET NX handoff (contender_floor.go) for Resign -> next term, a bare PUBLISH to one
// subscription per process for what observers see (rlock's observers share one subscription
// per process too), the lease for a killed leader.

// electionEnv names the environment variable that turns this binary into a process of the
// election scenario; its value is an electionJob.
const electionEnv = "RLOCK_BENCH_ELECTION"

// electionJob is what one process of the election scenario runs.
type electionJob struct {
	Addrs     []string      `json:"addrs"`
	Cluster   bool          `json:"cluster,omitempty"`
	KeyPrefix string        `json:"key_prefix"`
	Name      string        `json:"name"`
	Mode      string        `json:"mode"`      // "observe": Observers observers and the floor's subscription; "lead": campaign, lead until killed
	Observers int           `json:"observers"` // observe
	Floor     string        `json:"floor"`     // observe: the floor's channel
	Lease     time.Duration `json:"lease"`     // lead: WatchdogTimeout
}

// electionMain is the whole life of an election process: it writes "ready" (observe: once every
// observer has delivered its first leadership), then lines "obs OBSERVER TERM UNIXNS" for every
// delivery and "floor SEQ UNIXNS" for every floor message (observe), or "leading TERM" (lead),
// and ends when its input ends (or it is killed).
func electionMain(jobJSON string) int {
	var job electionJob
	if err := json.Unmarshal([]byte(jobJSON), &job); err != nil {
		fmt.Fprintln(os.Stderr, "bench election:", err)
		return 1
	}
	rc, err := newRueidis(job.Addrs, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench election:", err)
		return 1
	}
	defer rc.Close()
	c, err := rlock.New(rc, rlock.Options{KeyPrefix: job.KeyPrefix, WatchdogTimeout: job.Lease})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench election:", err)
		return 1
	}
	defer c.Close()
	el := c.NewElection(job.Name)
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	printf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format, args...)
		_ = out.Flush()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	switch job.Mode {
	case "lead":
		term, err := el.Campaign(ctx, "killed")
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench election:", err)
			return 1
		}
		t, _ := el.Term(term)
		printf("leading %d\n", t)
	case "observe":
		var first sync.WaitGroup
		for o := range job.Observers {
			ch := el.Observe(ctx)
			first.Add(1)
			wg.Go(func() {
				seen := false
				for l := range ch {
					printf("obs %d %d %d\n", o, l.Term, time.Now().UnixNano())
					if !seen {
						seen = true
						first.Done()
					}
				}
			})
		}
		sub := rc.B().Subscribe().Channel(job.Floor).Build()
		if job.Cluster {
			sub = rc.B().Ssubscribe().Channel(job.Floor).Build()
		}
		wg.Go(func() {
			_ = rc.Receive(ctx, sub, func(m rueidis.PubSubMessage) {
				printf("floor %s %d\n", m.Message, time.Now().UnixNano())
			})
		})
		first.Wait()
	}
	printf("ready\n")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// electionProc is a running process of the election scenario.
type electionProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan []string // its output lines, split into fields; closed when it ends
}

func startElectionProc(ctx context.Context, job electionJob) (*electionProc, error) {
	p := &electionProc{lines: make(chan []string, 4096)}
	var stdout io.Reader
	var err error
	if p.cmd, p.stdin, stdout, err = startSelf(ctx, electionEnv, job, os.Stderr); err != nil {
		return nil, err
	}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- strings.Fields(sc.Text())
		}
	}()
	return p, nil
}

// expect waits for a line whose first field is word and returns its fields.
func (p *electionProc) expect(word string, within time.Duration) ([]string, error) {
	t := time.NewTimer(within)
	defer t.Stop()
	for {
		select {
		case f, ok := <-p.lines:
			if !ok {
				return nil, fmt.Errorf("process ended before %q", word)
			}
			if len(f) > 0 && f[0] == word {
				return f, nil
			}
		case <-t.C:
			return nil, fmt.Errorf("no %q within %v", word, within)
		}
	}
}

// stop ends the process: its input closes; it is killed if it has not exited within a second.
func (p *electionProc) stop() {
	_ = p.stdin.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

func runElection(ctx context.Context, e *env) *ScenarioResult {
	const (
		observers = 100 // in 2 processes
		queued    = 10 * time.Millisecond
		lease     = time.Second
	)
	handoffs, rounds, kills := 200, 40, 5
	if e.quick {
		handoffs, rounds, kills = 30, 10, 2
	}
	s := &ScenarioResult{
		ID: "election",
		Setup: fmt.Sprintf("rlock Election only. Resign: a leader resigns while a candidate on another client "+
			"has campaigned for %v; the time from the Resign call to the candidate's Campaign returning its term "+
			"context, %d times, beside the floor's release -> SET NX on the same clients (floor_ratio: p50 over "+
			"the floor's). Kill: a leader process (WatchdogTimeout %v) is killed (SIGKILL) while a candidate waits; "+
			"the time to the candidate's term, %d times (lease_ratio: p50 over the lease). Observers: %d "+
			"Observe calls in 2 processes (one client each); the time from a Resign to each observer's delivery "+
			"of the next leader's term, and from the last leader's Resign to its delivery of the vacancy, %d "+
			"rounds, beside a bare PUBLISH to one subscription in each process (floor_ratio).",
			queued, handoffs, lease, kills, observers, rounds),
		Columns: []Column{
			{"p50_us", "p50", unitMicros},
			{"p99_us", "p99", unitMicros},
			{"floor_ratio", "vs floor p50", unitRatio},
			{"lease_ratio", "vs lease", unitRatio},
			{"samples", "samples", unitCount},
		},
	}
	prefix := e.keyPrefix("election", "rlock")
	cfg := e.contenderConfig(prefix)
	var done atomic.Int64
	total := float64(handoffs + rounds + kills)
	stop := e.progress.Track("rlock Election", func() float64 { return float64(done.Load()) / total })
	defer stop()
	row := func(id, name string, ds []time.Duration, err error) *Row {
		r := &Row{Contender: id, Name: name}
		s.Rows = append(s.Rows, r)
		if err != nil {
			r.Error = err.Error()
			return r
		}
		r.set("p50_us", micros(percentile(ds, 50)))
		r.set("p99_us", micros(percentile(ds, 99)))
		r.set("samples", float64(len(ds)))
		return r
	}
	ratio := func(r, floor *Row) {
		if r.Error == "" && floor.Error == "" {
			r.set("floor_ratio", r.value("p50_us")/floor.value("p50_us"))
		}
	}

	// Resign -> next term, and the floor's handoff.
	ds, fs, err := electionHandoffs(ctx, e, cfg, handoffs, queued, &done)
	resign := row("election-resign", "Resign -> next candidate's term", ds, err)
	fl := row("election-floor-handoff", "floor: release -> next SET NX", fs, err)
	ratio(resign, fl)

	// kill -9 -> new leader.
	ds, err = electionKills(ctx, cfg, kills, lease, queued, &done)
	r := row("election-kill", fmt.Sprintf("kill -9 of the leader -> next term (lease %v)", lease), ds, err)
	if err == nil {
		r.set("lease_ratio", float64(percentile(ds, 50))/float64(lease))
	}

	// Observers.
	lead, vac, floor, err := electionObservers(ctx, cfg, observers, rounds, queued, &done)
	fl = row("election-floor-publish", "floor: PUBLISH -> 1 subscriber in each of 2 processes", floor, err)
	ratio(row("election-observe-leader", fmt.Sprintf("%d observers see the next leader", observers), lead, err), fl)
	ratio(row("election-observe-vacancy", fmt.Sprintf("%d observers see the vacancy", observers), vac, err), fl)
	return s
}

// electionClients returns n rlock clients, each on a rueidis client of its own, and a func that
// closes them.
func electionClients(cfg contenderConfig, n int, lease time.Duration) ([]*rlock.Client, []rueidis.Client, func(), error) {
	var cs []*rlock.Client
	var rcs []rueidis.Client
	closeAll := func() {
		for _, c := range cs {
			_ = c.Close()
		}
		for _, rc := range rcs {
			rc.Close()
		}
	}
	for range n {
		rc, err := newRueidis(cfg.Addrs, nil)
		if err != nil {
			closeAll()
			return nil, nil, nil, err
		}
		rcs = append(rcs, rc)
		c, err := rlock.New(rc, rlock.Options{KeyPrefix: cfg.KeyPrefix, WatchdogTimeout: lease})
		if err != nil {
			closeAll()
			return nil, nil, nil, err
		}
		cs = append(cs, c)
	}
	return cs, rcs, closeAll, nil
}

// electionHandoffs measures n handoffs by Resign, then n of the floor, on two clients each.
func electionHandoffs(ctx context.Context, e *env, cfg contenderConfig, n int, queued time.Duration, done *atomic.Int64) (
	[]time.Duration, []time.Duration, error) {
	cs, _, closeAll, err := electionClients(cfg, 2, 0)
	if err != nil {
		return nil, nil, err
	}
	defer closeAll()
	a, b := cs[0].NewElection("handoff"), cs[1].NewElection("handoff")
	var ds []time.Duration
	for range n {
		ta, err := a.Campaign(ctx, "a")
		if err != nil {
			return nil, nil, err
		}
		got := make(chan error, 1)
		var at time.Time
		var tb context.Context
		go func() {
			var err error
			tb, err = b.Campaign(ctx, "b")
			at = time.Now()
			got <- err
		}()
		time.Sleep(queued)
		t0 := time.Now()
		if err := a.Resign(ta); err != nil {
			return nil, nil, err
		}
		if err := <-got; err != nil {
			return nil, nil, err
		}
		ds = append(ds, at.Sub(t0))
		if err := b.Resign(tb); err != nil {
			return nil, nil, err
		}
		done.Add(1)
	}
	spec := floorSpec
	if e.redis.Cluster() {
		spec = floorShardedSpec
	}
	var fs []time.Duration
	fcfg := cfg
	fcfg.KeyPrefix += ":floor"
	var mus []Mutex
	for range 2 {
		f, err := spec.New(fcfg)
		if err != nil {
			return nil, nil, err
		}
		defer f.Close()
		mus = append(mus, f.Mutex("handoff"))
	}
	fa, fb := mus[0], mus[1]
	for range n {
		ha, err := fa.Lock(ctx)
		if err != nil {
			return nil, nil, err
		}
		got := make(chan error, 1)
		var at time.Time
		var hb Hold
		go func() {
			var err error
			hb, err = fb.Lock(ctx)
			at = time.Now()
			got <- err
		}()
		time.Sleep(queued)
		t0 := time.Now()
		if err := ha.Release(ctx); err != nil {
			return nil, nil, err
		}
		if err := <-got; err != nil {
			return nil, nil, err
		}
		fs = append(fs, at.Sub(t0))
		if err := hb.Release(ctx); err != nil {
			return nil, nil, err
		}
	}
	return ds, fs, nil
}

// electionKills measures n times from a SIGKILL of a leader process to a waiting candidate's
// term.
func electionKills(ctx context.Context, cfg contenderConfig, n int, lease, queued time.Duration, done *atomic.Int64) (
	[]time.Duration, error) {
	cs, _, closeAll, err := electionClients(cfg, 1, lease)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	el := cs[0].NewElection("killed")
	var ds []time.Duration
	for range n {
		p, err := startElectionProc(ctx, electionJob{Addrs: cfg.Addrs, Cluster: cfg.Cluster, KeyPrefix: cfg.KeyPrefix,
			Name: "killed", Mode: "lead", Lease: lease})
		if err != nil {
			return nil, err
		}
		if _, err := p.expect("ready", 10*time.Second); err != nil {
			p.stop()
			return nil, err
		}
		got := make(chan error, 1)
		var at time.Time
		var term context.Context
		go func() {
			var err error
			term, err = el.Campaign(ctx, "next")
			at = time.Now()
			got <- err
		}()
		time.Sleep(queued)
		t0 := time.Now()
		_ = p.cmd.Process.Kill()
		p.stop()
		if err := <-got; err != nil {
			return nil, err
		}
		ds = append(ds, at.Sub(t0))
		if err := el.Resign(term); err != nil {
			return nil, err
		}
		done.Add(1)
	}
	return ds, nil
}

// electionObservers measures, over rounds, the time until every observer (in 2 processes) sees
// the next leader after a Resign and the vacancy after the last leader's Resign, and a bare
// PUBLISH's time to one subscription in each process.
func electionObservers(ctx context.Context, cfg contenderConfig, observers, rounds int, queued time.Duration, done *atomic.Int64) (
	lead, vac, floor []time.Duration, err error) {
	cs, rcs, closeAll, err := electionClients(cfg, 2, 0)
	if err != nil {
		return nil, nil, nil, err
	}
	defer closeAll()
	a, b := cs[0].NewElection("observed"), cs[1].NewElection("observed")
	channel := "{" + cfg.KeyPrefix + ":observed}:floor"
	// events are the processes' lines, each with the process's index in front:
	// "P obs OBSERVER TERM NS" or "P floor MSG NS".
	events := make(chan []string, 8192)
	var procs []*electionProc
	var fwd sync.WaitGroup
	defer func() {
		for _, p := range procs {
			p.stop()
		}
		fwd.Wait()
	}()
	for i := range 2 {
		p, err := startElectionProc(ctx, electionJob{Addrs: cfg.Addrs, Cluster: cfg.Cluster, KeyPrefix: cfg.KeyPrefix,
			Name: "observed", Mode: "observe", Observers: observers / 2, Floor: channel})
		if err != nil {
			return nil, nil, nil, err
		}
		procs = append(procs, p)
		if _, err := p.expect("ready", 10*time.Second); err != nil {
			return nil, nil, nil, err
		}
		fwd.Go(func() {
			for f := range p.lines {
				select {
				case events <- append([]string{strconv.Itoa(i)}, f...):
				default: // nobody reads: the measurement has ended
				}
			}
		})
	}
	// wait consumes events until match has held for n distinct observers (or processes),
	// returning each one's first matching time since t0.
	wait := func(t0 time.Time, n int, match func(f []string) bool, within time.Duration) ([]time.Duration, error) {
		seen := map[string]bool{}
		var ds []time.Duration
		timeout := time.After(within)
		for len(seen) < n {
			select {
			case f := <-events:
				if !match(f) {
					continue
				}
				id := f[0] + " " + f[2]
				if f[1] == "floor" {
					id = f[0]
				}
				if !seen[id] {
					ns, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
					seen[id] = true
					ds = append(ds, time.Duration(ns-t0.UnixNano()))
				}
			case <-timeout:
				return nil, fmt.Errorf("%d of %d seen within %v", len(seen), n, within)
			}
		}
		return ds, nil
	}
	termIs := func(t int64) func([]string) bool {
		s := strconv.FormatInt(t, 10)
		return func(f []string) bool { return len(f) == 5 && f[1] == "obs" && f[3] == s }
	}
	floorIs := func(msg string) func([]string) bool {
		return func(f []string) bool { return len(f) == 4 && f[1] == "floor" && f[2] == msg }
	}
	publish := func(msg string) error {
		rc := rcs[0]
		if cfg.Cluster {
			return rc.Do(ctx, rc.B().Spublish().Channel(channel).Message(msg).Build()).Error()
		}
		return rc.Do(ctx, rc.B().Publish().Channel(channel).Message(msg).Build()).Error()
	}
	// Until both processes' floor subscriptions are confirmed: a message they both receive.
	for try := 0; ; try++ {
		if err := publish("hello"); err != nil {
			return nil, nil, nil, err
		}
		if _, err := wait(time.Now(), 2, floorIs("hello"), 100*time.Millisecond); err == nil {
			break
		} else if try == 50 {
			return nil, nil, nil, fmt.Errorf("floor subscriptions: %w", err)
		}
	}
	for r := range rounds {
		ta, err := a.Campaign(ctx, "a")
		if err != nil {
			return nil, nil, nil, err
		}
		n, _ := a.Term(ta)
		if _, err := wait(time.Now(), observers, termIs(n), 5*time.Second); err != nil {
			return nil, nil, nil, fmt.Errorf("first leader: %w", err)
		}
		got := make(chan error, 1)
		var tb context.Context
		go func() {
			var err error
			tb, err = b.Campaign(ctx, "b")
			got <- err
		}()
		time.Sleep(queued)
		t0 := time.Now()
		if err := a.Resign(ta); err != nil {
			return nil, nil, nil, err
		}
		if err := <-got; err != nil {
			return nil, nil, nil, err
		}
		n, _ = b.Term(tb)
		ds, err := wait(t0, observers, termIs(n), 5*time.Second)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("next leader: %w", err)
		}
		lead = append(lead, ds...)
		t0 = time.Now()
		if err := b.Resign(tb); err != nil {
			return nil, nil, nil, err
		}
		if ds, err = wait(t0, observers, termIs(0), 5*time.Second); err != nil {
			return nil, nil, nil, fmt.Errorf("vacancy: %w", err)
		}
		vac = append(vac, ds...)
		msg := strconv.Itoa(r)
		t0 = time.Now()
		if err := publish(msg); err != nil {
			return nil, nil, nil, err
		}
		if ds, err = wait(t0, 2, floorIs(msg), 5*time.Second); err != nil {
			return nil, nil, nil, fmt.Errorf("floor: %w", err)
		}
		floor = append(floor, ds...)
		done.Add(1)
	}
	return lead, vac, floor, nil
}
