package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/rlock-go/rlock"
)

// runUnlock is "rlock unlock --force": it deletes the lock NAME whoever holds it (its holders
// learn at their next renewal, and an "rlock exec" holding it stops its CMD) and wakes a
// waiter. It returns 0 if the lock existed, 1 if it did not, 2 on errors.
func runUnlock(args []string, env []string, stdout, stderr io.Writer) int {
	var force *bool
	s, f, name, code := startNamed("unlock", args, env, stdout, stderr, func(fs *flag.FlagSet) {
		force = fs.Bool("force", false, "delete the lock whoever holds it")
	}, func() error {
		if !*force {
			return usagef("unlock: needs --force: it releases the lock whoever holds it " +
				"(a holder releases its own lock when its CMD exits)")
		}
		return nil
	})
	if s == nil {
		return code
	}
	defer s.close()
	existed, err := forceUnlock(s, f, name)
	if err != nil { // NAME is valid (oneName): a key of another type, or Redis failed
		fmt.Fprintf(stderr, "rlock: unlock --force %q: %s\n", name, errorText(err))
		return exitError
	}
	if !existed {
		fmt.Fprintf(stdout, "%s: was not locked\n", name)
		return exitFree
	}
	fmt.Fprintf(stdout, "%s: was locked; deleted\n", name)
	return exitHeld
}

// forceUnlock deletes the lock name with the ForceUnlock of its kind, which it tells from the
// lock's keys as status does: a mutex or a read-write mutex, fair with --fair or when waiters
// queue (the fair kinds' ForceUnlock wakes the queue's head). It reports whether the lock
// existed.
func forceUnlock(s *session, f *redisFlags, name string) (bool, error) {
	st, err := readState(s, name)
	if err != nil {
		return false, err
	}
	if st.Kind == rlock.KindElection {
		return false, fmt.Errorf("%w: %q is an election: unlock --force does not end its term", rlock.ErrInvalid, name)
	}
	fair := *f
	fair.fair = f.fair || st.Kind == rlock.KindFairMutex || st.Kind == rlock.KindFairRWMutex
	switch familyOf(st.Kind) {
	case familyRW:
		return s.rwMutex(&fair, name).ForceUnlock(context.Background())
	case familySemaphore:
		return forceUnlockSemaphore(s, f, name)
	}
	return s.mutex(&fair, name).ForceUnlock(context.Background())
}

// forceUnlockSemaphore deletes every hold of the semaphore name (Semaphore.ForceRelease, which
// does not check the permit count: any count opens it). Waiters keep their places.
func forceUnlockSemaphore(s *session, _ *redisFlags, name string) (bool, error) {
	return s.locks.NewSemaphore(name, 1).ForceRelease(context.Background())
}
