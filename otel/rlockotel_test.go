package rlockotel_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidisotel"
	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/internal/wire"
	rlockotel "github.com/rlock-go/rlock/otel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

var bg = context.Background()

// TestMain runs the tests on REDIS_ADDR, or on a throwaway redis-server it starts (see
// redistest.Main); go test -short runs only those that need no Redis.
func TestMain(m *testing.M) { redistest.Main(m, nil) }

// redisAddr returns the server the tests run on; it skips t under -short.
func redisAddr(t *testing.T) string {
	redistest.NeedsRedis(t)
	return redistest.RedisAddr()
}

// throwaway reports whether tests may block the whole server (DEBUG SLEEP): the repository's
// scripts/with-redis.sh says so for the servers it starts, and so does redistest.Main.
func throwaway() bool { return os.Getenv(redistest.ThrowawayEnv) == "1" }

// harness is an observer recording into an SDK MeterProvider with a manual reader and an SDK
// TracerProvider with a span recorder, and rlock clients on rueidis clients that rueidisotel
// traces into the same TracerProvider.
type harness struct {
	t      *testing.T
	addr   string
	prefix string
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	obs    rlock.Observer
	mp     *sdkmetric.MeterProvider
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, addr: redisAddr(t), reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	h.prefix = redistest.NewPrefix("rlotel")
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	h.mp = mp
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	t.Cleanup(func() {
		_ = mp.Shutdown(bg)
		_ = h.tp.Shutdown(bg)
	})
	h.obs = rlockotel.New(rlockotel.WithMeterProvider(mp), rlockotel.WithTracerProvider(h.tp))
	return h
}

// client returns an observed rlock client on a rueidisotel-traced rueidis client.
func (h *harness) client(opts rlock.Options) *rlock.Client {
	rc, err := rueidisotel.NewClient(rueidis.ClientOption{InitAddress: []string{h.addr}, DisableCache: true},
		rueidisotel.WithTracerProvider(h.tp), rueidisotel.WithMeterProvider(noop.NewMeterProvider()))
	require.NoError(h.t, err)
	h.t.Cleanup(rc.Close)
	opts.KeyPrefix, opts.Observer = h.prefix, h.obs
	c, err := rlock.New(rc, opts)
	require.NoError(h.t, err)
	h.t.Cleanup(func() { _ = c.Close() })
	return c
}

// collected is one collection, by instrument name.
type collected map[string]metricdata.Metrics

func (h *harness) collect() collected {
	var rm metricdata.ResourceMetrics
	require.NoError(h.t, h.reader.Collect(bg, &rm))
	out := collected{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != rlockotel.ScopeName {
			continue
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// lockAttrs is the attribute set of a lock, and extra.
func lockAttrs(name, kind string, extra ...attribute.KeyValue) attribute.Set {
	return attribute.NewSet(append([]attribute.KeyValue{rlockotel.LockNameKey.String(name), rlockotel.LockKindKey.String(kind)}, extra...)...)
}

// sum returns the value of counter or up-down counter name at attrs, and whether it has one.
func (c collected) sum(name string, attrs attribute.Set) (int64, bool) {
	s, ok := c[name].Data.(metricdata.Sum[int64])
	if !ok {
		return 0, false
	}
	for _, p := range s.DataPoints {
		if p.Attributes.Equals(&attrs) {
			return p.Value, true
		}
	}
	return 0, false
}

// hist returns the data point of histogram name at attrs (zero if none).
func (c collected) hist(name string, attrs attribute.Set) metricdata.HistogramDataPoint[float64] {
	h, _ := c[name].Data.(metricdata.Histogram[float64])
	for _, p := range h.DataPoints {
		if p.Attributes.Equals(&attrs) {
			return p
		}
	}
	return metricdata.HistogramDataPoint[float64]{}
}

// lines renders every data point: instrument, kind, attributes, value.
func (c collected) lines() []string {
	var out []string
	attrs := func(s attribute.Set) string {
		var kv []string
		for _, a := range s.ToSlice() {
			kv = append(kv, string(a.Key)+"="+a.Value.Emit())
		}
		return "{" + strings.Join(kv, ", ") + "}"
	}
	for name, m := range c {
		switch d := m.Data.(type) {
		case metricdata.Histogram[float64]:
			for _, p := range d.DataPoints {
				mn, _ := p.Min.Value()
				mx, _ := p.Max.Value()
				out = append(out, fmt.Sprintf("%s (histogram, %s) %s count=%d sum=%.4f min=%.4f max=%.4f",
					name, m.Unit, attrs(p.Attributes), p.Count, p.Sum, mn, mx))
			}
		case metricdata.Sum[int64]:
			kind := "up-down counter"
			if d.IsMonotonic {
				kind = "counter"
			}
			for _, p := range d.DataPoints {
				out = append(out, fmt.Sprintf("%s (%s, %s) %s %d", name, kind, m.Unit, attrs(p.Attributes), p.Value))
			}
		}
	}
	slices.Sort(out)
	return out
}

// span finds the one ended span named name with lock name lock and outcome outcome.
func (h *harness) span(name, lock, outcome string) sdktrace.ReadOnlySpan {
	h.t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range h.spans.Ended() {
		if s.Name() != name {
			continue
		}
		var l, o string
		for _, a := range s.Attributes() {
			switch a.Key {
			case rlockotel.LockNameKey:
				l = a.Value.AsString()
			case rlockotel.OutcomeKey:
				o = a.Value.AsString()
			}
		}
		if l == lock && o == outcome {
			found = append(found, s)
		}
	}
	require.NotEmpty(h.t, found, "span %s %s %s", name, lock, outcome)
	return found[0]
}

// children returns the names of the ended spans whose parent is s.
func (h *harness) children(s sdktrace.ReadOnlySpan) []string {
	var names []string
	for _, c := range h.spans.Ended() {
		if c.Parent().SpanID() == s.SpanContext().SpanID() {
			names = append(names, c.Name())
		}
	}
	return names
}

// TestObserver runs a scenario against a real Redis (acquire and re-entry, a contended wait
// that ends in a handoff, a TryLock that times out, a fair mutex, a hold lost to a
// ForceUnlock by another client, and if the server may be blocked a renewal failure) and
// checks every instrument and the spans. Run with -v to see the exported data points.
func TestObserver(t *testing.T) {
	h := newHarness(t)
	a := h.client(rlock.Options{WatchdogTimeout: 300 * time.Millisecond}) // renewals every 100ms
	b := h.client(rlock.Options{})
	ctx, request := h.tp.Tracer("app").Start(bg, "request")

	// Acquire, re-enter, release.
	orders := a.NewMutex("orders")
	held, err := orders.Lock(ctx)
	require.NoError(t, err)
	inner, err := orders.Lock(held)
	require.NoError(t, err)
	require.NoError(t, orders.Unlock(inner))
	require.NoError(t, orders.Unlock(held))

	// A contended wait that ends in a handoff, and a TryLock that times out meanwhile.
	busy := a.NewMutex("busy")
	hb, err := busy.Lock(ctx)
	require.NoError(t, err)
	_, err = b.NewMutex("busy").TryLock(ctx, 20*time.Millisecond)
	require.ErrorIs(t, err, rlock.ErrNotObtained)
	got := make(chan context.Context, 1)
	go func() {
		hw, err := b.NewMutex("busy").Lock(ctx)
		assert.NoError(t, err)
		got <- hw
	}()
	busyAttrs := lockAttrs("busy", rlock.KindMutex)
	var mid collected
	require.Eventually(t, func() bool {
		mid = h.collect()
		n, _ := mid.sum(rlockotel.WaitingName, busyAttrs)
		return n == 1
	}, 3*time.Second, 5*time.Millisecond, "the waiter is counted as waiting")
	n, _ := mid.sum(rlockotel.HeldName, busyAttrs)
	assert.EqualValues(t, 1, n, "the holder is counted as held")
	time.Sleep(30 * time.Millisecond)
	require.NoError(t, busy.Unlock(hb))
	hw := <-got
	require.NoError(t, b.NewMutex("busy").Unlock(hw))

	// A fair mutex.
	queue := a.NewFairMutex("queue")
	hq, err := queue.Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, queue.Unlock(hq))

	// A read-write mutex and a semaphore: their calls count as waiting, then not.
	docs := a.NewRWMutex("docs")
	hr, err := docs.RLock(ctx)
	require.NoError(t, err)
	require.NoError(t, docs.RUnlock(hr))
	permits := a.NewSemaphore("permits", 2)
	hs, err := permits.Acquire(ctx, 2)
	require.NoError(t, err)
	require.NoError(t, permits.Release(hs))

	// A hold lost: another client deletes the lock, the holder's watchdog finds out.
	contested := a.NewMutex("contested")
	hc, err := contested.Lock(ctx)
	require.NoError(t, err)
	_, err = b.NewMutex("contested").ForceUnlock(ctx)
	require.NoError(t, err)
	select {
	case <-hc.Done():
	case <-time.After(3 * time.Second):
		t.Fatal("the loss was not noticed")
	}
	require.ErrorIs(t, contested.Unlock(hc), rlock.ErrLockLost)

	// A renewal failure: the server refuses writes for a moment (min-replicas-to-write with no
	// replica: NOREPLICAS), not for the lease.
	if throwaway() {
		c := h.client(rlock.Options{WatchdogTimeout: 1500 * time.Millisecond}) // renewals every 500ms
		renewed := c.NewMutex("renewed")
		hr, err := renewed.Lock(ctx)
		require.NoError(t, err)
		admin, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{h.addr}, DisableCache: true})
		require.NoError(t, err)
		defer admin.Close()
		config := func(n string) {
			require.NoError(t, admin.Do(bg, admin.B().ConfigSet().ParameterValue().ParameterValue("min-replicas-to-write", n).Build()).Error())
		}
		config("1")
		require.Eventually(t, func() bool {
			n, _ := h.collect().sum(rlockotel.RenewalFailuresName, attribute.NewSet())
			return n > 0
		}, time.Second, 5*time.Millisecond)
		config("0")
		time.Sleep(time.Second) // past the lease the failed renewal would have extended
		require.NoError(t, hr.Err(), "the hold survives")
		require.NoError(t, renewed.Unlock(hr))
	} else {
		t.Log("renewal failure not caused: RLOCK_TEST_THROWAWAY=1 is not set, so the server may not be blocked")
	}
	request.End()

	final := h.collect()
	t.Logf("while a waiter waited:\n\t%s", strings.Join(mid.lines(), "\n\t"))
	t.Logf("at the end:\n\t%s", strings.Join(final.lines(), "\n\t"))

	// rlock.acquire.wait_time
	outcome := func(o rlock.Outcome) attribute.KeyValue { return rlockotel.OutcomeKey.String(o.String()) }
	for _, c := range []struct {
		lock, kind string
		outcome    rlock.Outcome
		count      uint64
		atLeast    time.Duration
	}{
		{"orders", rlock.KindMutex, rlock.OutcomeAcquired, 2, 0},
		{"busy", rlock.KindMutex, rlock.OutcomeAcquired, 2, 30 * time.Millisecond},
		{"busy", rlock.KindMutex, rlock.OutcomeTimedOut, 1, 20 * time.Millisecond},
		{"queue", rlock.KindFairMutex, rlock.OutcomeAcquired, 1, 0},
		{"docs", rlock.KindRWMutex, rlock.OutcomeAcquired, 1, 0},
		{"permits", rlock.KindSemaphore, rlock.OutcomeAcquired, 1, 0},
		{"contested", rlock.KindMutex, rlock.OutcomeAcquired, 1, 0},
	} {
		p := final.hist(rlockotel.WaitTimeName, lockAttrs(c.lock, c.kind, outcome(c.outcome)))
		assert.Equal(t, c.count, p.Count, "%s %v", c.lock, c.outcome)
		assert.GreaterOrEqual(t, p.Sum, c.atLeast.Seconds(), "%s %v", c.lock, c.outcome)
		assert.Less(t, p.Sum, 5.0)
	}
	assert.Equal(t, "s", final[rlockotel.WaitTimeName].Unit)
	// rlock.hold.time
	end := func(o string) attribute.KeyValue { return rlockotel.HoldEndKey.String(o) }
	for _, c := range []struct {
		lock, kind, end string
		count           uint64
	}{
		{"orders", rlock.KindMutex, "released", 1},
		{"busy", rlock.KindMutex, "released", 2},
		{"queue", rlock.KindFairMutex, "released", 1},
		{"docs", rlock.KindRWMutex, "released", 1},
		{"permits", rlock.KindSemaphore, "released", 1},
		{"contested", rlock.KindMutex, "lost", 1},
	} {
		p := final.hist(rlockotel.HoldTimeName, lockAttrs(c.lock, c.kind, end(c.end)))
		assert.Equal(t, c.count, p.Count, "%s %s", c.lock, c.end)
		assert.Positive(t, p.Sum)
	}
	p := final.hist(rlockotel.HoldTimeName, lockAttrs("busy", rlock.KindMutex, end("released")))
	mx, _ := p.Max.Value()
	assert.GreaterOrEqual(t, mx, 0.03, "the first busy hold lasted through the waiter's wait")
	// rlock.held and rlock.waiting: back to zero.
	for _, lock := range []attribute.Set{lockAttrs("orders", rlock.KindMutex), busyAttrs,
		lockAttrs("queue", rlock.KindFairMutex), lockAttrs("contested", rlock.KindMutex),
		lockAttrs("docs", rlock.KindRWMutex), lockAttrs("permits", rlock.KindSemaphore)} {
		n, ok := final.sum(rlockotel.HeldName, lock)
		assert.True(t, ok)
		assert.Zero(t, n)
		n, ok = final.sum(rlockotel.WaitingName, lock)
		assert.True(t, ok)
		assert.Zero(t, n)
	}
	// rlock.lost and rlock.handoffs: one each, on the expected lock only.
	assert.Len(t, final[rlockotel.LostName].Data.(metricdata.Sum[int64]).DataPoints, 1)
	n, _ = final.sum(rlockotel.LostName, lockAttrs("contested", rlock.KindMutex))
	assert.EqualValues(t, 1, n)
	assert.Len(t, final[rlockotel.HandoffsName].Data.(metricdata.Sum[int64]).DataPoints, 1)
	n, _ = final.sum(rlockotel.HandoffsName, busyAttrs)
	assert.EqualValues(t, 1, n)
	// rlock.renewal.failures
	if throwaway() {
		n, _ = final.sum(rlockotel.RenewalFailuresName, attribute.NewSet())
		assert.Positive(t, n)
	}

	// Spans: Lock and Unlock under the caller's span, rueidisotel's script spans under them.
	for _, s := range []sdktrace.ReadOnlySpan{
		h.span(rlockotel.LockSpanName, "orders", "acquired"),
		h.span(rlockotel.UnlockSpanName, "orders", "released"),
		h.span(rlockotel.LockSpanName, "queue", "acquired"),
	} {
		assert.Equal(t, request.SpanContext().SpanID(), s.Parent().SpanID(), s.Name())
		assert.Equal(t, trace.SpanKindInternal, s.SpanKind())
		assert.Equal(t, codes.Unset, s.Status().Code)
		children := h.children(s)
		assert.NotEmpty(t, children, "%s has the script's spans beneath", s.Name())
		for _, c := range children {
			assert.True(t, strings.HasPrefix(c, "EVAL"), "%s: child %s", s.Name(), c)
		}
	}
	timedOut := h.span(rlockotel.LockSpanName, "busy", "timed_out")
	assert.Equal(t, codes.Unset, timedOut.Status().Code, "giving up is not an error")
	lost := h.span(rlockotel.UnlockSpanName, "contested", "lost")
	assert.Equal(t, codes.Error, lost.Status().Code)
	assert.Contains(t, lost.Status().Description, "lock lost")
	require.NotEmpty(t, lost.Events())
	assert.Equal(t, "exception", lost.Events()[0].Name)
}

// TestWithLockNames checks the name mapping, and that an empty name leaves the attribute out,
// by calling the observer directly (no Redis).
func TestWithLockNames(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	obs := rlockotel.New(rlockotel.WithMeterProvider(mp), rlockotel.WithTracerProvider(tp),
		rlockotel.WithLockNames(func(name string) string {
			family, _, _ := strings.Cut(name, ":")
			if family == "secret" {
				return ""
			}
			return family
		}))
	for _, name := range []string{"invoice:1", "invoice:2", "secret:3"} {
		lock := rlock.LockInfo{Name: name, Kind: rlock.KindMutex}
		ctx := obs.Start(bg, rlock.OpLock, lock)
		obs.Event(rlock.Event{Type: rlock.EventHoldStarted, Lock: lock})
		obs.End(ctx, rlock.OpLock, lock, rlock.OutcomeAcquired, time.Millisecond, nil)
	}
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(bg, &rm))
	var held metricdata.Sum[int64]
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name == rlockotel.HeldName {
			held = m.Data.(metricdata.Sum[int64])
		}
	}
	got := map[string]int64{}
	for _, p := range held.DataPoints {
		v, _ := p.Attributes.Value(rlockotel.LockNameKey)
		got[v.Emit()] = p.Value
	}
	assert.Equal(t, map[string]int64{"invoice": 2, "": 1}, got)
	require.Len(t, spans.Ended(), 3)
	assert.Equal(t, "rlock.Lock", spans.Ended()[0].Name())
}

// TestObserver_election: an election's terms are its holds. A term won and resigned, a
// TryCampaign that gives up meanwhile, and a term lost (its key deleted behind its back) give
// the acquire waits, held counts, hold times, the lost count and the spans of the other kinds.
func TestObserver_election(t *testing.T) {
	h := newHarness(t)
	a := h.client(rlock.Options{WatchdogTimeout: 300 * time.Millisecond})
	b := h.client(rlock.Options{})
	ctx, request := h.tp.Tracer("app").Start(bg, "request")
	el := a.NewElection("sched")
	term, err := el.Campaign(ctx, "a")
	require.NoError(t, err)
	_, err = b.NewElection("sched").TryCampaign(ctx, "b", 20*time.Millisecond)
	require.ErrorIs(t, err, rlock.ErrNotObtained)
	attrs := lockAttrs("sched", rlock.KindElection)
	n, _ := h.collect().sum(rlockotel.HeldName, attrs)
	assert.EqualValues(t, 1, n, "the term is counted as held")
	require.NoError(t, el.Resign(term))

	term, err = el.Campaign(ctx, "a")
	require.NoError(t, err)
	admin, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{h.addr}, DisableCache: true})
	require.NoError(t, err)
	defer admin.Close()
	require.NoError(t, admin.Do(bg, admin.B().Del().Key(wire.LockKey(h.prefix, "sched")).Build()).Error())
	select {
	case <-term.Done():
	case <-time.After(3 * time.Second):
		t.Fatal("the lost term was not noticed")
	}
	require.ErrorIs(t, el.Resign(term), rlock.ErrLockLost)
	require.NoError(t, admin.Do(bg, admin.B().Del().Key(wire.LockKey(h.prefix, "sched")+":fence").Build()).Error())
	request.End()

	outcome := func(o rlock.Outcome) attribute.KeyValue { return rlockotel.OutcomeKey.String(o.String()) }
	end := func(e string) attribute.KeyValue { return rlockotel.HoldEndKey.String(e) }
	// The lost term's end is reported by whoever finds the loss (a renewal, the reaper or the
	// Resign): on a loaded machine that may come after Resign returned.
	var final collected
	require.Eventually(t, func() bool {
		final = h.collect()
		return final.hist(rlockotel.HoldTimeName, lockAttrs("sched", rlock.KindElection, end("lost"))).Count == 1
	}, 3*time.Second, 10*time.Millisecond, "the lost term's end was not reported: %s", strings.Join(h.collect().lines(), "; "))
	t.Logf("at the end:\n\t%s", strings.Join(final.lines(), "\n\t"))
	assert.EqualValues(t, 2, final.hist(rlockotel.WaitTimeName, lockAttrs("sched", rlock.KindElection, outcome(rlock.OutcomeAcquired))).Count, "terms won")
	assert.EqualValues(t, 1, final.hist(rlockotel.WaitTimeName, lockAttrs("sched", rlock.KindElection, outcome(rlock.OutcomeTimedOut))).Count)
	assert.EqualValues(t, 1, final.hist(rlockotel.HoldTimeName, lockAttrs("sched", rlock.KindElection, end("released"))).Count, "terms resigned")
	assert.EqualValues(t, 1, final.hist(rlockotel.HoldTimeName, lockAttrs("sched", rlock.KindElection, end("lost"))).Count, "terms lost")
	n, _ = final.sum(rlockotel.LostName, attrs)
	assert.EqualValues(t, 1, n)
	n, _ = final.sum(rlockotel.HeldName, attrs)
	assert.EqualValues(t, 0, n)
	n, _ = final.sum(rlockotel.WaitingName, attrs)
	assert.EqualValues(t, 0, n)

	for _, s := range []sdktrace.ReadOnlySpan{
		h.span(rlockotel.LockSpanName, "sched", "acquired"),
		h.span(rlockotel.UnlockSpanName, "sched", "released"),
	} {
		assert.Equal(t, request.SpanContext().SpanID(), s.Parent().SpanID(), s.Name())
		assert.NotEmpty(t, h.children(s), "%s has the script's spans beneath", s.Name())
		var op string
		for _, kv := range s.Attributes() {
			if kv.Key == rlockotel.OpKey {
				op = kv.Value.AsString()
			}
		}
		assert.Contains(t, []string{"campaign", "resign"}, op)
	}
	assert.Equal(t, codes.Unset, h.span(rlockotel.LockSpanName, "sched", "timed_out").Status().Code)
	assert.Equal(t, codes.Error, h.span(rlockotel.UnlockSpanName, "sched", "lost").Status().Code)
}
