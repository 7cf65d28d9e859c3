package rlock_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bad input is rejected with ErrInvalid and changes nothing; scripts check every key
// before they write any: a nil context, durations under a millisecond, a fencing counter that
// is not a number (or cannot grow, for a new token), a key of the wrong type at any of a lock's
// keys.
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
	each(t, func(k lockKind) bool { return !k.semaphore() }, func(t *testing.T, k lockKind) {
		for _, fence := range []string{"not-a-number", "9223372036854775807"} {
			if k.read && fence != "not-a-number" {
				continue // a read hold only reads the counter
			}
			t.Run("fence "+fence, func(t *testing.T) {
				name := "fence-" + k.name + fence[:3]
				key := e.LockKey(name) + ":fence"
				require.NoError(t, e.Do("SET", key, fence).Error())
				defer e.Do("DEL", key)
				_, err := k.on(c, name, rlock.WithFencing()).try(bg, 0)
				assert.ErrorIs(t, err, rlock.ErrInvalid)
				assert.ErrorContains(t, err, "fencing counter")
				assert.Equal(t, []string{key}, e.Keys(), "nothing but the counter")
			})
		}
	})
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
	// The keys of each kind (design: P:{name} and the row's suffixes).
	each(t, func(k lockKind) bool { return k.keys != nil }, func(t *testing.T, k lockKind) {
		for _, suffix := range append([]string{""}, k.keys...) {
			t.Run(fmt.Sprintf("wrong type at %q", "P:{name}"+suffix), func(t *testing.T) {
				name := "wt-" + k.name + strings.TrimPrefix(suffix, ":")
				key := e.LockKey(name) + suffix
				require.NoError(t, e.Do("SET", key, "x").Error())
				defer e.Do("DEL", key)
				_, err := k.on(c, name).try(bg, 0)
				assert.ErrorIs(t, err, rlock.ErrInvalid)
				assert.Equal(t, []string{key}, e.Keys(), "no other key was written")
				v, err := e.Do("GET", key).ToString()
				require.NoError(t, err)
				assert.Equal(t, "x", v, "the foreign key is untouched")
			})
		}
	})
}

// Locks of different kinds on one name fail with ErrInvalid and change nothing, instead of
// excluding nobody (a release of one kind deleting another's hold, a semaphore writing into a
// read-write lock's hash).
func TestInvalid_mixedKindsOnOneName(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{WatchdogTimeout: 3 * time.Second})
	family := func(k lockKind) string {
		switch {
		case k.mutex != nil:
			return "m"
		case k.rw != nil:
			return "rw"
		}
		return "s"
	}
	eachKind(t, func(t *testing.T, held lockKind) {
		each(t, func(k lockKind) bool { return family(k) != family(held) }, func(t *testing.T, other lockKind) {
			name := "mix-" + family(held) + "-" + family(other)
			h, err := held.on(c, name).try(bg, 0)
			require.NoError(t, err)
			before := e.Do("HGETALL", e.LockKey(name))
			_, err = other.on(c, name).try(bg, 0)
			require.ErrorIs(t, err, rlock.ErrInvalid)
			require.ErrorContains(t, err, "another kind")
			// A release of another kind fails too: ErrInvalid from Redis, or ErrNotHeld before
			// Redis when the hold context names no owner for it (a semaphore's).
			if err := other.on(c, name).release(h); !errors.Is(err, rlock.ErrNotHeld) {
				require.ErrorIs(t, err, rlock.ErrInvalid)
			}
			after := e.Do("HGETALL", e.LockKey(name))
			bm, _ := before.AsStrMap()
			am, _ := after.AsStrMap()
			require.Equal(t, bm, am, "the other kind changed nothing")
			require.NoError(t, h.Err(), "the hold lives on")
			require.NoError(t, held.on(c, name).release(h))
		})
	})
}

// TestInvalid_optionsNamesAndOwners: bad options, lock names, lock options and owners, a
// negative wait and a nil context are ErrInvalid from every call, and write nothing; so is a
// key of another type at a lock's name.
func TestInvalid_optionsNamesAndOwners(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{})
	ok := c.NewMutex("ok")

	_, err := rlock.New(nil, rlock.Options{})
	assert.ErrorIs(t, err, rlock.ErrInvalid)
	assert.ErrorContains(t, err, "nil rueidis client")
	for _, tc := range []struct {
		opts rlock.Options
		msg  string
	}{
		{rlock.Options{WatchdogTimeout: -time.Second}, "negative WatchdogTimeout"},
		{rlock.Options{FairWaitTimeout: -time.Second}, "negative FairWaitTimeout"},
		{rlock.Options{KeyPrefix: "a{b"}, "KeyPrefix"},
		{rlock.Options{Wait: rlock.Spin(0)}, "Spin interval"},
	} {
		_, err := rlock.New(e.Admin(), tc.opts)
		assert.ErrorIs(t, err, rlock.ErrInvalid, tc.msg)
		assert.ErrorContains(t, err, tc.msg)
	}

	for _, tc := range []struct {
		name string
		m    *rlock.Mutex
		msg  string
	}{
		{"empty name", c.NewMutex(""), "empty lock name"},
		{"brace name", c.NewMutex("}x"), "starts with '}'"},
		{"zero lease", c.NewMutex("a", rlock.WithLease(0)), "lease must be positive"},
		{"negative lease", c.NewMutex("a", rlock.WithLease(-time.Second)), "lease must be positive"},
		{"zero spin", c.NewMutex("a", rlock.WithWait(rlock.Spin(0))), "Spin interval"},
		{"negative spin", c.NewMutex("a", rlock.WithWait(rlock.Spin(-time.Millisecond))), "Spin interval"},
		{"nil wait", c.NewMutex("a", rlock.WithWait(nil)), "WithWait(nil)"},
		{"fair empty name", c.NewFairMutex(""), "empty lock name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := map[string]error{}
			_, calls["Lock"] = tc.m.Lock(bg)
			_, calls["TryLock"] = tc.m.TryLock(bg, 0)
			calls["Unlock"] = tc.m.Unlock(rlock.WithOwner(bg, "o"))
			_, calls["ForceUnlock"] = tc.m.ForceUnlock(bg)
			_, calls["IsLocked"] = tc.m.IsLocked(bg)
			_, calls["HoldCount"] = tc.m.HoldCount(rlock.WithOwner(bg, "o"))
			_, calls["TTL"] = tc.m.TTL(bg)
			for call, err := range calls {
				assert.ErrorIs(t, err, rlock.ErrInvalid, call)
				assert.ErrorContains(t, err, tc.msg, call)
			}
		})
	}

	for _, tc := range []struct {
		name, owner, msg string
	}{
		{"empty owner", "", "empty owner id"},
		{"long owner", string(make([]byte, 257)), "more than 256"},
		{"control owner", "a\nb", "control character"},
		{"invalid utf8", "a\xffb", "not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := rlock.WithOwner(bg, tc.owner)
			_, err := ok.Lock(ctx)
			assert.ErrorIs(t, err, rlock.ErrInvalid)
			assert.ErrorContains(t, err, tc.msg)
			_, err = ok.TryLock(ctx, time.Second)
			assert.ErrorIs(t, err, rlock.ErrInvalid)
			assert.ErrorIs(t, ok.Unlock(ctx), rlock.ErrInvalid)
			_, err = ok.HoldCount(ctx)
			assert.ErrorIs(t, err, rlock.ErrInvalid)
		})
	}
	_, err = ok.TryLock(bg, -time.Second)
	assert.ErrorIs(t, err, rlock.ErrInvalid)
	assert.ErrorContains(t, err, "negative wait")
	//lint:ignore SA1012 a nil context is the bad input under test
	_, err = ok.Lock(nil) //nolint:staticcheck
	assert.ErrorIs(t, err, rlock.ErrInvalid)
	assert.Empty(t, e.Keys(), "failed validation writes nothing")

	t.Run("wrong key type", func(t *testing.T) {
		key := e.Prefix + ":{str}"
		require.NoError(t, e.Do("SET", key, "not a lock").Error())
		t.Cleanup(func() { e.Do("DEL", key) })
		m := c.NewMutex("str")
		calls := map[string]error{}
		_, calls["Lock"] = m.TryLock(bg, 100*time.Millisecond)
		calls["Unlock"] = m.Unlock(rlock.WithOwner(bg, "o"))
		_, calls["ForceUnlock"] = m.ForceUnlock(bg)
		_, calls["IsLocked"] = m.IsLocked(bg)
		_, calls["TTL"] = m.TTL(bg)
		for call, err := range calls {
			assert.ErrorIs(t, err, rlock.ErrInvalid, call)
			assert.ErrorContains(t, err, "not a lock", call)
		}
		v, err := e.Do("GET", key).ToString()
		require.NoError(t, err)
		assert.Equal(t, "not a lock", v, "the foreign key is untouched")
		assert.Equal(t, []string{key}, e.Keys())
	})
}
