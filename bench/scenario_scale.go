package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock"
)

// Scenarios 9 and 10 measure what rlock costs as the work grows: many holds on one client
// (memory, renewal traffic, time to take and release them), and many waiters on one client
// (memory, subscriptions). They run rlock's PubSub mutex only (the contender rlock-pubsub).

// scaleSpec is the contender the scale scenarios measure.
const scaleSpec = "rlock-pubsub"

// countingClient is a rueidis client that counts the round trips made through it: a Do is
// one, and a DoMulti one per node its commands go to (rueidis pipelines each node's commands
// together; there is one node unless owners is set).
type countingClient struct {
	rueidis.Client
	owners   map[uint16]string // hash slot -> address of its master, on a cluster
	calls    atomic.Int64      // round trips
	cmds     atomic.Int64      // commands sent by them
	inFlight atomic.Int64      // calls not yet answered
}

func (c *countingClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.calls.Add(1)
	c.cmds.Add(1)
	c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	return c.Client.Do(ctx, cmd)
}

func (c *countingClient) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	slots := make([]uint16, len(multi))
	for i := range multi {
		slots[i] = multi[i].Slot()
	}
	c.calls.Add(int64(roundTrips(slots, c.owners)))
	c.cmds.Add(int64(len(multi)))
	c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	return c.Client.DoMulti(ctx, multi...)
}

// anySlot is the slot rueidis gives a command without keys (cmds.InitSlot): it goes to the
// node of the pipeline's other commands, or to any one node.
const anySlot = uint16(1 << 14)

// roundTrips is the number of nodes a pipeline of commands with these slots goes to: the
// distinct masters of its slots, at least one. With owners nil (one server) it is one.
func roundTrips(slots []uint16, owners map[uint16]string) int {
	if owners == nil || len(slots) == 0 {
		return 1
	}
	nodes := map[string]bool{}
	for _, s := range slots {
		if s != anySlot {
			nodes[owners[s]] = true
		}
	}
	return max(len(nodes), 1)
}

// liveHeap collects garbage and returns the heap in use and the goroutine stacks in use.
func liveHeap() (heap, stack int64) {
	runtime.GC()
	runtime.GC() // a second cycle frees what the first one's finalizers released
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc), int64(ms.StackInuse)
}

// scaleSkipped says why the scale scenarios do not run (rlock-pubsub not selected), or "" when they do.
func (e *env) scaleSkipped() string {
	if !slices.ContainsFunc(e.contenders, func(c contenderSpec) bool { return c.ID == scaleSpec }) {
		return "n/a: " + scaleSpec + " not selected"
	}
	return ""
}

// withThousands writes n with thousands separators: 100,000.
func withThousands(n int) string {
	s := strconv.Itoa(n)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// renewalPeriod is the watchdog period of the holds scenario: WatchdogTimeout 3s, renewed
// every third of it.
const renewalPeriod = time.Second

func runHolds(ctx context.Context, e *env) *ScenarioResult {
	sizes := []int{1000, 10000, 100000}
	periods := 3
	if e.quick {
		sizes, periods = sizes[:1], 2
	}
	if e.holdSizes != nil {
		sizes = e.holdSizes
	}
	s := &ScenarioResult{
		ID: "holds",
		Setup: fmt.Sprintf("One rlock client (PubSub mutex, WatchdogTimeout %v, so renewed every %v) takes N locks of "+
			"distinct names (64 goroutines), holds them, and releases them all (64 goroutines); N = %s. "+
			"Client heap per hold is the live heap (runtime.MemStats HeapAlloc after GC) with the holds taken minus before, "+
			"over N: the Mutex of each name (NewMutex, measured alone first), its hold and context, and rlock's records; "+
			"without the Mutex leaves out the Mutex values the benchmark keeps (the heap with the holds taken minus with "+
			"the Mutexes made, over N). "+
			"Redis memory per lock is the "+
			"INFO memory used_memory delta over N%s. After the first renewal, commands are counted over %d renewal periods "+
			"(the window starts half a period after a renewal, so it holds exactly %d): round trips are the client's calls "+
			"(Do: one; DoMulti: one per node its commands go to, however many it pipelines), per master divides them by "+
			"%s, and scripts are EVAL/EVALSHA from INFO commandstats%s. "+
			"Lost counts holds whose context ended with ErrLockLost.",
			3*renewalPeriod, renewalPeriod, joinInts(sizes), e.overMasters(), periods, periods, e.masters(), e.overMasters()),
		Columns: []Column{
			{"heap_per_hold", "client heap/hold", unitBytes},
			{"heap_per_mutex", "of which the Mutex", unitBytes},
			{"heap_per_hold_excl_mutex", "without the Mutex", unitBytes},
			{"redis_mem_per_lock", "Redis memory/lock", unitBytes},
			{"take_all_us", "take all", unitMicros},
			{"release_all_us", "release all", unitMicros},
			{"round_trips_per_period", "renewal round trips/period", unitNum1},
			{"round_trips_per_node_period", "per master", unitNum},
			{"scripts_per_period", "scripts/period", unitNum1},
			{"lost", "lost", unitCount},
		},
	}
	skip := e.scaleSkipped()
	for _, n := range sizes {
		if ctx.Err() != nil {
			break
		}
		row := &Row{Contender: fmt.Sprintf("holds-%d", n), Name: fmt.Sprintf("rlock Mutex, %s holds", withThousands(n))}
		s.Rows = append(s.Rows, row)
		if skip != "" {
			row.Note = skip
			continue
		}
		e.progress.Linef("  %-22s running", row.Name)
		start := time.Now()
		if err := safeRun(func() error { return measureHolds(ctx, e, n, periods, row) }); err != nil {
			row.Error, _, _ = strings.Cut(err.Error(), "\n")
			e.progress.Linef("  %-22s failed: %v", row.Name, err)
			continue
		}
		e.progress.Linef("  %-22s done in %.1fs: heap/hold %s, round trips/period %s", row.Name, time.Since(start).Seconds(),
			formatValue(row.value("heap_per_hold"), unitBytes), formatValue(row.value("round_trips_per_period"), unitNum1))
	}
	return s
}

// joinInts writes sizes as "1,000 / 10,000".
func joinInts(ns []int) string {
	var ss []string
	for _, n := range ns {
		ss = append(ss, withThousands(n))
	}
	return strings.Join(ss, " / ")
}

// measureHolds is one row of the holds scenario: n holds on one client.
func measureHolds(ctx context.Context, e *env, n, periods int, row *Row) error {
	owners, err := e.slotOwners(ctx)
	if err != nil {
		return err
	}
	rc, err := newRueidis(e.redis.Addrs, nil)
	if err != nil {
		return err
	}
	defer rc.Close()
	cc := &countingClient{Client: rc, owners: owners}
	c, err := rlock.New(cc, rlock.Options{KeyPrefix: e.keyPrefix("holds", strconv.Itoa(n)), WatchdogTimeout: 3 * renewalPeriod})
	if err != nil {
		return err
	}
	defer c.Close()

	// The benchmark's own bookkeeping is allocated before the first measurement.
	mus := make([]*rlock.Mutex, n)
	hctxs := make([]context.Context, n)
	holdCtx, cancelHolds := context.WithCancel(ctx)
	defer cancelHolds()
	redis0, err := e.usedMemory(ctx)
	if err != nil {
		return err
	}
	heap0, _ := liveHeap()
	for i := range mus {
		mus[i] = c.NewMutex("h" + strconv.Itoa(i))
	}
	heapMutexes, _ := liveHeap()

	var next atomic.Int64
	stop := e.progress.Track(row.Name+" taking", func() float64 { return float64(next.Load()) / float64(n) })
	start := time.Now()
	err = parallelIndexes(64, n, &next, func(i int) error {
		// Nobody else takes these names, so Lock does not wait: holdCtx, whose end would end
		// the hold, needs no deadline.
		h, err := mus[i].Lock(holdCtx)
		hctxs[i] = h
		return err
	})
	took := time.Since(start)
	stop()
	release := func() (time.Duration, int, error) {
		var next atomic.Int64
		var failed atomic.Int64
		var first error
		var once sync.Once
		start := time.Now()
		_ = parallelIndexes(64, n, &next, func(i int) error {
			if hctxs[i] == nil {
				return nil
			}
			if err := mus[i].Unlock(hctxs[i]); err != nil {
				failed.Add(1)
				once.Do(func() { first = err })
			}
			return nil
		})
		return time.Since(start), int(failed.Load()), first
	}
	if err != nil {
		_, _, _ = release()
		return err
	}
	row.set("take_all_us", micros(float64(took)))
	heap1, _ := liveHeap()
	redis1, err := e.usedMemory(ctx)
	if err != nil {
		_, _, _ = release()
		return err
	}
	row.set("heap_per_hold", float64(heap1-heap0)/float64(n))
	row.set("heap_per_mutex", float64(heapMutexes-heap0)/float64(n))
	row.set("heap_per_hold_excl_mutex", float64(heap1-heapMutexes)/float64(n))
	row.set("redis_mem_per_lock", float64(redis1-redis0)/float64(n))

	// Count over whole renewal periods, starting half a period after a renewal.
	stop = e.progress.TrackTime(row.Name+" renewing", time.Duration(periods+2)*renewalPeriod)
	waitRenewal(ctx, cc, 3*renewalPeriod)
	sleepCtx(ctx, renewalPeriod/2)
	calls0 := cc.calls.Load()
	counts, err := countCommands(ctx, e, false, func() error {
		sleepCtx(ctx, time.Duration(periods)*renewalPeriod)
		return ctx.Err()
	})
	calls := cc.calls.Load() - calls0
	stop()
	lost := 0
	for _, h := range hctxs {
		if h != nil && errors.Is(context.Cause(h), rlock.ErrLockLost) {
			lost++
		}
	}
	relTook, failed, firstErr := release()
	if err != nil {
		return err
	}
	row.set("round_trips_per_period", float64(calls)/float64(periods))
	row.set("round_trips_per_node_period", float64(calls)/float64(periods)/float64(len(e.nodes)))
	row.set("scripts_per_period", float64(counts.Stats.scripts())/float64(periods))
	row.set("lost", float64(lost))
	row.set("release_all_us", micros(float64(relTook)))
	row.ServerCalls = counts.Stats
	row.Note = joinNotes(row.Note, notef(failed > 0, "%d releases failed, first: %v", failed, firstErr))
	return nil
}

// waitRenewal waits until the client has made calls (a renewal began) and then, with every
// call answered, made none for 50ms (it ended), or until limit has passed.
func waitRenewal(ctx context.Context, cc *countingClient, limit time.Duration) {
	deadline := time.Now().Add(limit)
	last := cc.calls.Load()
	began := false
	quietSince := time.Now()
	for time.Now().Before(deadline) && sleepCtx(ctx, 5*time.Millisecond) {
		now := cc.calls.Load()
		switch {
		case now != last || cc.inFlight.Load() > 0:
			began = true // the takes are over: any call is a renewal
			last, quietSince = now, time.Now()
		case began && time.Since(quietSince) >= 50*time.Millisecond:
			return
		}
	}
}

// waiterClientName names the connections of the waiters' client, so CLIENT LIST tells them apart.
const waiterClientName = "rlock-bench-waiters"

func runWaiters(ctx context.Context, e *env) *ScenarioResult {
	names, per := 1000, 10
	if e.quick {
		names = 100
	}
	s := &ScenarioResult{
		ID: "waiters",
		Setup: fmt.Sprintf("A holder client takes %s locks and holds them; one rlock client (PubSub mutex, defaults, "+
			"connections named %s) starts %d goroutines per name, %s in all, each calling Lock on its name. Once every "+
			"goroutine has called Lock, the channels are subscribed and the scripts have gone quiet for 300ms: client heap "+
			"per waiter (HeapAlloc after GC, minus before, over the waiters: the caller's goroutine and closure, its wait in "+
			"rlock and the shared subscriptions), goroutine stack per waiter (StackInuse delta) and goroutines per waiter "+
			"(1 is the caller's own); channels is PUBSUB CHANNELS and SHARDCHANNELS of the lock names, subscriptions the "+
			"PUBSUB NUMSUB and SHARDNUMSUB sum over them, connections the waiter client's entries in CLIENT LIST (subscribed: "+
			"with sub or ssub > 0), summed over every node (replicas included). Then every wait is "+
			"cancelled; channels left are the channels still subscribed once the calls have returned and 1s has passed.",
			withThousands(names), waiterClientName, per, withThousands(names*per)),
		Columns: []Column{
			{"heap_per_waiter", "client heap/waiter", unitBytes},
			{"stack_per_waiter", "stack/waiter", unitBytes},
			{"goroutines_per_waiter", "goroutines/waiter", unitNum},
			{"channels", "channels", unitCount},
			{"subscriptions", "subscriptions", unitCount},
			{"connections", "connections", unitCount},
			{"sub_connections", "subscribed connections", unitCount},
			{"setup_us", "all waiting after", unitMicros},
			{"cancel_all_us", "cancel all", unitMicros},
			{"channels_left", "channels left", unitCount},
		},
	}
	row := &Row{Contender: "waiters", Name: fmt.Sprintf("rlock Mutex, %s waiters on %s names",
		withThousands(names*per), withThousands(names))}
	s.Rows = append(s.Rows, row)
	if skip := e.scaleSkipped(); skip != "" {
		row.Note = skip
		return s
	}
	e.progress.Linef("  %-22s running", row.Name)
	start := time.Now()
	if err := safeRun(func() error { return measureWaiters(ctx, e, names, per, row) }); err != nil {
		row.Error, _, _ = strings.Cut(err.Error(), "\n")
		e.progress.Linef("  %-22s failed: %v", row.Name, err)
		return s
	}
	e.progress.Linef("  %-22s done in %.1fs: heap/waiter %s, channels %s", row.Name, time.Since(start).Seconds(),
		formatValue(row.value("heap_per_waiter"), unitBytes), formatValue(row.value("channels"), unitCount))
	return s
}

// measureWaiters is the waiters scenario: names locks held by one client, per waiters on each
// in another.
func measureWaiters(ctx context.Context, e *env, names, per int, row *Row) error {
	prefix := e.keyPrefix("waiters", scaleSpec)
	cfg := e.contenderConfig(prefix)
	hrc, holder, err := dialRlock(cfg)
	if err != nil {
		return err
	}
	defer hrc.Close()
	defer holder.Close()
	wrc, err := newRueidis(e.redis.Addrs, func(o *rueidis.ClientOption) { o.ClientName = waiterClientName })
	if err != nil {
		return err
	}
	defer wrc.Close()
	wc, err := rlock.New(wrc, rlock.Options{KeyPrefix: prefix})
	if err != nil {
		return err
	}
	defer wc.Close()

	holdCtx, cancelHolds := context.WithCancel(ctx)
	defer cancelHolds()
	hmus := make([]*rlock.Mutex, names)
	hctxs := make([]context.Context, names)
	var next atomic.Int64
	if err := parallelIndexes(64, names, &next, func(i int) error {
		hmus[i] = holder.NewMutex("w" + strconv.Itoa(i))
		h, err := hmus[i].Lock(holdCtx)
		hctxs[i] = h
		return err
	}); err != nil {
		return fmt.Errorf("holder: %w", err)
	}
	defer func() {
		var next atomic.Int64
		_ = parallelIndexes(64, names, &next, func(i int) error {
			if hctxs[i] != nil {
				_ = hmus[i].Unlock(hctxs[i])
			}
			return nil
		})
	}()

	waiters := names * per
	wmus := make([]*rlock.Mutex, names)
	for i := range wmus {
		wmus[i] = wc.NewMutex("w" + strconv.Itoa(i))
	}
	errs := make([]error, waiters)
	waitCtx, cancelWaits := context.WithCancel(ctx)
	defer cancelWaits()
	var wg sync.WaitGroup
	var called, acquired atomic.Int64
	heap0, stack0 := liveHeap()
	g0 := runtime.NumGoroutine()
	stats0, err := e.serverCPU(ctx)
	if err != nil {
		return err
	}

	start := time.Now()
	stop := e.progress.TrackTime(row.Name+" waiting", 5*time.Second)
	for i := range waiters {
		m := wmus[i%names]
		wg.Go(func() {
			called.Add(1)
			h, err := m.Lock(waitCtx)
			if err == nil {
				acquired.Add(1) // the holder holds every name: this must not happen
				_ = m.Unlock(h)
			}
			errs[i] = err
		})
	}
	// All waiting: every goroutine has called Lock, every name's channel is subscribed, and
	// the scripts have been quiet for 300ms.
	channelPattern := prefix + ":*"
	var lastScripts int64 = -1
	quietSince := time.Now()
	deadline := time.Now().Add(time.Minute)
	for {
		if !sleepCtx(ctx, 50*time.Millisecond) {
			stop()
			return ctx.Err()
		}
		st, err := e.serverCPU(ctx)
		if err != nil {
			stop()
			return err
		}
		scripts := st.Calls.delta(stats0.Calls).scripts()
		if scripts != lastScripts {
			lastScripts, quietSince = scripts, time.Now()
		}
		ps, err := e.pubsub(ctx, channelPattern)
		if err != nil {
			stop()
			return err
		}
		if called.Load() == int64(waiters) && ps.Channels >= names && time.Since(quietSince) >= 300*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			stop()
			return fmt.Errorf("not all waiting after a minute: %d of %d called Lock, %d channels of %d subscribed",
				called.Load(), waiters, ps.Channels, names)
		}
	}
	stop()
	row.set("setup_us", micros(float64(time.Since(start)-300*time.Millisecond)))
	heap1, stack1 := liveHeap()
	g1 := runtime.NumGoroutine()
	row.set("heap_per_waiter", float64(heap1-heap0)/float64(waiters))
	row.set("stack_per_waiter", float64(stack1-stack0)/float64(waiters))
	row.set("goroutines_per_waiter", float64(g1-g0)/float64(waiters))

	ps, err := e.pubsub(ctx, channelPattern)
	if err != nil {
		return err
	}
	row.set("channels", float64(ps.Channels))
	row.set("subscriptions", float64(ps.Subscriptions))
	list, err := e.clientList(ctx)
	if err != nil {
		return err
	}
	conns, subConns := clientConnections(list, waiterClientName)
	row.set("connections", float64(conns))
	row.set("sub_connections", float64(subConns))

	start = time.Now()
	cancelWaits()
	wg.Wait()
	row.set("cancel_all_us", micros(float64(time.Since(start))))
	sleepCtx(ctx, time.Second)
	left, err := e.pubsub(ctx, channelPattern)
	if err != nil {
		return err
	}
	row.set("channels_left", float64(left.Channels))
	var other error
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			other = cmpOr(other, err)
		}
	}
	row.Note = joinNotes(row.Note,
		notef(acquired.Load() > 0, "%d LOCKS ACQUIRED WHILE HELD", acquired.Load()),
		notef(other != nil, "a wait failed: %v", other))
	return nil
}

// clientConnections counts the CLIENT LIST entries named name, and those of them subscribed to
// a channel (sub, psub or ssub above 0).
func clientConnections(list, name string) (conns, subscribed int) {
	for line := range strings.SplitSeq(list, "\n") {
		fields := map[string]string{}
		for f := range strings.FieldsSeq(line) {
			if k, v, ok := strings.Cut(f, "="); ok {
				fields[k] = v
			}
		}
		if fields["name"] != name {
			continue
		}
		conns++
		for _, k := range []string{"sub", "psub", "ssub"} {
			if n, _ := strconv.Atoi(fields[k]); n > 0 {
				subscribed++
				break
			}
		}
	}
	return conns, subscribed
}
