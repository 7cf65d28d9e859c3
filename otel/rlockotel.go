// Package rlockotel turns what an [rlock.Client] observes into OpenTelemetry metrics and
// spans. It is a module of its own (github.com/rlock-go/rlock/otel), as rueidisotel is for
// rueidis, so that rlock itself does not depend on OpenTelemetry. Set it as the client's
// observer:
//
//	locks, err := rlock.New(rc, rlock.Options{Observer: rlockotel.New()})
//
// OpenTelemetry has no semantic conventions for locks; the names follow the style of the
// database client's connection pool metrics (db.client.connection.*), a lock wait being much
// like a wait for a pooled connection.
//
// # Metrics
//
// All instruments are created by the meter named [ScopeName]. They observe every kind of lock
// (Mutex, fair Mutex, RWMutex, fair RWMutex, Semaphore, Election) and every acquire call: Lock,
// TryLock, RLock, TryRLock, Acquire, TryAcquire, Campaign and TryCampaign are counted alike.
// An election's holds are its terms: a term won starts a hold, Resign ends it (released), a
// lease that ran out too (lost). Attributes: rlock.lock.name (the lock name; see
// [WithLockNames]), rlock.lock.kind ("mutex", "fair_mutex", "rw_mutex", "fair_rw_mutex",
// "semaphore" or "election"), and as noted below rlock.outcome and rlock.hold.end. There is
// no mode attribute on metrics: an RWMutex's read and write calls share its time series (the
// spans' rlock.op tells them apart).
//
//   - rlock.acquire.wait_time (histogram, s): how long each acquire call took, from the call
//     to its return, whatever the outcome. Attributes: name, kind, rlock.outcome = acquired |
//     timed_out (a Try form gave up) | canceled (the caller's context ended) | closed (the
//     Client was closed) | error. Buckets from 100µs to 30s.
//   - rlock.hold.time (histogram, s): how long each hold lasted in this process, from the
//     acquisition that started it to its end; re-entries of a held lock by its owner are part
//     of the same hold. Attributes: name, kind, rlock.hold.end = released (its last release) |
//     lost (lease expired or lock deleted, as far as this process learnt) | closed (Client
//     closed while held). Buckets from 100µs to 300s.
//   - rlock.held (up-down counter, {hold}): holds this process has now, one per hold record
//     (owner and lock; a Semaphore: each Acquire) however often re-entered. Attributes: name,
//     kind.
//   - rlock.waiting (up-down counter, {call}): acquire calls in progress (waiting, or making
//     their attempt). Attributes: name, kind.
//   - rlock.lost (counter, {hold}): holds that ended lost (rlock.hold.end=lost): the
//     critical section may have overlapped another holder. Attributes: name, kind.
//   - rlock.renewal.failures (counter, {renewal}): watchdog renewal scripts that failed (no
//     reply in time, or an error); each carries up to 100 holds. The watchdog retries at
//     once; a hold is lost only if its lease runs out first. No attributes.
//   - rlock.handoffs (counter, {handoff}): acquire calls that found the lock held (or queued
//     behind other waiters) and then acquired it. Attributes: name, kind.
//   - rlock.queue.length (gauge, {waiter}): only for locks given to [WatchQueues], which reads
//     their State at each collection: the waiters that hold a place in the lock's queue in
//     Redis, whoever waits. Attributes: name, kind.
//
// # Spans
//
// Every acquire call gets a span "rlock.Lock", every release call (Unlock, RUnlock, Release,
// Resign) a span "rlock.Unlock", of kind Internal, as a child of the span in the caller's context. The
// Redis commands of the call (the acquire and release scripts) run under it, so a rueidis
// client wrapped with rueidisotel puts its EVALSHA spans beneath. Attributes: rlock.lock.name,
// rlock.lock.kind, rlock.op (the call: "lock", "unlock", "rlock", "runlock", "acquire",
// "release", "campaign" or "resign"; a Try form is its plain call's op) and rlock.outcome. The status is Error, with
// the error recorded, for outcomes other than acquired, released, timed_out and canceled. The
// lock name is an attribute, not part of the span name, since names often carry ids
// (invoice:42) and span names should not.
package rlockotel

import (
	"context"
	"time"

	"github.com/rlock-go/rlock"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the meter and tracer: this module's path.
const ScopeName = "github.com/rlock-go/rlock/otel"

// Attribute keys.
const (
	LockNameKey = attribute.Key("rlock.lock.name") // the lock name (see WithLockNames)
	LockKindKey = attribute.Key("rlock.lock.kind") // rlock.LockInfo.Kind: "mutex", "fair_mutex", "rw_mutex", ...
	OutcomeKey  = attribute.Key("rlock.outcome")   // how a call ended; see rlock.Outcome
	HoldEndKey  = attribute.Key("rlock.hold.end")  // how a hold ended: released, lost, closed
	OpKey       = attribute.Key("rlock.op")        // spans: the call, rlock.Op: lock, rlock, acquire, unlock, ...
)

// Instrument names (see the package documentation).
const (
	WaitTimeName        = "rlock.acquire.wait_time" // histogram, s: acquire call durations (Lock, RLock, Acquire, Campaign, Try forms)
	HoldTimeName        = "rlock.hold.time"         // histogram, s: hold durations
	HeldName            = "rlock.held"              // up-down counter: holds now
	WaitingName         = "rlock.waiting"           // up-down counter: acquire calls in progress
	LostName            = "rlock.lost"              // counter: holds lost
	RenewalFailuresName = "rlock.renewal.failures"  // counter: failed renewal scripts
	HandoffsName        = "rlock.handoffs"          // counter: acquisitions after a wait
)

// Span names.
const (
	LockSpanName   = "rlock.Lock"   // a call that takes a hold: Lock, RLock, Acquire, Campaign or a Try form (see OpKey)
	UnlockSpanName = "rlock.Unlock" // a call that releases one: Unlock, RUnlock, Release or Resign
)

// Histogram bucket boundaries, in seconds.
var (
	waitBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
		0.25, 0.5, 1, 2.5, 5, 10, 30}
	holdBuckets = append(append([]float64(nil), waitBuckets...), 60, 120, 300)
)

// Option configures [New].
type Option func(*config)

type config struct {
	mp    metric.MeterProvider
	tp    trace.TracerProvider
	names func(string) string
}

// WithMeterProvider makes the instruments with mp instead of the global MeterProvider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithTracerProvider makes the spans with tp instead of the global TracerProvider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithLockNames maps each lock name to the value of the rlock.lock.name attribute; an empty
// result leaves the attribute out. Every distinct value is a time series of each metric, so
// map names that carry ids to their family ("invoice:42" to "invoice"). Default: the name
// itself. f must be safe for concurrent use.
func WithLockNames(f func(name string) string) Option {
	return func(c *config) { c.names = f }
}

// New returns an [rlock.Observer] that records the metrics and spans described in the package
// documentation. It creates its instruments at once; an error doing so goes to otel.Handle,
// and that instrument records nothing. The observer is safe for concurrent use and may be
// shared by several Clients.
func New(opts ...Option) rlock.Observer {
	cfg := config{}
	for _, opt := range opts {
		if opt != nil {
			opt(&cfg)
		}
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	meter := cfg.mp.Meter(ScopeName)
	o := &observer{tracer: cfg.tp.Tracer(ScopeName), names: cfg.names}
	var err error
	handle := func(e error) {
		if e != nil {
			otel.Handle(e)
		}
	}
	o.waitTime, err = meter.Float64Histogram(WaitTimeName, metric.WithUnit("s"),
		metric.WithDescription("How long acquire calls (Lock, RLock, Acquire and their Try forms) took, from the call to its return, by outcome."),
		metric.WithExplicitBucketBoundaries(waitBuckets...))
	handle(err)
	o.holdTime, err = meter.Float64Histogram(HoldTimeName, metric.WithUnit("s"),
		metric.WithDescription("How long holds lasted in this process, from acquisition to release, loss or close."),
		metric.WithExplicitBucketBoundaries(holdBuckets...))
	handle(err)
	o.held, err = meter.Int64UpDownCounter(HeldName, metric.WithUnit("{hold}"),
		metric.WithDescription("Holds this process has, one per owner and lock however often re-entered."))
	handle(err)
	o.waiting, err = meter.Int64UpDownCounter(WaitingName, metric.WithUnit("{call}"),
		metric.WithDescription("Acquire calls (Lock, RLock, Acquire and their Try forms) in progress."))
	handle(err)
	o.lost, err = meter.Int64Counter(LostName, metric.WithUnit("{hold}"),
		metric.WithDescription("Holds that ended lost: the lease expired or the lock was deleted while held."))
	handle(err)
	o.renewalFailures, err = meter.Int64Counter(RenewalFailuresName, metric.WithUnit("{renewal}"),
		metric.WithDescription("Watchdog renewal scripts (up to 100 holds each) that failed; they are retried."))
	handle(err)
	o.handoffs, err = meter.Int64Counter(HandoffsName, metric.WithUnit("{handoff}"),
		metric.WithDescription("Acquire calls that found the lock held, waited, and acquired it."))
	handle(err)
	return o
}

type observer struct {
	tracer          trace.Tracer
	names           func(string) string
	waitTime        metric.Float64Histogram
	holdTime        metric.Float64Histogram
	held            metric.Int64UpDownCounter
	waiting         metric.Int64UpDownCounter
	lost            metric.Int64Counter
	renewalFailures metric.Int64Counter
	handoffs        metric.Int64Counter
}

// attrs returns the attributes of lock, and extra.
func (o *observer) attrs(lock rlock.LockInfo, extra ...attribute.KeyValue) []attribute.KeyValue {
	name := lock.Name
	if o.names != nil {
		name = o.names(name)
	}
	kv := make([]attribute.KeyValue, 0, 2+len(extra))
	if name != "" {
		kv = append(kv, LockNameKey.String(name))
	}
	kv = append(kv, LockKindKey.String(lock.Kind))
	return append(kv, extra...)
}

// acquiring reports whether op takes a hold (Lock, RLock, Acquire, Campaign and their Try
// forms), as opposed to releasing one.
func acquiring(op rlock.Op) bool {
	return op == rlock.OpLock || op == rlock.OpRLock || op == rlock.OpAcquire || op == rlock.OpCampaign
}

// Start starts the call's span as a child of ctx's, and counts an acquire call as waiting.
func (o *observer) Start(ctx context.Context, op rlock.Op, lock rlock.LockInfo) context.Context {
	attrs := o.attrs(lock)
	name := LockSpanName
	if !acquiring(op) {
		name = UnlockSpanName
	} else {
		o.waiting.Add(ctx, 1, metric.WithAttributes(attrs...))
	}
	ctx, _ = o.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(append(attrs, OpKey.String(op.String()))...))
	return ctx
}

// End records an acquire call's wait, and ends the call's span with its outcome.
func (o *observer) End(ctx context.Context, op rlock.Op, lock rlock.LockInfo, outcome rlock.Outcome, took time.Duration, err error) {
	out := OutcomeKey.String(outcome.String())
	if acquiring(op) {
		attrs := o.attrs(lock)
		o.waiting.Add(ctx, -1, metric.WithAttributes(attrs...))
		o.waitTime.Record(ctx, took.Seconds(), metric.WithAttributes(append(attrs, out)...))
	}
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(out)
	if err != nil && outcome != rlock.OutcomeTimedOut && outcome != rlock.OutcomeCanceled {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Event records hold starts and ends, losses, renewal failures and handoffs.
func (o *observer) Event(ev rlock.Event) {
	ctx := context.Background()
	switch ev.Type {
	case rlock.EventHoldStarted:
		o.held.Add(ctx, 1, metric.WithAttributes(o.attrs(ev.Lock)...))
	case rlock.EventHoldEnded:
		attrs := o.attrs(ev.Lock)
		o.held.Add(ctx, -1, metric.WithAttributes(attrs...))
		o.holdTime.Record(ctx, ev.Held.Seconds(),
			metric.WithAttributes(append(attrs, HoldEndKey.String(ev.Outcome.String()))...))
		if ev.Outcome == rlock.OutcomeLost {
			o.lost.Add(ctx, 1, metric.WithAttributes(attrs...))
		}
	case rlock.EventRenewalFailed:
		o.renewalFailures.Add(ctx, 1)
	case rlock.EventHandoff:
		o.handoffs.Add(ctx, 1, metric.WithAttributes(o.attrs(ev.Lock)...))
	}
}
