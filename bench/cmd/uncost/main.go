// Command uncost splits the Redis CPU of an uncontended lock+unlock (issue 28). Against one
// throwaway Redis (it loads Redis Functions libraries uncost1, uncost2, ...; run it on the
// same machine, it reads /proc of the server), it runs interleaved rounds: every contender
// takes -ops lock+unlocks in turn, one goroutine, in a rotated order each round, and reports
// per lock+unlock the medians over rounds of:
//
//   - cpu/op: Redis' used_cpu_user + used_cpu_sys; "vs pair [IQR]": the median and
//     quartiles of the ratio to the -base contender's slice of the same round;
//   - script: commandstats usec of EVAL*/FCALL* (wall-clock, their calls included); inner:
//     usec of the commands scripts called; outside: cpu/op minus script and other top-level
//     usec; out-pair: outside minus the base's;
//   - p50 (µs), cli (this process' CPU per op, µs), and of Redis' main thread: wait (µs
//     runnable but not running, /proc/PID/schedstat), vcs and ivcs (voluntary and
//     involuntary context switches per op);
//   - calls/op of the top-level commands (-calls: of every command).
//
// Contenders (see contenders): "pair", bench's baseline EVALSHA pair; "raw*", rlock's own
// scripts (wire) sent with the library's exact KEYS and ARGV by plain EVALSHA, and variants
// of them that split the cost; "lib*", the library itself; "fcall*", the same script bodies
// as Redis Functions; "*-pipe", batches of 20 lock+unlocks in one pipeline, so that Redis
// runs them back to back without sleeping (the commands' own cost; use -base pair-pipe).
//
//	go run ./cmd/uncost -addr HOST:PORT [-rounds 40] [-ops 800] [-only a,b] [-base pair]
//	go run ./cmd/uncost -addr HOST:PORT -hold lib -for 10s # one contender alone, for perf
package main

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/wire"
)

type contender struct {
	name  string
	per   int // lock+unlocks per op call (pipelined contenders); 0: 1
	setup func(ctx context.Context) error
	op    func(ctx context.Context) error
}

type sample struct {
	ops               int
	redisCPU, mainCPU float64 // µs
	clientCPU         float64 // µs
	usec, calls       map[string]int64
	p50               float64 // µs
	sched             schedStat
}

// schedStat is what Linux says of Redis' main thread: time on a CPU, time runnable but
// waiting for one (ns), voluntary and involuntary context switches.
type schedStat struct{ run, wait, vol, invol float64 }

func readSched(pid string) schedStat {
	var st schedStat
	b, err := os.ReadFile("/proc/" + pid + "/schedstat")
	if err != nil {
		return st
	}
	f := strings.Fields(string(b))
	if len(f) >= 2 {
		st.run, _ = strconv.ParseFloat(f[0], 64)
		st.wait, _ = strconv.ParseFloat(f[1], 64)
	}
	b, _ = os.ReadFile("/proc/" + pid + "/status")
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "voluntary_ctxt_switches":
			st.vol, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
		case "nonvoluntary_ctxt_switches":
			st.invol, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return st
}

func infoValue(s, name string) string {
	for line := range strings.SplitSeq(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

var (
	addr     = flag.String("addr", os.Getenv("REDIS_ADDR"), "redis address")
	rounds   = flag.Int("rounds", 10, "rounds")
	nops     = flag.Int("ops", 3000, "ops per contender per round")
	only     = flag.String("only", "", "comma-separated contender names (pair always runs)")
	hold     = flag.String("hold", "", "run this one contender alone for -for (for perf)")
	base     = flag.String("base", "pair", "the contender the ratios divide by")
	allCalls = flag.Bool("calls", false, "list every command's calls per op")
	holdD    = flag.Duration("for", 20*time.Second, "with -hold: how long")
)

func main() {
	flag.Parse()
	ctx := context.Background()
	newClient := func(tweak func(*rueidis.ClientOption)) rueidis.Client {
		o := rueidis.ClientOption{InitAddress: []string{*addr}}
		if tweak != nil {
			tweak(&o)
		}
		c, err := rueidis.NewClient(o)
		must(err)
		return c
	}
	rc := newClient(nil)
	cs := contenders(rc, newClient)
	if *hold != "" {
		for _, c := range cs {
			if c.name == *hold {
				must(c.setup(ctx))
				end := time.Now().Add(*holdD)
				n := 0
				for time.Now().Before(end) {
					must(runOp(ctx, c))
					n++
				}
				fmt.Println(c.name, n, "ops")
				return
			}
		}
		panic("no contender " + *hold)
	}
	if *only != "" {
		want := map[string]bool{*base: true}
		for _, n := range strings.Split(*only, ",") {
			want[n] = true
		}
		cs = slices.DeleteFunc(cs, func(c contender) bool { return !want[c.name] })
	}
	if i := slices.IndexFunc(cs, func(c contender) bool { return c.name == *base }); i > 0 {
		b := cs[i]
		cs = append([]contender{b}, slices.Delete(cs, i, i+1)...)
	}
	for _, c := range cs {
		must(c.setup(ctx))
		for range 300 {
			must(runOp(ctx, c))
		}
	}
	res := make(map[string][]sample)
	for r := range *rounds {
		for i := range cs {
			c := cs[(i+r)%len(cs)]
			s, err := measure(ctx, rc, c)
			must(err)
			res[c.name] = append(res[c.name], s)
		}
		fmt.Fprintf(os.Stderr, "round %d done %s\n", r+1, time.Now().Format("15:04:05"))
	}
	report(cs, res)
}

func runOp(ctx context.Context, c contender) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.op(ctx)
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

type info struct {
	sched       schedStat
	cpu, main   float64
	usec, calls map[string]int64
}

func readInfo(ctx context.Context, rc rueidis.Client) (info, error) {
	s, err := rc.Do(ctx, rc.B().Info().Section("server", "cpu", "commandstats").Build()).ToString()
	if err != nil {
		return info{}, err
	}
	in := info{usec: map[string]int64{}, calls: map[string]int64{}}
	if pid := infoValue(s, "process_id"); pid != "" {
		in.sched = readSched(pid)
	}
	for line := range strings.SplitSeq(s, "\n") {
		line = strings.TrimSpace(line)
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k {
		case "used_cpu_sys", "used_cpu_user":
			f, _ := strconv.ParseFloat(v, 64)
			in.cpu += f * 1e6
		case "used_cpu_sys_main_thread", "used_cpu_user_main_thread":
			f, _ := strconv.ParseFloat(v, 64)
			in.main += f * 1e6
		}
		if name, ok := strings.CutPrefix(k, "cmdstat_"); ok {
			for f := range strings.SplitSeq(v, ",") {
				if x, ok := strings.CutPrefix(f, "calls="); ok {
					in.calls[name], _ = strconv.ParseInt(x, 10, 64)
				}
				if x, ok := strings.CutPrefix(f, "usec="); ok {
					in.usec[name], _ = strconv.ParseInt(x, 10, 64)
				}
			}
		}
	}
	return in, nil
}

func processCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
}

func measure(ctx context.Context, rc rueidis.Client, c contender) (sample, error) {
	lats := make([]float64, 0, *nops)
	b, err := readInfo(ctx, rc)
	if err != nil {
		return sample{}, err
	}
	c0 := processCPU()
	for range *nops {
		t := time.Now()
		if err := runOp(ctx, c); err != nil {
			return sample{}, fmt.Errorf("%s: %w", c.name, err)
		}
		lats = append(lats, float64(time.Since(t).Nanoseconds())/1e3)
	}
	c1 := processCPU()
	a, err := readInfo(ctx, rc)
	if err != nil {
		return sample{}, err
	}
	s := sample{ops: *nops * max(c.per, 1), redisCPU: a.cpu - b.cpu, mainCPU: a.main - b.main, clientCPU: c1 - c0,
		usec: map[string]int64{}, calls: map[string]int64{},
		sched: schedStat{a.sched.run - b.sched.run, a.sched.wait - b.sched.wait, a.sched.vol - b.sched.vol, a.sched.invol - b.sched.invol}}
	for k, v := range a.calls {
		if k == "info" {
			continue
		}
		if d := v - b.calls[k]; d != 0 {
			s.calls[k] = d
			s.usec[k] = a.usec[k] - b.usec[k]
		}
	}
	sort.Float64s(lats)
	s.p50 = lats[len(lats)/2]
	return s, nil
}

var scriptCmds = []string{"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"}

// topLevel are the commands a contender sends itself besides scripts.
var topLevel = []string{"ping", "client|tracking", "hello", "cluster|slots", "function|load", "script|load"}

func med(xs []float64) float64 {
	xs = slices.Clone(xs)
	sort.Float64s(xs)
	if len(xs) == 0 {
		return math.NaN()
	}
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

func report(cs []contender, res map[string][]sample) {
	pair := res[*base]
	fmt.Printf("%-18s %8s %16s %7s %8s %8s %8s %8s %7s %6s %5s %5s %5s  %s\n", "contender", "cpu/op", "vs pair [IQR]",
		"main", "script", "inner", "outside", "out-pair", "p50", "cli", "wait", "vcs", "ivcs", "calls/op")
	var pairOut float64
	for _, c := range cs {
		ss := res[c.name]
		var cpu, main, ratio, script, inner, outside, p50, cli, wait, vcs, ivcs []float64
		calls := map[string]float64{}
		for r, s := range ss {
			n := float64(s.ops)
			cpu = append(cpu, s.redisCPU/n)
			main = append(main, s.mainCPU/n)
			ratio = append(ratio, (s.redisCPU/n)/(pair[r].redisCPU/float64(pair[r].ops)))
			var sc, top, all int64
			for k, v := range s.usec {
				all += v
				if slices.Contains(scriptCmds, k) {
					sc += v
				}
				if slices.Contains(topLevel, k) {
					top += v
				}
			}
			script = append(script, float64(sc)/n)
			inner = append(inner, float64(all-sc-top)/n)
			o := s.redisCPU/n - float64(sc+top)/n
			outside = append(outside, o)
			p50 = append(p50, s.p50)
			cli = append(cli, s.clientCPU/n)
			wait = append(wait, s.sched.wait/1e3/n)
			vcs = append(vcs, s.sched.vol/n)
			ivcs = append(ivcs, s.sched.invol/n)
			for k, v := range s.calls {
				calls[k] += float64(v) / n / float64(len(ss))
			}
		}
		var cl []string
		for k, v := range calls {
			if *allCalls || slices.Contains(scriptCmds, k) || slices.Contains(topLevel, k) {
				cl = append(cl, fmt.Sprintf("%s=%.2f", k, v))
			}
		}
		sort.Strings(cl)
		rs := slices.Clone(ratio)
		sort.Float64s(rs)
		q1, q3 := rs[len(rs)/4], rs[(3*len(rs))/4]
		mo := med(outside)
		if c.name == *base {
			pairOut = mo
		}
		fmt.Printf("%-18s %8.1f %5.2f [%.2f-%.2f] %7.1f %8.1f %8.1f %8.1f %8.1f %7.0f %6.1f %5.1f %5.2f %5.3f  %s\n", c.name, med(cpu), med(ratio),
			q1, q3, med(main), med(script), med(inner), mo, mo-pairOut, med(p50), med(cli), med(wait), med(vcs), med(ivcs), strings.Join(cl, " "))
	}
}

// ids makes request ids as the library does: 12 characters of the client, then a counter.
type ids struct {
	prefix string
	n      uint64
}

func (g *ids) next() string {
	g.n++
	return g.prefix + strconv.FormatUint(g.n, 36)
}

func contenders(rc rueidis.Client, newClient func(func(*rueidis.ClientOption)) rueidis.Client) []contender {
	var cs []contender
	none := func(context.Context) error { return nil }
	// scriptPair builds a contender of two scripts (acquire, release) with args from fn.
	type call struct {
		keys, args []string
	}
	evalPair := func(name, acqSrc, relSrc string, c rueidis.Client, args func() (call, call)) contender {
		acq, rel := rueidis.NewLuaScript(acqSrc), rueidis.NewLuaScript(relSrc)
		return contender{name: name, setup: none, op: func(ctx context.Context) error {
			a, r := args()
			if err := acq.Exec(ctx, c, a.keys, a.args).Error(); err != nil && !rueidis.IsRedisNil(err) {
				return err
			}
			return rel.Exec(ctx, c, r.keys, r.args).Error()
		}}
	}
	lib := 0
	fcallPair := func(name, acqSrc, relSrc string, c rueidis.Client, args func() (call, call)) contender {
		lib++
		libName := fmt.Sprintf("uncost%d", lib)
		code := "#!lua name=" + libName + "\n" +
			"redis.register_function('" + libName + "_a', function(KEYS, ARGV)\n" + acqSrc + "\nend)\n" +
			"redis.register_function('" + libName + "_r', function(KEYS, ARGV)\n" + relSrc + "\nend)\n"
		return contender{name: name, setup: func(ctx context.Context) error {
			return c.Do(ctx, c.B().FunctionLoad().Replace().FunctionCode(code).Build()).Error()
		}, op: func(ctx context.Context) error {
			a, r := args()
			if err := c.Do(ctx, c.B().Fcall().Function(libName+"_a").Numkeys(int64(len(a.keys))).Key(a.keys...).Arg(a.args...).Build()).Error(); err != nil && !rueidis.IsRedisNil(err) {
				return err
			}
			return c.Do(ctx, c.B().Fcall().Function(libName+"_r").Numkeys(int64(len(r.keys))).Key(r.keys...).Arg(r.args...).Build()).Error()
		}}
	}

	// a. the pair, as bench's baseline.
	pairAcq := `return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])`
	pairRel := `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`
	pairID := "a1b2c3d4e5f60718"
	var pseq uint64
	pairArgs := func() (call, call) {
		pseq++
		v := pairID + ":" + strconv.FormatUint(pseq, 10)
		return call{[]string{"bench:pair"}, []string{v, "30000"}}, call{[]string{"bench:pair"}, []string{v}}
	}
	cs = append(cs, evalPair("pair", pairAcq, pairRel, rc, pairArgs))
	cs = append(cs, contender{name: "ping2", setup: none, op: func(ctx context.Context) error {
		if err := rc.Do(ctx, rc.B().Ping().Build()).Error(); err != nil {
			return err
		}
		return rc.Do(ctx, rc.B().Ping().Build()).Error()
	}})
	// The pair with client think time after each reply: does Redis CPU per op follow the
	// client's time per op (wake-ups, caches) rather than the commands?
	for _, d := range []time.Duration{20 * time.Microsecond, 60 * time.Microsecond} {
		acq, rel := rueidis.NewLuaScript(pairAcq), rueidis.NewLuaScript(pairRel)
		spin := func() {
			t := time.Now()
			for time.Since(t) < d {
			}
		}
		cs = append(cs, contender{name: fmt.Sprintf("pair-spin%d", d.Microseconds()), setup: none, op: func(ctx context.Context) error {
			a, r := pairArgs()
			if err := acq.Exec(ctx, rc, a.keys, a.args).Error(); err != nil && !rueidis.IsRedisNil(err) {
				return err
			}
			spin()
			err := rel.Exec(ctx, rc, r.keys, r.args).Error()
			spin()
			return err
		}})
	}
	// The pair and rlock's requests each on a client of its own (default options), used by
	// one goroutine only, as bench's baseline: rueidis keeps such a client's connections in
	// its sync mode (the caller writes and reads). "-bg": the same after a burst of
	// concurrent calls has moved its connections to the background mode (a writer and a
	// reader goroutine per connection), as a client shared with rlock's goroutines is.
	own, ownBG, ownRaw, ownRawBG := newClient(nil), newClient(nil), newClient(nil), newClient(nil)
	burst := func(c rueidis.Client) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			errs := make(chan error, 64)
			for range 64 {
				go func() { errs <- c.Do(ctx, c.B().Ping().Build()).Error() }()
			}
			for range 64 {
				if err := <-errs; err != nil {
					return err
				}
			}
			return nil
		}
	}
	pairOwn := evalPair("pair-own", pairAcq, pairRel, own, pairArgs)
	cs = append(cs, pairOwn)
	pairBG := evalPair("pair-own-bg", pairAcq, pairRel, ownBG, pairArgs)
	pairBG.setup = burst(ownBG)
	cs = append(cs, pairBG)
	notrack := newClient(func(o *rueidis.ClientOption) { o.DisableCache = true })
	cs = append(cs, evalPair("pair-notrack", pairAcq, pairRel, notrack, pairArgs))

	// b. rlock's Mutex scripts with the library's KEYS and ARGV.
	g := &ids{prefix: "138687273c67"}
	mutexArgs := func(key string) func() (call, call) {
		return func() (call, call) {
			owner := g.next()
			rel := g.next()
			return call{[]string{key}, wire.AcquireArgs{Owner: owner, LeaseMs: "30000", Request: owner, Mode: wire.Mode("take")}.Strings()},
				call{[]string{key, key + ":ch"}, wire.ReleaseArgs{Owner: owner, Request: rel, Message: wire.UnlockMessage}.Strings()}
		}
	}
	acqSrc, relSrc := wire.Acquire.For(false).Source(), wire.Release.For(false).Source()
	cs = append(cs, evalPair("raw", acqSrc, relSrc, rc, mutexArgs("rlock:{raw}")))
	cs = append(cs, evalPair("raw-notrack", acqSrc, relSrc, notrack, mutexArgs("rlock:{rawnt}")))
	// The same requests, each sent from a goroutine of its own that the caller waits for with
	// a timer, as the library's bounded calls do (bound.go's flights).
	fly := func(f func() error) error {
		done := make(chan error, 1)
		go func() { done <- f() }()
		t := time.NewTimer(time.Second)
		defer t.Stop()
		select {
		case err := <-done:
			return err
		case <-t.C:
			return fmt.Errorf("no reply")
		}
	}
	flyPair := func(name, acqSrc, relSrc string, args func() (call, call)) contender {
		acq, rel := rueidis.NewLuaScript(acqSrc), rueidis.NewLuaScript(relSrc)
		return contender{name: name, setup: none, op: func(ctx context.Context) error {
			a, r := args()
			if err := fly(func() error {
				if err := acq.Exec(ctx, rc, a.keys, a.args).Error(); err != nil && !rueidis.IsRedisNil(err) {
					return err
				}
				return nil
			}); err != nil {
				return err
			}
			return fly(func() error { return rel.Exec(ctx, rc, r.keys, r.args).Error() })
		}}
	}
	cs = append(cs, flyPair("raw-flight", acqSrc, relSrc, mutexArgs("rlock:{rawfl}")))
	cs = append(cs, flyPair("pair-flight", pairAcq, pairRel, pairArgs))
	cs = append(cs, evalPair("raw-own", acqSrc, relSrc, ownRaw, mutexArgs("rlock:{rawown}")))
	rawBG := evalPair("raw-own-bg", acqSrc, relSrc, ownRawBG, mutexArgs("rlock:{rawownbg}"))
	rawBG.setup = burst(ownRawBG)
	cs = append(cs, rawBG)
	// d. variants.
	// The release without its PUBLISH, and both scripts as they were before their fast paths
	// answered integers (Lua tables: {1, 1, 0}, {0, n}).
	pubLine := "  return redis.call(PUBLISH, KEYS[2], ARGV[3]) -- {0, n}, see Script.Ints\n"
	mustHave(relSrc, pubLine)
	relNoPub := strings.Replace(relSrc, pubLine, "  return 0\n", 1)
	cs = append(cs, evalPair("raw-nopub", acqSrc, relNoPub, rc, mutexArgs("rlock:{rawnp}")))
	cs = append(cs, evalPair("raw-table", tables(acqSrc), tables(relSrc), rc, mutexArgs("rlock:{rawtb}")))
	// Only lib.lua's constants and the fast path: the script's size and body left out.
	cs = append(cs, evalPair("raw-fastonly", fastOnly(acqSrc), fastOnly(relSrc), rc, mutexArgs("rlock:{rawfo}")))
	// The fast path's calls alone, hand-written, without lib.lua's constants.
	miniAcq := `if redis.call('pttl', KEYS[1]) == -2 then redis.call('hset', KEYS[1], ARGV[1], 1) redis.call('pexpire', KEYS[1], ARGV[2]) return {1, 1, 0} end return {0, 1}`
	miniRel := `local h = redis.call('hmget', KEYS[1], ARGV[1], '\0' .. string.sub(ARGV[2], 1, 12) .. ARGV[1], '\1k')
if h[1] == '1' and not h[3] then redis.call('del', KEYS[1]) return {0, redis.call('publish', KEYS[2], ARGV[3])} end return {-1, 0}`
	cs = append(cs, evalPair("mini", miniAcq, miniRel, rc, mutexArgs("rlock:{mini}")))
	// The same with a string key: SET PX instead of HSET+PEXPIRE, GET instead of HMGET.
	miniSetAcq := `if redis.call('pttl', KEYS[1]) == -2 then redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2]) return {1, 1, 0} end return {0, 1}`
	miniSetRel := `local h = redis.call('get', KEYS[1])
if h == ARGV[1] then redis.call('del', KEYS[1]) return {0, redis.call('publish', KEYS[2], ARGV[3])} end return {-1, 0}`
	cs = append(cs, evalPair("mini-set", miniSetAcq, miniSetRel, rc, mutexArgs("rlock:{minis}")))
	// The pair's scripts sent with rlock's numbers of KEYS and ARGV.
	var p2 uint64
	cs = append(cs, evalPair("pair+args", pairAcq, pairRel, rc, func() (call, call) {
		p2++
		v := pairID + ":" + strconv.FormatUint(p2, 10)
		return call{[]string{"bench:pairx"}, []string{v, "30000", v, "take"}},
			call{[]string{"bench:pairx", "bench:pairx:ch"}, []string{v, v + "x", "0"}}
	}))
	empty := "return 1"
	cs = append(cs, evalPair("empty2", empty, empty, rc, func() (call, call) { return call{}, call{} }))
	cs = append(cs, evalPair("empty2+args", empty, empty, rc, mutexArgs("rlock:{empty}")))
	// Scripts as big as rlock's whose body returns at once.
	cs = append(cs, evalPair("empty2-big", "do return 1 end\n"+acqSrc, "do return 1 end\n"+relSrc, rc, func() (call, call) { return call{}, call{} }))

	// Pipelined: batches of lock+unlocks in one DoMulti each, so Redis runs them back to
	// back without sleeping between requests: the commands' own cost, without wake-ups.
	const batch = 20
	pipeOf := func(name string, mk func(rueidis.Builder, call, bool) rueidis.Completed, setup func(context.Context) error,
		args func() (call, call)) contender {
		return contender{name: name, per: batch, setup: setup, op: func(ctx context.Context) error {
			cmds := make(rueidis.Commands, 0, 2*batch)
			for range batch {
				a, r := args()
				cmds = append(cmds, mk(rc.B(), a, true), mk(rc.B(), r, false))
			}
			for i, res := range rc.DoMulti(ctx, cmds...) {
				if err := res.Error(); err != nil && !(i%2 == 0 && rueidis.IsRedisNil(err)) {
					return err
				}
			}
			return nil
		}}
	}
	evalPipe := func(name, acqSrc, relSrc string, args func() (call, call)) contender {
		sa, sr := sha(acqSrc), sha(relSrc)
		return pipeOf(name+"-pipe", func(b rueidis.Builder, c call, acq bool) rueidis.Completed {
			h := sr
			if acq {
				h = sa
			}
			return b.Evalsha().Sha1(h).Numkeys(int64(len(c.keys))).Key(c.keys...).Arg(c.args...).Build()
		}, func(ctx context.Context) error {
			for _, src := range []string{acqSrc, relSrc} {
				if err := rc.Do(ctx, rc.B().ScriptLoad().Script(src).Build()).Error(); err != nil {
					return err
				}
			}
			return nil
		}, args)
	}
	fcallPipe := func(name, acqSrc, relSrc string, args func() (call, call)) contender {
		lib++
		libName := fmt.Sprintf("uncost%d", lib)
		code := "#!lua name=" + libName + "\n" +
			"redis.register_function('" + libName + "_a', function(KEYS, ARGV)\n" + acqSrc + "\nend)\n" +
			"redis.register_function('" + libName + "_r', function(KEYS, ARGV)\n" + relSrc + "\nend)\n"
		return pipeOf(name+"-pipe", func(b rueidis.Builder, c call, acq bool) rueidis.Completed {
			f := libName + "_r"
			if acq {
				f = libName + "_a"
			}
			return b.Fcall().Function(f).Numkeys(int64(len(c.keys))).Key(c.keys...).Arg(c.args...).Build()
		}, func(ctx context.Context) error {
			return rc.Do(ctx, rc.B().FunctionLoad().Replace().FunctionCode(code).Build()).Error()
		}, args)
	}
	cs = append(cs,
		evalPipe("pair", pairAcq, pairRel, pairArgs),
		evalPipe("raw", acqSrc, relSrc, mutexArgs("rlock:{rawp}")),
		evalPipe("raw-nopub", acqSrc, relNoPub, mutexArgs("rlock:{rawnpp}")),
		evalPipe("raw-table", tables(acqSrc), tables(relSrc), mutexArgs("rlock:{rawtbp}")),
		evalPipe("raw-fastonly", fastOnly(acqSrc), fastOnly(relSrc), mutexArgs("rlock:{rawfop}")),
		evalPipe("mini", miniAcq, miniRel, mutexArgs("rlock:{minip}")),
		evalPipe("mini-set", miniSetAcq, miniSetRel, mutexArgs("rlock:{minisp}")),
		evalPipe("pair+args", pairAcq, pairRel, func() (call, call) {
			p2++
			v := pairID + ":" + strconv.FormatUint(p2, 10)
			return call{[]string{"bench:pairxp"}, []string{v, "30000", v, "take"}},
				call{[]string{"bench:pairxp", "bench:pairxp:ch"}, []string{v, v + "x", "0"}}
		}),
		evalPipe("empty2", empty, empty, func() (call, call) { return call{}, call{} }),
		evalPipe("empty2+args", empty, empty, mutexArgs("rlock:{emptyp}")),
		evalPipe("empty2-table", "return {1, 1, 0}", "return {0, 0}", func() (call, call) { return call{}, call{} }),
		evalPipe("empty2-status", "return {ok='OK'}", "return {ok='OK'}", func() (call, call) { return call{}, call{} }),
		fcallPipe("fcall", acqSrc, relSrc, mutexArgs("rlock:{fcallp}")),
		fcallPipe("fcall-pair", pairAcq, pairRel, pairArgs),
	)
	// c. the library.
	lc, err := rlock.New(rc, rlock.Options{})
	must(err)
	m := lc.NewMutex("lib", rlock.WithWait(rlock.PubSub()))
	cs = append(cs, libContender("lib", m.Lock, m.Unlock))
	m2 := lc.NewMutex("libnd")
	cs = append(cs, contender{name: "lib-nodeadline", setup: none, op: func(context.Context) error {
		h, err := m2.Lock(context.Background())
		if err != nil {
			return err
		}
		return m2.Unlock(h)
	}})

	// e. Redis Functions with the same bodies.
	cs = append(cs, fcallPair("fcall", acqSrc, relSrc, rc, mutexArgs("rlock:{fcall}")))
	cs = append(cs, fcallPair("fcall-pair", pairAcq, pairRel, rc, pairArgs))

	// Fair Mutex.
	fairArgs := func(key string) func() (call, call) {
		k := []string{key, key + ":queue", key + ":deadlines", key + ":fence"}
		return func() (call, call) {
			owner := g.next()
			rel := g.next()
			return call{k, wire.FairAcquireArgs{Owner: owner, LeaseMs: "30000", Request: owner, Mode: wire.Mode("take"),
					FairWaitMs: "5000", Join: true, ClaimMs: "5000"}.Strings()},
				call{[]string{key, key + ":ch", key + ":queue", key + ":deadlines", key + ":fence"},
					wire.FairReleaseArgs{Owner: owner, Request: rel}.Strings()}
		}
	}
	fa, fr := wire.FairAcquire.For(false).Source(), wire.FairRelease.For(false).Source()
	cs = append(cs, evalPair("raw-fair", fa, fr, rc, fairArgs("rlock:{rawfair}")))
	cs = append(cs, fcallPair("fcall-fair", fa, fr, rc, fairArgs("rlock:{fcfair}")))
	fm := lc.NewFairMutex("libfair")
	cs = append(cs, libContender("lib-fair", fm.Lock, fm.Unlock))

	// Semaphore (1 permit).
	semArgs := func(key string) func() (call, call) {
		k := []string{key, key + ":leases", key + ":queue", key + ":deadlines", key + ":ch"}
		return func() (call, call) {
			owner := g.next()
			return call{k, []string{owner, "30000", owner, "take", "1", "1", "5000", "wait", "5000"}},
				call{k, wire.SemReleaseArgs{Hold: owner}.Strings()}
		}
	}
	sa, sr := wire.SemAcquire.For(false).Source(), wire.SemRelease.For(false).Source()
	cs = append(cs, evalPair("raw-sem", sa, sr, rc, semArgs("rlock:{rawsem}")))
	cs = append(cs, fcallPair("fcall-sem", sa, sr, rc, semArgs("rlock:{fcsem}")))
	sem := lc.NewSemaphore("libsem", 1)
	cs = append(cs, libContender("lib-sem", func(ctx context.Context) (context.Context, error) {
		return sem.Acquire(ctx, 1)
	}, sem.Release))

	// RWMutex, write.
	rwArgs := func(key string) func() (call, call) {
		return func() (call, call) {
			owner := g.next()
			rel := g.next()
			return call{[]string{key, key + ":leases", key + ":writers", key + ":queue", key + ":deadlines", key + ":fence"},
					[]string{owner, "30000", owner, "take", "w", "0", "5000", "wait", "plain", "5000"}},
				call{[]string{key, key + ":leases", key + ":writers", key + ":queue", key + ":deadlines", key + ":ch", key + ":fence"},
					[]string{owner, rel, "w", "plain"}}
		}
	}
	ra, rr := wire.RWAcquire.For(false).Source(), wire.RWRelease.For(false).Source()
	cs = append(cs, evalPair("raw-rw", ra, rr, rc, rwArgs("rlock:{rawrw}")))
	cs = append(cs, fcallPair("fcall-rw", ra, rr, rc, rwArgs("rlock:{fcrw}")))
	rw := lc.NewRWMutex("librw")
	cs = append(cs, libContender("lib-rw", rw.Lock, rw.Unlock))
	cs = append(cs,
		evalPipe("raw-fair", fa, fr, fairArgs("rlock:{rawfairp}")),
		evalPipe("raw-fair-table", tables(fa), tables(fr), fairArgs("rlock:{rawfairtp}")),
		fcallPipe("fcall-fair", fa, fr, fairArgs("rlock:{fcfairp}")),
		evalPipe("raw-sem", sa, sr, semArgs("rlock:{rawsemp}")),
		evalPipe("raw-sem-table", tables(sa), tables(sr), semArgs("rlock:{rawsemtp}")),
		fcallPipe("fcall-sem", sa, sr, semArgs("rlock:{fcsemp}")),
		evalPipe("raw-rw", ra, rr, rwArgs("rlock:{rawrwp}")),
		evalPipe("raw-rw-table", tables(ra), tables(rr), rwArgs("rlock:{rawrwtp}")),
		fcallPipe("fcall-rw", ra, rr, rwArgs("rlock:{fcrwp}")),
	)
	return cs
}

// libContender is the library's lock and unlock of one kind, one after the other, as a
// contender.
func libContender(name string, lock func(context.Context) (context.Context, error),
	unlock func(context.Context) error) contender {
	return contender{name: name, setup: func(context.Context) error { return nil }, op: func(ctx context.Context) error {
		h, err := lock(ctx)
		if err != nil {
			return err
		}
		return unlock(h)
	}}
}

func sha(src string) string {
	h := sha1.Sum([]byte(src))
	return hex.EncodeToString(h[:])
}

// tables returns src with its fast path's integer replies back to the Lua tables they stand
// for (see wire.Script.Ints), as the scripts answered before.
func tables(src string) string {
	for _, r := range []struct{ re, to string }{
		{`return (.*) -- \{0, n\}, see Script.Ints`, "return {0, $1}"},
		{`return (.*) -- \{0, n, 0\}, see Script.Ints`, "return {0, $1, 0}"},
		{`return .* -- \{(.*)\}, see Script.Ints`, "return {$1}"},
	} {
		src = regexp.MustCompile(r.re).ReplaceAllString(src, r.to)
	}
	if strings.Contains(src, "}, see Script.Ints") {
		panic("an integer reply left")
	}
	return src
}

func mustHave(src, s string) {
	if !strings.Contains(src, s) {
		panic("source lacks " + s)
	}
}

// fastOnly returns src up to the end of its fast path.
func fastOnly(src string) string {
	i := strings.Index(src, "-- } fast path\n")
	if i < 0 {
		panic("no fast path")
	}
	return src[:i] + "return {-1, 0}\n"
}
