package rlock_test

import (
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bad input is rejected with ErrInvalid and changes nothing; scripts check every key
// before they write any.
func TestInvalid_badInputChangesNothing(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{})

	t.Run("HoldCount(nil)", func(t *testing.T) {
		//lint:ignore SA1012 a nil context is the bad input under test
		_, err := c.NewMutex("x").HoldCount(nil) //nolint:staticcheck
		assert.ErrorIs(t, err, rlock.ErrInvalid)
	})
	t.Run("durations under a millisecond", func(t *testing.T) {
		for _, o := range []rlock.Options{{FairWaitTimeout: 500 * time.Microsecond}, {WatchdogTimeout: time.Millisecond}, {Wait: rlock.Spin(100 * time.Microsecond)}} {
			_, err := rlock.New(e.Admin(), o)
			assert.ErrorIs(t, err, rlock.ErrInvalid, "%+v", o)
		}
		_, err := c.NewMutex("x", rlock.WithLease(500*time.Microsecond)).Lock(bg)
		assert.ErrorIs(t, err, rlock.ErrInvalid)
	})
	for _, k := range kinds {
		for _, fence := range []string{"not-a-number", "9223372036854775807"} {
			t.Run(k.name+"/fence "+fence, func(t *testing.T) {
				name := "fence-" + k.name + fence[:3]
				key := e.LockKey(name) + ":fence"
				require.NoError(t, e.Do("SET", key, fence).Error())
				defer e.Do("DEL", key)
				_, err := k.new(c, name, rlock.WithFencing()).TryLock(bg, 0)
				assert.ErrorIs(t, err, rlock.ErrInvalid)
				assert.ErrorContains(t, err, "fencing counter")
				n, err := e.Do("EXISTS", e.LockKey(name)).AsInt64()
				require.NoError(t, err)
				assert.Zero(t, n, "the lock hash was not written")
			})
		}
	}
	t.Run("fair queue of the wrong type", func(t *testing.T) {
		m := c.NewFairMutex("wq")
		h, err := m.Lock(bg)
		require.NoError(t, err)
		queue := e.LockKey("wq") + ":queue"
		require.NoError(t, e.Do("SET", queue, "x").Error())
		assert.ErrorIs(t, m.Unlock(h), rlock.ErrInvalid)
		n, err := m.HoldCount(h)
		require.NoError(t, err)
		assert.Equal(t, 1, n, "the lock was not deleted")
		require.NoError(t, e.Do("DEL", queue).Error())
		require.NoError(t, m.Unlock(h))
	})
}
