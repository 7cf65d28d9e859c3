package main

import (
	"context"

	"github.com/rlock-go/rlock"
)

// The other kinds as mutexes: rows of scenarios 1 (uncontended), 3 (contended) and 4
// (ping-pong), so that every kind's cost per lock+unlock is measured against the baseline
// pair, and its cost per acquisition against the floor, in the same run as the Mutex (issues
// 17 and 28). A read hold excludes nothing, so the read rows run only uncontended; the
// semaphore has 1 permit, so it excludes like a mutex.
func init() {
	const common = "rueidis defaults, watchdog 30s, PubSub waits"
	onlyUncontended := []string{"uncontended"}
	exclusive := []string{"uncontended", "contended", "pingpong"}
	contenders = append(contenders,
		contenderSpec{
			ID: "rlock-rw-write", Name: "rlock RWMutex (write)", Waits: true, Renews: true, Only: exclusive,
			Settings: common + ", NewRWMutex (writer preference): Lock/Unlock",
			New: newRlockKind(func(c *rlock.Client, name string) Mutex {
				return rwWriteMutex{rlockRW{c.NewRWMutex(name)}}
			}),
		},
		contenderSpec{
			ID: "rlock-rw-read", Name: "rlock RWMutex (read)", Waits: true, Renews: true, Only: onlyUncontended,
			Settings: common + ", NewRWMutex (writer preference): RLock/RUnlock",
			New: newRlockKind(func(c *rlock.Client, name string) Mutex {
				return rwReadMutex{rlockRW{c.NewRWMutex(name)}}
			}),
		},
		contenderSpec{
			ID: "rlock-rw-fair-write", Name: "rlock fair RWMutex (write)", Waits: true, Renews: true, Only: exclusive,
			Settings: common + ", NewFairRWMutex, FairWaitTimeout 5s: Lock/Unlock",
			New: newRlockKind(func(c *rlock.Client, name string) Mutex {
				return rwWriteMutex{rlockRW{c.NewFairRWMutex(name)}}
			}),
		},
		contenderSpec{
			ID: "rlock-rw-fair-read", Name: "rlock fair RWMutex (read)", Waits: true, Renews: true, Only: onlyUncontended,
			Settings: common + ", NewFairRWMutex, FairWaitTimeout 5s: RLock/RUnlock",
			New: newRlockKind(func(c *rlock.Client, name string) Mutex {
				return rwReadMutex{rlockRW{c.NewFairRWMutex(name)}}
			}),
		},
		contenderSpec{
			ID: "rlock-sem-1", Name: "rlock Semaphore (1 permit)", Waits: true, Renews: true, Only: exclusive,
			Settings: common + ", NewSemaphore(name, 1), FairWaitTimeout 5s: Acquire(ctx, 1)/Release",
			New: newRlockKind(func(c *rlock.Client, name string) Mutex {
				return semMutex{rlockSemaphore{c.NewSemaphore(name, 1)}}
			}),
		},
	)
}

// isKindRow reports whether id is one of the kinds run as a mutex here.
func isKindRow(id string) bool {
	switch id {
	case "rlock-rw-write", "rlock-rw-read", "rlock-rw-fair-write", "rlock-rw-fair-read", "rlock-sem-1":
		return true
	}
	return false
}

// rlockKindContender is one rlock.Client whose handles are another kind used as a mutex.
type rlockKindContender struct {
	rlockRWContender // the clients; its newRW is unused
	newMutex         func(c *rlock.Client, name string) Mutex
}

func newRlockKind(newMutex func(c *rlock.Client, name string) Mutex) func(contenderConfig) (Contender, error) {
	return func(cfg contenderConfig) (Contender, error) {
		rc, c, err := dialRlock(cfg)
		if err != nil {
			return nil, err
		}
		return &rlockKindContender{rlockRWContender: rlockRWContender{rc: rc, c: c}, newMutex: newMutex}, nil
	}
}

func (r *rlockKindContender) Mutex(key string) Mutex { return r.newMutex(r.c, key) }

// rwWriteMutex takes a read-write lock's write hold.
type rwWriteMutex struct{ rw rlockRW }

func (m rwWriteMutex) Lock(ctx context.Context) (Hold, error) { return m.rw.Lock(ctx) }

// rwReadMutex takes a read-write lock's read hold.
type rwReadMutex struct{ rw rlockRW }

func (m rwReadMutex) Lock(ctx context.Context) (Hold, error) { return m.rw.RLock(ctx) }

// semMutex takes one permit of a semaphore.
type semMutex struct{ s rlockSemaphore }

func (m semMutex) Lock(ctx context.Context) (Hold, error) { return m.s.Acquire(ctx) }
