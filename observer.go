package rlock

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// Observer receives what the locks of a [Client] do, for metrics and tracing; set it in
// [Options.Observer]. The module github.com/rlock-go/rlock/otel turns it into OpenTelemetry
// metrics and spans. Without an Observer the library does none of this work.
//
// It observes every kind of lock ([Mutex], fair Mutex, [RWMutex], fair RWMutex, [Semaphore],
// [Election]); [LockInfo.Kind] says which, and [Op] which call (Lock, RLock, Acquire, Campaign,
// their Try forms, and their releases). An election's holds are its terms: EventHoldStarted is
// a term won, EventHoldEnded one resigned (OutcomeReleased) or lost.
//
// Methods are called synchronously, on the goroutine of the call that causes them (an
// acquire or release call, ForceUnlock, ForceRelease, Close) or of the Client's watchdog or
// reaper, and never while one of the Client's internal mutexes is held; they may run
// concurrently with each other. They should return quickly: a slow method delays the call that
// reports, and a slow Event delays renewals. They may call into rlock (IsLocked, or locks of
// other names), but Event must not Lock or Unlock the lock it reports on for the
// owner whose call reports it: that call may still hold the owner's turn on the lock (a
// client sends one request at a time per owner and lock), so it would wait for itself.
type Observer interface {
	// Start is called when an acquire call (Lock, TryLock, RLock, TryRLock, Acquire,
	// TryAcquire, Campaign, TryCampaign) or a release call (Unlock, RUnlock, Release, Resign)
	// with a non-nil context begins. The context it returns is the one the call's Redis
	// commands run under (without its cancellation: a tracing observer returns one that
	// carries its span, so the commands' spans nest under it) and the one given to End; nil
	// means ctx. It does not change the call's cancellation, nor the hold context that Lock
	// returns, which derives from ctx.
	Start(ctx context.Context, op Op, lock LockInfo) context.Context
	// End is called once when that call returns, with the context Start returned, the call's
	// outcome, how long it took (for an acquire call: the wait), and its error (nil when it
	// succeeded).
	End(ctx context.Context, op Op, lock LockInfo, outcome Outcome, took time.Duration, err error)
	// Event reports what happens to holds, which Start and End do not tell: a hold record of
	// this process started or ended (during a call, or in the background), a renewal script
	// failed, or an acquire call that had waited acquired.
	Event(ev Event)
}

// Op is the kind of call that [Observer.Start] and [Observer.End] report.
type Op int

const (
	// OpLock is [Mutex.Lock] or [Mutex.TryLock].
	OpLock Op = iota
	// OpUnlock is [Mutex.Unlock].
	OpUnlock
	// OpRLock is [RWMutex.RLock] or [RWMutex.TryRLock] ([RWMutex.Lock] is OpLock).
	OpRLock
	// OpRUnlock is [RWMutex.RUnlock] ([RWMutex.Unlock] is OpUnlock).
	OpRUnlock
	// OpAcquire is [Semaphore.Acquire] or [Semaphore.TryAcquire].
	OpAcquire
	// OpRelease is [Semaphore.Release].
	OpRelease
	// OpCampaign is [Election.Campaign] or [Election.TryCampaign], or one of [Election.Run]'s.
	OpCampaign
	// OpResign is [Election.Resign], or one of [Election.Run]'s.
	OpResign
)

// String returns "lock", "unlock", "rlock", "runlock", "acquire", "release", "campaign" or
// "resign".
func (o Op) String() string {
	switch o {
	case OpLock:
		return "lock"
	case OpUnlock:
		return "unlock"
	case OpRLock:
		return "rlock"
	case OpRUnlock:
		return "runlock"
	case OpAcquire:
		return "acquire"
	case OpRelease:
		return "release"
	case OpCampaign:
		return "campaign"
	case OpResign:
		return "resign"
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// Outcome is how a call ended, or (for [EventHoldEnded]) how a hold ended.
type Outcome int

const (
	// OutcomeAcquired: an acquire call (Lock, RLock, Acquire, a Try form) acquired (or
	// re-entered) the lock.
	OutcomeAcquired Outcome = iota
	// OutcomeTimedOut: a Try form (TryLock, TryRLock, TryAcquire) gave up with [ErrNotObtained].
	OutcomeTimedOut
	// OutcomeCanceled: the caller's context ended the wait (its error is returned).
	OutcomeCanceled
	// OutcomeClosed: the Client was closed ([ErrClosed]); for a hold: Close ended it.
	OutcomeClosed
	// OutcomeError: any other error (invalid arguments, Redis errors).
	OutcomeError
	// OutcomeReleased: a release call (Unlock, RUnlock, Release) released one hold; for a hold:
	// its last hold was released.
	OutcomeReleased
	// OutcomeLost: Unlock found the lease gone ([ErrLockLost]); for a hold: it was lost.
	OutcomeLost
	// OutcomeNotHeld: Unlock by an owner that holds nothing ([ErrNotHeld]).
	OutcomeNotHeld
)

var outcomeNames = [...]string{
	OutcomeAcquired: "acquired",
	OutcomeTimedOut: "timed_out",
	OutcomeCanceled: "canceled",
	OutcomeClosed:   "closed",
	OutcomeError:    "error",
	OutcomeReleased: "released",
	OutcomeLost:     "lost",
	OutcomeNotHeld:  "not_held",
}

// String returns the outcome in snake case: "acquired", "timed_out", "canceled", "closed",
// "error", "released", "lost" or "not_held".
func (o Outcome) String() string {
	if o >= 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Lock kinds, as [LockInfo.Kind] names them.
const (
	KindMutex       = "mutex"         // [Client.NewMutex]
	KindFairMutex   = "fair_mutex"    // [Client.NewFairMutex]
	KindRWMutex     = "rw_mutex"      // [Client.NewRWMutex]
	KindFairRWMutex = "fair_rw_mutex" // [Client.NewFairRWMutex]
	KindSemaphore   = "semaphore"     // [Client.NewSemaphore]
	KindElection    = "election"      // [Client.NewElection]: a hold is a term of a leader
)

// LockInfo names the lock an observation is about.
type LockInfo struct {
	Name string // the lock name given to NewMutex, NewRWMutex, NewSemaphore, ...
	Kind string // KindMutex, KindFairMutex, KindRWMutex, KindFairRWMutex, KindSemaphore or KindElection
}

// EventType is the kind of an [Event].
type EventType int

const (
	// EventHoldStarted: this process recorded a new hold of an owner on a lock (its first
	// hold; re-entries add to the same record). Every started hold ends exactly once.
	EventHoldStarted EventType = iota
	// EventHoldEnded: a hold record ended: its last hold was released (Outcome
	// OutcomeReleased, Cause context.Canceled), it was lost (OutcomeLost, Cause an error
	// wrapping [ErrLockLost]) or the Client was closed (OutcomeClosed, Cause [ErrClosed]).
	// Held is how long it lasted. It is reported once per record, when this process learns of
	// the end: a loss may be learnt late (at the next renewal), and a hold released by an
	// Unlock whose reply was lost ends when that Unlock is settled.
	EventHoldEnded
	// EventRenewalFailed: a renewal script (of up to 100 holds) got no reply or an error.
	// Locks is the number of holds it carried, Lock the first of them, Cause the error. The
	// watchdog retries soon; the holds are not lost unless their lease runs out.
	EventRenewalFailed
	// EventHandoff: an acquire call (Lock, RLock, Acquire, a Try form) that found the lock held
	// (or queued behind waiters) acquired it; Waited is how long the call had waited. It comes
	// just before that call's End.
	EventHandoff
)

var eventNames = [...]string{
	EventHoldStarted:   "hold_started",
	EventHoldEnded:     "hold_ended",
	EventRenewalFailed: "renewal_failed",
	EventHandoff:       "handoff",
}

// String returns "hold_started", "hold_ended", "renewal_failed" or "handoff".
func (t EventType) String() string {
	if t >= 0 && int(t) < len(eventNames) {
		return eventNames[t]
	}
	return "event(" + strconv.Itoa(int(t)) + ")"
}

// Event is something that happened to holds, reported by [Observer.Event]. Which fields are
// set depends on Type (see the EventType constants).
type Event struct {
	Type    EventType
	Lock    LockInfo
	Owner   string        // the owner of the hold (hold events)
	Outcome Outcome       // EventHoldEnded: OutcomeReleased, OutcomeLost or OutcomeClosed
	Held    time.Duration // EventHoldEnded: from the hold record's start to its end
	Cause   error         // EventHoldEnded: the hold contexts' cause; EventRenewalFailed: the error
	Locks   int           // EventRenewalFailed: holds in the failed script
	Waited  time.Duration // EventHandoff: how long the call waited
}

// lockOutcome classifies the error of a Lock or TryLock call.
func lockOutcome(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeAcquired
	case errors.Is(err, ErrNotObtained):
		return OutcomeTimedOut
	case errors.Is(err, ErrClosed):
		return OutcomeClosed
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return OutcomeCanceled
	}
	return OutcomeError
}

// unlockOutcome classifies the error of an Unlock call.
func unlockOutcome(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeReleased
	case errors.Is(err, ErrLockLost):
		return OutcomeLost
	case errors.Is(err, ErrNotHeld):
		return OutcomeNotHeld
	case errors.Is(err, ErrClosed):
		return OutcomeClosed
	}
	return OutcomeError
}

// holdOutcome classifies the cause of a hold's end.
func holdOutcome(cause error) Outcome {
	switch {
	case errors.Is(cause, ErrClosed):
		return OutcomeClosed
	case errors.Is(cause, ErrLockLost):
		return OutcomeLost
	}
	return OutcomeReleased
}
