package rlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/rlock-go/rlock/internal/wire"
)

var (
	// ErrNotObtained is returned by [Mutex.TryLock] when its wait ran out before the lock was
	// acquired. Nothing is left behind in Redis.
	ErrNotObtained = errors.New("rlock: not obtained")
	// ErrNotHeld is returned by [Mutex.Unlock] when the owner in the context holds nothing on
	// that lock. Redis is left untouched.
	ErrNotHeld = errors.New("rlock: not held")
	// ErrLockLost is the cause of a hold context cancelled because its lease is gone, and the
	// error of [Mutex.Unlock] for such a hold: the critical section may have overlapped
	// another holder.
	ErrLockLost = errors.New("rlock: lock lost")
	// ErrClosed is returned by every method once the [Client] is closed, and is the cause of
	// the hold contexts that Close cancels.
	ErrClosed = errors.New("rlock: client closed")
	// ErrInvalid is wrapped by every error about an invalid argument, option or Redis key type.
	// Such a call changes nothing in Redis.
	ErrInvalid = errors.New("rlock: invalid argument")
	// ErrNotReplicated is returned (wrapped) by Lock, RLock, Acquire and their Try forms when
	// [Options.SyncReplicas] replicas did not acknowledge a new hold within SyncTimeout. The
	// hold was given back: nothing is held.
	ErrNotReplicated = errors.New("rlock: not replicated")
)

// invalidf returns an error that wraps [ErrInvalid] and names the problem.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// errBadReply reports a script reply of an unexpected shape.
var errBadReply = errors.New("rlock: unexpected reply from Redis")

// badReply returns errBadReply for wire.ErrBadReply, else err.
func badReply(err error) error {
	if err == wire.ErrBadReply {
		return errBadReply
	}
	return err
}

// Lost reports whether ctx, a hold context or one derived from it, ended because the lease was
// lost: its cause is [ErrLockLost]. It is false while the hold lives, and for a hold context that
// ended for another reason: released by Unlock ([context.Canceled]), the Client closed
// ([ErrClosed]), the caller's own context cancelled or past its deadline, or, with [WithLease],
// a deadline that a later re-entry outlived. Test this, not Done, to tell a lost lock from the
// end of your own context. It does not block.
func Lost(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrLockLost)
}
