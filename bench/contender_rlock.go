package main

import (
	"context"
	"errors"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock"
)

func init() {
	const common = "rueidis defaults, watchdog 30s (default; renewal scenario: 3s)"
	contenders = append(contenders,
		contenderSpec{
			ID: "rlock-pubsub", Name: "rlock PubSub", Waits: true, Renews: true,
			Settings: common + ", WithWait(PubSub())",
			New: newRlock(func(c *rlock.Client, name string) *rlock.Mutex {
				return c.NewMutex(name, rlock.WithWait(rlock.PubSub()))
			}),
		},
		contenderSpec{
			ID: "rlock-spin10ms", Name: "rlock Spin(10ms)", Waits: true,
			Settings: common + ", WithWait(Spin(10ms))",
			New: newRlock(func(c *rlock.Client, name string) *rlock.Mutex {
				return c.NewMutex(name, rlock.WithWait(rlock.Spin(10*time.Millisecond)))
			}),
		},
		contenderSpec{
			ID: "rlock-spin100ms", Name: "rlock Spin(100ms)", Waits: true,
			Settings: common + ", WithWait(Spin(100ms))",
			New: newRlock(func(c *rlock.Client, name string) *rlock.Mutex {
				return c.NewMutex(name, rlock.WithWait(rlock.Spin(100*time.Millisecond)))
			}),
		},
		contenderSpec{
			// Every other row's Lock has a deadline (the run's per-operation timeout), so its
			// Redis calls are flights, on goroutines of the client, that keep the call's bound
			// when Redis does not answer; this row's Lock has none, so it makes its calls itself.
			// The two rows side by side give what the bound costs an uncontended lock.
			ID: "rlock-nodeadline", Name: "rlock Lock, no deadline", Waits: true, Renews: true,
			Only:     []string{"uncontended"},
			Settings: common + ", Lock(ctx) with a ctx that has no deadline or cancellation (no flights)",
			New: func(cfg contenderConfig) (Contender, error) {
				c, err := newRlock(func(c *rlock.Client, name string) *rlock.Mutex { return c.NewMutex(name) })(cfg)
				if err != nil {
					return nil, err
				}
				return noDeadline{c}, nil
			},
		},
		contenderSpec{
			ID: "rlock-fair", Name: "rlock fair", Waits: true, Renews: true,
			Settings: common + ", NewFairMutex, PubSub() waits (default), FairWaitTimeout 5s (default)",
			New:      newRlock(func(c *rlock.Client, name string) *rlock.Mutex { return c.NewFairMutex(name) }),
		},
	)
}

// rlockContender is one rlock.Client on its own rueidis client.
type rlockContender struct {
	rc     rueidis.Client
	c      *rlock.Client
	newMut func(c *rlock.Client, name string) *rlock.Mutex
}

func newRlock(newMut func(c *rlock.Client, name string) *rlock.Mutex) func(contenderConfig) (Contender, error) {
	return func(cfg contenderConfig) (Contender, error) {
		rc, c, err := dialRlock(cfg)
		if err != nil {
			return nil, err
		}
		return &rlockContender{rc: rc, c: c, newMut: newMut}, nil
	}
}

// dialRlock connects a rueidis client with default options and an rlock.Client on it.
func dialRlock(cfg contenderConfig) (rueidis.Client, *rlock.Client, error) {
	rc, err := newRueidis(cfg.Addrs, nil)
	if err != nil {
		return nil, nil, err
	}
	opts := rlock.Options{KeyPrefix: cfg.KeyPrefix}
	if cfg.Renewal > 0 {
		opts.WatchdogTimeout = 3 * cfg.Renewal // renewed every third of it
	}
	c, err := rlock.New(rc, opts)
	if err != nil {
		rc.Close()
		return nil, nil, err
	}
	return rc, c, nil
}

func (r *rlockContender) Close() {
	_ = r.c.Close()
	r.rc.Close()
}

func (r *rlockContender) Mutex(key string) Mutex {
	return rlockMutex{m: r.newMut(r.c, key)}
}

type rlockMutex struct{ m *rlock.Mutex }

func (m rlockMutex) Lock(ctx context.Context) (Hold, error) {
	// ctx carries no owner, so Lock makes a fresh one per call (the library's plain usage):
	// each goroutine excludes its siblings.
	hctx, err := m.m.Lock(ctx)
	if err != nil {
		return Hold{}, err
	}
	return Hold{
		Release: func(context.Context) error { return m.m.Unlock(hctx) },
		Lost:    func() bool { return errors.Is(context.Cause(hctx), rlock.ErrLockLost) },
	}, nil
}

// noDeadline is a contender whose Lock calls run without their context's deadline and
// cancellation (see the rlock-nodeadline row).
type noDeadline struct{ Contender }

func (n noDeadline) Mutex(key string) Mutex { return noDeadlineMutex{n.Contender.Mutex(key)} }

type noDeadlineMutex struct{ m Mutex }

func (m noDeadlineMutex) Lock(ctx context.Context) (Hold, error) {
	return m.m.Lock(context.WithoutCancel(ctx))
}
