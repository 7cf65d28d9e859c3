package rlockotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	rlockotel "github.com/rlock-go/rlock/otel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// gauge returns the value of gauge name at attrs, and whether it has one.
func (c collected) gauge(name string, attrs attribute.Set) (int64, bool) {
	g, ok := c[name].Data.(metricdata.Gauge[int64])
	if !ok {
		return 0, false
	}
	for _, p := range g.DataPoints {
		if p.Attributes.Equals(&attrs) {
			return p.Value, true
		}
	}
	return 0, false
}

// TestWatchQueues: the gauge records the waiters in Redis of each watched lock (a fair mutex's
// queue, a plain RWMutex's waiting writer, a semaphore's queue; 0 for a plain mutex and a free
// lock), whoever waits, at each collection; after Unregister it records nothing.
func TestWatchQueues(t *testing.T) {
	h := newHarness(t)
	c := h.client(rlock.Options{})
	fair, plain := c.NewFairMutex("fair"), c.NewMutex("plain")
	rw, sem := c.NewRWMutex("rw"), c.NewSemaphore("sem", 1)
	free := c.NewFairMutex("free")
	reg, err := rlockotel.WatchQueues([]rlockotel.Watched{fair, plain, rw, sem, free}, rlockotel.WithMeterProvider(h.mp))
	require.NoError(t, err)

	var stops []func()
	wait := func(take func(context.Context) (context.Context, error)) {
		ctx, cancel := context.WithCancel(bg)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = take(ctx)
		}()
		stops = append(stops, func() { cancel(); <-done })
	}
	f, err := fair.Lock(bg)
	require.NoError(t, err)
	p, err := plain.Lock(bg)
	require.NoError(t, err)
	r, err := rw.RLock(bg)
	require.NoError(t, err)
	s, err := sem.Acquire(bg, 1)
	require.NoError(t, err)
	wait(fair.Lock)
	wait(fair.Lock)
	wait(plain.Lock)
	wait(rw.Lock)
	wait(func(ctx context.Context) (context.Context, error) { return sem.Acquire(ctx, 1) })

	want := map[string]int64{"fair": 2, "plain": 0, "rw": 1, "sem": 1, "free": 0}
	kinds := map[string]string{"fair": rlock.KindFairMutex, "plain": rlock.KindMutex, "rw": rlock.KindRWMutex,
		"sem": rlock.KindSemaphore, "free": rlock.KindFairMutex}
	require.Eventually(t, func() bool {
		got := h.collect()
		for name, n := range want {
			if v, ok := got.gauge(rlockotel.QueueLengthName, lockAttrs(name, kinds[name])); !ok || v != n {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "%v", h.collect()[rlockotel.QueueLengthName])

	for _, stop := range stops {
		stop()
	}
	v, ok := h.collect().gauge(rlockotel.QueueLengthName, lockAttrs("fair", rlock.KindFairMutex))
	assert.True(t, ok)
	assert.Zero(t, v, "the waiters left")
	require.NoError(t, reg.Unregister())
	_, ok = h.collect().gauge(rlockotel.QueueLengthName, lockAttrs("fair", rlock.KindFairMutex))
	assert.False(t, ok, "recorded after Unregister")
	require.NoError(t, fair.Unlock(f))
	require.NoError(t, plain.Unlock(p))
	require.NoError(t, rw.RUnlock(r))
	require.NoError(t, sem.Release(s))
}
