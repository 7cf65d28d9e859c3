package main

import (
	"context"
	"time"

	"github.com/rlock-go/rlock"
)

// holdKind is what "rlock exec" holds. The read-write mutex and the semaphore are specified
// for the library but not built yet: their flags are parsed, and refused by kindOf.
type holdKind int

const (
	kindMutex     holdKind = iota // the mutex NAME (fair with --fair)
	kindRead                      // --read: a read hold of the read-write mutex NAME
	kindWrite                     // --write: the write hold of the read-write mutex NAME
	kindSemaphore                 // --semaphore N: one of N permits of the semaphore NAME
)

// kindOf returns the kind of hold that the flags ask for, or a usage error: for conflicting
// flags, and for the kinds this version cannot take.
func kindOf(read, write, semaphore bool) (holdKind, error) {
	switch {
	case read && write:
		return 0, usagef("exec: --read and --write exclude each other")
	case semaphore && (read || write):
		return 0, usagef("exec: --semaphore excludes --read and --write")
	case read || write:
		// When NewRWMutex exists: kindRead / kindWrite, and an rwLocker in newLocker.
		return 0, usagef("--read/--write need the read-write mutex, not in this version")
	case semaphore:
		// When NewSemaphore exists: kindSemaphore, and a semaphoreLocker in newLocker.
		return 0, usagef("--semaphore needs the semaphore, not in this version")
	}
	return kindMutex, nil
}

// locker takes and gives back the one hold that "rlock exec" runs CMD under.
type locker interface {
	// acquire takes the hold for the owner in ctx (a fresh one if it carries none) and returns
	// its hold context; wait < 0 waits until ctx ends, wait >= 0 gives up after wait with
	// rlock.ErrNotObtained.
	acquire(ctx context.Context, wait time.Duration) (context.Context, error)
	// release gives back the hold that held, from acquire, carries.
	release(held context.Context) error
}

// newLocker returns the locker of kind for the lock name, whose holds get opts. kindOf has
// already refused the kinds this version does not have.
func newLocker(s *session, f *redisFlags, kind holdKind, name string, opts ...rlock.MutexOption) locker {
	switch kind {
	case kindMutex:
		return mutexLocker{s.mutex(f, name, opts...)}
	}
	panic("rlock: newLocker: hold kind not available in this version")
}

// mutexLocker holds a mutex, plain or fair.
type mutexLocker struct{ m *rlock.Mutex }

// acquire locks the mutex: Lock, or TryLock for a bounded wait.
func (l mutexLocker) acquire(ctx context.Context, wait time.Duration) (context.Context, error) {
	if wait < 0 {
		return l.m.Lock(ctx)
	}
	return l.m.TryLock(ctx, wait)
}

// release unlocks the mutex once.
func (l mutexLocker) release(held context.Context) error { return l.m.Unlock(held) }
