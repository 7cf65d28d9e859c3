package rlock

import (
	"context"
	"errors"
	"fmt"
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
// run), as opposed to a reply from Redis, bad input or a closed client. A context error from
// rueidis counts as transport even for a call made without a deadline: a connection that
// another call's cancelled context was dialling fails every call queued on it that way.
func isTransport(err error) bool {
	if err == nil {
		return false
	}
	var reply *rueidis.RedisError
	switch {
	case err == nil, errors.As(err, &reply), errors.Is(err, ErrInvalid), errors.Is(err, ErrClosed),
		errors.Is(err, ErrNotReplicated), errors.Is(err, rueidis.ErrClosing):
		return false
	}
	return true
}

// attemptErr is err, an attempt's transport error, as the call's error wraps it: a context error
// is not the caller's (rueidis fails the calls queued on a connection that another call's
// cancelled context was dialling), so it is kept as text only, lest errors.Is take the call for
// one its own context ended.
func attemptErr(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%v (the connection failed)", err)
	}
	return err
}
