package main

import (
	"context"
	"fmt"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/wire"
)

// holdKind is what "rlock exec" holds.
type holdKind int

const (
	kindMutex     holdKind = iota // the mutex NAME (fair with --fair)
	kindRead                      // --read: a read hold of the read-write mutex NAME
	kindWrite                     // --write: the write hold of the read-write mutex NAME
	kindSemaphore                 // --semaphore N: one of N permits of the semaphore NAME
)

// kindOf returns the kind of hold that the exec flags ask for, or a usage error for flags
// that conflict or do not apply to that kind.
func kindOf(f *execFlags) (holdKind, error) {
	semaphore := f.set["semaphore"]
	switch {
	case f.read && f.write:
		return 0, usagef("exec: --read and --write exclude each other")
	case semaphore && (f.read || f.write):
		return 0, usagef("exec: --semaphore excludes --read and --write")
	case f.read:
		return kindRead, nil
	case f.write:
		return kindWrite, nil
	case !semaphore:
		return kindMutex, nil
	case f.semaphore < 1:
		return 0, usagef("exec: --semaphore %d: a semaphore needs at least 1 permit", f.semaphore)
	case f.fair:
		return 0, usagef("exec: --fair does not apply to --semaphore: a semaphore always serves its waiters in arrival order")
	case f.set["owner"]:
		return 0, usagef("exec: --owner does not apply to --semaphore: every acquisition is a hold of its own")
	}
	return kindSemaphore, nil
}

// locker takes and gives back the one hold that "rlock exec" runs CMD under.
type locker interface {
	// acquire takes the hold for the owner in ctx (a fresh one if it carries none) and returns
	// its hold context; wait < 0 waits until ctx ends, wait >= 0 gives up after wait with
	// rlock.ErrNotObtained.
	acquire(ctx context.Context, wait time.Duration) (context.Context, error)
	// release gives back the hold that held, from acquire, carries.
	release(held context.Context) error
	// what names the lock in messages by its kind, as rlock.State.Kind spells it, and its
	// name, as the library's errors do: `mutex "NAME"`, `fair_rw_mutex "NAME"`.
	what() string
	// busy says why acquire gave up: what holds the lock (or waits for it) such that this
	// hold could not be had.
	busy() string
}

// newLocker returns the locker of kind for the lock name, whose holds get opts; f.semaphore
// is the permit count of a semaphore.
func newLocker(s *session, f *execFlags, kind holdKind, name string, opts ...rlock.MutexOption) locker {
	switch kind {
	case kindRead, kindWrite:
		return rwLocker{rw: s.rwMutex(&f.redisFlags, name, opts...), write: kind == kindWrite, fair: f.fair}
	case kindSemaphore:
		return semaphoreLocker{s.locks.NewSemaphore(name, f.semaphore, opts...)}
	}
	return mutexLocker{s.mutex(&f.redisFlags, name, opts...), f.fair}
}

// mutexLocker holds a mutex, plain or fair.
type mutexLocker struct {
	m    *rlock.Mutex
	fair bool
}

// acquire locks the mutex: Lock, or TryLock for a bounded wait.
func (l mutexLocker) acquire(ctx context.Context, wait time.Duration) (context.Context, error) {
	if wait < 0 {
		return l.m.Lock(ctx)
	}
	return l.m.TryLock(ctx, wait)
}

// release unlocks the mutex once.
func (l mutexLocker) release(held context.Context) error { return l.m.Unlock(held) }

func (l mutexLocker) what() string {
	if l.fair {
		return fmt.Sprintf("%s %q", rlock.KindFairMutex, l.m.Name())
	}
	return fmt.Sprintf("%s %q", rlock.KindMutex, l.m.Name())
}
func (l mutexLocker) busy() string { return "is held by another owner" }

// multiLocker holds several mutexes, plain or fair, as one (a MultiLock): all or none.
type multiLocker struct {
	ml *rlock.MultiLock
}

// newMultiLocker returns the locker of the mutexes names (fair with --fair), whose holds get
// opts.
func newMultiLocker(s *session, f *execFlags, names []string, opts ...rlock.MutexOption) locker {
	ms := make([]*rlock.Mutex, len(names))
	for i, name := range names {
		ms[i] = s.mutex(&f.redisFlags, name, opts...)
	}
	return multiLocker{s.locks.NewMultiLock(ms...)}
}

// acquire locks every mutex: Lock, or TryLock for a bounded wait (in all, not per mutex).
func (l multiLocker) acquire(ctx context.Context, wait time.Duration) (context.Context, error) {
	if wait < 0 {
		return l.ml.Lock(ctx)
	}
	return l.ml.TryLock(ctx, wait)
}

// release unlocks every mutex once.
func (l multiLocker) release(held context.Context) error { return l.ml.Unlock(held) }

// what names the set as the library's errors do: its first names, in the order taken.
func (l multiLocker) what() string {
	names := l.ml.Names()
	if len(names) > 3 {
		return fmt.Sprintf("multilock %q ... (%d members)", names[:3], len(names))
	}
	return fmt.Sprintf("multilock %q", names)
}
func (l multiLocker) busy() string { return "has a member held by another owner" }

// rwLocker holds a read-write mutex, plain (writer preference) or fair, for reading or for
// writing.
type rwLocker struct {
	rw    *rlock.RWMutex
	write bool
	fair  bool
}

// acquire takes a write hold (Lock, TryLock) or a read hold (RLock, TryRLock).
func (l rwLocker) acquire(ctx context.Context, wait time.Duration) (context.Context, error) {
	switch {
	case l.write && wait < 0:
		return l.rw.Lock(ctx)
	case l.write:
		return l.rw.TryLock(ctx, wait)
	case wait < 0:
		return l.rw.RLock(ctx)
	}
	return l.rw.TryRLock(ctx, wait)
}

// release gives back one write hold (Unlock) or one read hold (RUnlock).
func (l rwLocker) release(held context.Context) error {
	if l.write {
		return l.rw.Unlock(held)
	}
	return l.rw.RUnlock(held)
}

func (l rwLocker) what() string {
	if l.fair {
		return fmt.Sprintf("%s %q", rlock.KindFairRWMutex, l.rw.Name())
	}
	return fmt.Sprintf("%s %q", rlock.KindRWMutex, l.rw.Name())
}

func (l rwLocker) busy() string {
	switch {
	case l.write && l.fair:
		return "is held by other owners, or others wait before this writer"
	case l.write:
		return "is held by other owners (readers or a writer)"
	case l.fair:
		return "is held for writing, or others wait before this reader"
	}
	return "is held for writing, or a writer waits"
}

// semaphoreLocker holds one permit of a semaphore.
type semaphoreLocker struct{ s *rlock.Semaphore }

// acquire takes one permit: Acquire, or TryAcquire for a bounded wait.
func (l semaphoreLocker) acquire(ctx context.Context, wait time.Duration) (context.Context, error) {
	if wait < 0 {
		return l.s.Acquire(ctx, 1)
	}
	return l.s.TryAcquire(ctx, 1, wait)
}

// release gives the permit of held back.
func (l semaphoreLocker) release(held context.Context) error { return l.s.Release(held) }

func (l semaphoreLocker) what() string { return fmt.Sprintf("%s %q", rlock.KindSemaphore, l.s.Name()) }

func (l semaphoreLocker) busy() string {
	return fmt.Sprintf("has no free permit of %d (or others wait before)", l.s.Permits())
}

// checkKind refuses to take NAME as kind when its keys in Redis show a lock of another kind,
// and says how the kind it found is taken. The library refuses such a mix itself (a script
// given another kind's hash fails with ErrInvalid and changes nothing); this check only gives
// a message that names the kind found and its flags. It is best-effort (the lock may change
// between it and the acquisition); errors are left to the acquisition to report.
func checkKind(s *session, f *redisFlags, kind holdKind, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), checkKindWait)
	defer cancel()
	st, err := s.locks.State(ctx, name)
	found := familyOf(st.Kind)
	if err != nil || found == familyNone {
		return nil
	}
	want := familyMutex
	switch kind {
	case kindRead, kindWrite:
		want = familyRW
	case kindSemaphore:
		want = familySemaphore
	}
	if found == want {
		return nil
	}
	return usagef("lock %q is a %s in Redis (key %s): take it %s, as everyone using it must",
		name, st.Kind, wire.LockKey(f.keyPrefix(), name), takenWith(found))
}

// checkKindWait bounds checkKind's look at NAME's keys: a Redis that does not answer is left
// to the acquisition, whose --wait bounds it.
const checkKindWait = 500 * time.Millisecond

// takenWith names the flags of exec that take a lock of the family found.
func takenWith(found family) string {
	switch found {
	case familyRW:
		return "with --read or --write"
	case familySemaphore:
		return "with --semaphore N"
	}
	return "without --read, --write or --semaphore"
}
