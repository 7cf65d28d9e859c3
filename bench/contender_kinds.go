package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock"
)

// The read-heavy scenario (7) and the semaphore scenario (8) measure lock kinds that only
// rlock has among the libraries here, so they have contender lists of their own. Their specs
// are contenderSpecs with NewRW or NewSem set instead of New.

// An RWContender is one client of a read-write lock library (one process's worth of
// connections); goroutines share it.
type RWContender interface {
	// RWMutex returns a handle on the read-write lock named key for the calling goroutine;
	// two goroutines with their own handles are two owners.
	RWMutex(key string) RWMutex
	Close()
}

// An RWMutex is one goroutine's handle on one read-write lock.
type RWMutex interface {
	RLock(ctx context.Context) (Hold, error) // a shared (read) hold
	Lock(ctx context.Context) (Hold, error)  // an exclusive (write) hold
}

// A SemContender is one client of a semaphore library.
type SemContender interface {
	// Semaphore returns a handle on the semaphore named key with permits permits.
	Semaphore(key string, permits int64) Semaphore
	Close()
}

// A Semaphore is one goroutine's handle on one semaphore.
type Semaphore interface {
	// Acquire takes one permit, waiting until one is free or ctx is done.
	Acquire(ctx context.Context) (Hold, error)
}

// rwContenders are the contenders of the read-heavy scenario, in table order. The Mutex row
// has the id of the mutex contender it is ("rlock-pubsub"), so -contenders rlock-pubsub
// selects it here too.
var rwContenders = []contenderSpec{
	{
		ID: "rlock-pubsub", Name: "rlock Mutex (Lock for all)",
		Settings: "rlock NewMutex, PubSub waits, watchdog 30s: reads and writes both Lock/Unlock",
		NewRW: newRlockRW(func(c *rlock.Client, name string) RWMutex {
			return rlockMutexRW{rlockMutex{c.NewMutex(name)}}
		}),
	},
	{
		ID: "rlock-rw", Name: "rlock RWMutex",
		Settings: "rlock NewRWMutex (writer preference), PubSub waits, watchdog 30s: reads RLock/RUnlock, writes Lock/Unlock",
		NewRW: newRlockRW(func(c *rlock.Client, name string) RWMutex {
			return rlockRW{c.NewRWMutex(name)}
		}),
	},
	{
		ID: "rlock-rw-fair", Name: "rlock fair RWMutex",
		Settings: "rlock NewFairRWMutex (arrival order, reader batches), PubSub waits, watchdog 30s, FairWaitTimeout 5s",
		NewRW: newRlockRW(func(c *rlock.Client, name string) RWMutex {
			return rlockRW{c.NewFairRWMutex(name)}
		}),
	},
}

// semContenders are the contenders of the semaphore scenario.
var semContenders = []contenderSpec{
	{
		ID: "rlock-sem", Name: "rlock Semaphore",
		Settings: "rlock NewSemaphore(name, permits), PubSub waits, watchdog 30s, FairWaitTimeout 5s: Acquire(ctx, 1), Release",
		NewSem: func(cfg contenderConfig) (SemContender, error) {
			rc, c, err := dialRlock(cfg)
			if err != nil {
				return nil, err
			}
			return rlockSem{rc: rc, c: c}, nil
		},
	},
}

// kindSpecs returns the contender list of a worker mode.
func kindSpecs(mode string) []contenderSpec {
	switch mode {
	case modeReadHeavy:
		return rwContenders
	case modeSemaphore:
		return semContenders
	case modeTransfer:
		return transferContenders
	}
	return contenders
}

// specByID finds a contender of a worker mode.
func specByID(mode, id string) (contenderSpec, error) {
	for _, c := range kindSpecs(mode) {
		if c.ID == id {
			return c, nil
		}
	}
	return contenderSpec{}, fmt.Errorf("unknown contender %q (worker mode %q)", id, mode)
}

// rlockRWContender is one rlock.Client for the read-heavy scenario.
type rlockRWContender struct {
	rc    rueidis.Client
	c     *rlock.Client
	newRW func(c *rlock.Client, name string) RWMutex
}

func newRlockRW(newRW func(c *rlock.Client, name string) RWMutex) func(contenderConfig) (RWContender, error) {
	return func(cfg contenderConfig) (RWContender, error) {
		rc, c, err := dialRlock(cfg)
		if err != nil {
			return nil, err
		}
		return &rlockRWContender{rc: rc, c: c, newRW: newRW}, nil
	}
}

func (r *rlockRWContender) RWMutex(key string) RWMutex { return r.newRW(r.c, key) }

func (r *rlockRWContender) Close() {
	_ = r.c.Close()
	r.rc.Close()
}

// rlockMutexRW is a Mutex used as a read-write lock: every hold is exclusive.
type rlockMutexRW struct{ m rlockMutex }

func (m rlockMutexRW) RLock(ctx context.Context) (Hold, error) { return m.m.Lock(ctx) }
func (m rlockMutexRW) Lock(ctx context.Context) (Hold, error)  { return m.m.Lock(ctx) }

// rlockRW is an rlock.RWMutex. Like the mutex contenders, it locks with a context that
// carries no owner, so every hold has a fresh owner.
type rlockRW struct{ rw *rlock.RWMutex }

func (m rlockRW) RLock(ctx context.Context) (Hold, error) {
	hctx, err := m.rw.RLock(ctx)
	if err != nil {
		return Hold{}, err
	}
	return Hold{
		Release: func(context.Context) error { return m.rw.RUnlock(hctx) },
		Lost:    func() bool { return errors.Is(context.Cause(hctx), rlock.ErrLockLost) },
	}, nil
}

func (m rlockRW) Lock(ctx context.Context) (Hold, error) {
	hctx, err := m.rw.Lock(ctx)
	if err != nil {
		return Hold{}, err
	}
	return Hold{
		Release: func(context.Context) error { return m.rw.Unlock(hctx) },
		Lost:    func() bool { return errors.Is(context.Cause(hctx), rlock.ErrLockLost) },
	}, nil
}

// rlockSem is one rlock.Client for the semaphore scenario.
type rlockSem struct {
	rc rueidis.Client
	c  *rlock.Client
}

func (r rlockSem) Semaphore(key string, permits int64) Semaphore {
	return rlockSemaphore{r.c.NewSemaphore(key, permits)}
}

func (r rlockSem) Close() {
	_ = r.c.Close()
	r.rc.Close()
}

type rlockSemaphore struct{ s *rlock.Semaphore }

func (s rlockSemaphore) Acquire(ctx context.Context) (Hold, error) {
	hctx, err := s.s.Acquire(ctx, 1)
	if err != nil {
		return Hold{}, err
	}
	return Hold{
		Release: func(context.Context) error { return s.s.Release(hctx) },
		Lost:    func() bool { return errors.Is(context.Cause(hctx), rlock.ErrLockLost) },
	}, nil
}
