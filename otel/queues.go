package rlockotel

import (
	"context"

	"github.com/rlock-go/rlock"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
)

// QueueLengthName is the gauge that [WatchQueues] registers.
const QueueLengthName = "rlock.queue.length" // gauge, {waiter}: waiters of watched locks

// Watched is a lock whose queue [WatchQueues] can read: an *rlock.Mutex, *rlock.RWMutex or
// *rlock.Semaphore.
type Watched interface {
	Name() string
	State(ctx context.Context) (rlock.State, error)
}

// WatchQueues registers the gauge rlock.queue.length ({waiter}) for locks: at each collection
// it reads each lock's State (one read-only round trip per lock, bounded by the collection's
// context, on the lock's own Client) and records how many waiters hold a place in it, with the
// attributes rlock.lock.name (mapped as [WithLockNames] says) and rlock.lock.kind. What waits
// there: the queue of a fair Mutex, a fair RWMutex or a Semaphore, and the writers that hold
// new readers back on a plain RWMutex; a plain Mutex has no queue and always records 0.
// Unlike the observer's rlock.waiting, which counts this process's calls, this is the queue in
// Redis, whoever waits. A lock whose State fails (its Client closed, Redis unreachable) records
// nothing at that collection, and the error goes to otel.Handle. Options other than
// WithMeterProvider and WithLockNames are ignored. Unregister the returned registration before
// closing the locks' Client; an error creating the gauge or registering its callback is
// returned, and nothing is registered then.
func WatchQueues(locks []Watched, opts ...Option) (metric.Registration, error) {
	cfg := config{}
	for _, opt := range opts {
		if opt != nil {
			opt(&cfg)
		}
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	o := &observer{names: cfg.names}
	gauge, err := cfg.mp.Meter(ScopeName).Int64ObservableGauge(QueueLengthName, metric.WithUnit("{waiter}"),
		metric.WithDescription("Waiters that hold a place in the queue of each watched lock, as Redis has it."))
	if err != nil {
		return nil, err
	}
	watched := append([]Watched(nil), locks...)
	return cfg.mp.Meter(ScopeName).RegisterCallback(func(ctx context.Context, ob metric.Observer) error {
		for _, l := range watched {
			st, err := l.State(ctx)
			if err != nil {
				otel.Handle(err)
				continue
			}
			ob.ObserveInt64(gauge, int64(len(st.Waiters)),
				metric.WithAttributes(o.attrs(rlock.LockInfo{Name: st.Name, Kind: st.Kind})...))
		}
		return nil
	}, gauge)
}
