package rlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Errors tell the caller what to do, and name the package once.
func TestErrors_messages(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{})
	m := c.NewMutex("msg")
	h, err := m.Lock(bg)
	require.NoError(t, err)
	err = m.Unlock(bg)
	require.ErrorIs(t, err, rlock.ErrNotHeld)
	assert.Contains(t, err.Error(), "pass the context that Lock returned")
	require.NoError(t, m.Unlock(h))

	short := c.NewMutex("msg2", rlock.WithLease(20*time.Millisecond))
	h, err = short.Lock(bg)
	require.NoError(t, err)
	<-h.Done()
	errs := []error{err, context.Cause(h), short.Unlock(h), m.Unlock(bg), m.Unlock(rlock.WithOwner(bg, "nobody"))}
	_, e1 := c.NewMutex("").Lock(bg)
	_, e2 := m.TryLock(bg, -1)
	errs = append(errs, e1, e2)
	for _, err := range errs {
		if err != nil {
			assert.LessOrEqual(t, strings.Count(err.Error(), "rlock:"), 1, "%q", err.Error())
		}
	}
	assert.Equal(t, "lease ended: rlock: lock lost", context.Cause(h).Error())
}
