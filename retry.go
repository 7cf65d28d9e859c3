package rlock

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// backoff spaces retries after transport errors: 10ms doubling to 1s.
type backoff struct{ d time.Duration }

func newBackoff() *backoff { return &backoff{d: 5 * time.Millisecond} }

func (b *backoff) next() time.Duration {
	b.d = min(2*b.d, time.Second)
	return b.d
}

// isTransport reports whether err is a transport failure (the command may or may not have
// run) or a node's refusal to run it for now (see refusedForNow), as opposed to a reply from
// Redis, bad input or a closed client. Either way the caller retries within its bound, and a
// request it leaves is settled as one whose reply was lost: for a refusal that is more than
// needed, never less. A context error from rueidis counts as transport even for a call made
// without a deadline: a connection that another call's cancelled context was dialling fails
// every call queued on it that way.
func isTransport(err error) bool {
	if err == nil {
		return false
	}
	var reply *rueidis.RedisError
	switch {
	case errors.As(err, &reply):
		return refusedForNow(reply)
	case errors.Is(err, ErrInvalid), errors.Is(err, ErrClosed), errors.Is(err, ErrNotReplicated),
		errors.Is(err, rueidis.ErrClosing):
		return false
	}
	return true
}

// refusedForNow reports whether reply is an error by which a node refuses a command without
// running it, while its cluster or replication changes: TRYAGAIN (a script's keys half
// migrated), CLUSTERDOWN, LOADING, MASTERDOWN, and READONLY (a primary demoted under the
// client). rueidis retries these only for commands it may resend, which a script is not.
func refusedForNow(reply *rueidis.RedisError) bool {
	if reply.IsTryAgain() || reply.IsClusterDown() || reply.IsLoading() {
		return true
	}
	msg := reply.Error()
	return strings.HasPrefix(msg, "MASTERDOWN") || strings.HasPrefix(msg, "READONLY")
}

// attemptErr is err, a transport error of a Redis call, as the call's error wraps it: a context
// error from rueidis is not the caller's (rueidis fails the calls queued on a connection that
// another call's cancelled context was dialling, and a flight's context is cancelled when its
// caller leaves), so it becomes a connFailedError, lest errors.Is take the call for one its own
// context ended.
func attemptErr(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return connFailedError{err.Error()}
	}
	return err
}

// connFailedError is a transport error that rueidis reported as a context error that was not
// the caller's (see attemptErr). It is a net.Error, as rueidis' other transport errors are.
type connFailedError struct{ cause string }

func (e connFailedError) Error() string { return e.cause + " (the connection failed)" }
func (connFailedError) Timeout() bool   { return false }
func (connFailedError) Temporary() bool { return true }
