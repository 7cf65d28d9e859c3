package rlock_test

import (
	"context"
	"crypto/sha1"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Force unlocks (Mutex.ForceUnlock, RWMutex.ForceUnlock, Semaphore.ForceRelease) of every kind.

// slowForce is a rueidis client on which every force-unlock script (ForceUnlock,
// ForceRelease) returns its reply 300ms late.
type slowForce struct {
	rueidis.Client
	shas map[string]bool // of both pub/sub variants of each force script
}

func newSlowForce(rc rueidis.Client) slowForce {
	s := slowForce{Client: rc, shas: map[string]bool{}}
	for _, f := range []string{"forceunlock.lua", "rw_forceunlock.lua", "sem_forcerelease.lua"} {
		for _, src := range []string{wire.Source(f), wire.ShardedSource(f)} {
			s.shas[fmt.Sprintf("%x", sha1.Sum([]byte(src)))] = true
		}
	}
	return s
}

func (s slowForce) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c := cmd.Commands() // read before Do, which may recycle cmd
	force := len(c) > 1 && ((c[0] == "EVALSHA" && s.shas[strings.ToLower(c[1])]) ||
		(c[0] == "EVAL" && s.shas[fmt.Sprintf("%x", sha1.Sum([]byte(c[1])))]))
	r := s.Client.Do(ctx, cmd)
	if force {
		time.Sleep(300 * time.Millisecond)
	}
	return r
}

// TestForceUnlock_ownWaiterKeepsItsNewHold: a force unlock wakes a waiter, which may be of the
// same client and take a new hold before the force unlock's reply arrives (here the reply is
// 300ms late). That hold is not one the force unlock ended: it lives on, and its release frees
// the lock at once (a hold wrongly marked lost is not released; it would stay in Redis for its
// lease, 30s). Every kind and mode whose holds exclude.
func TestForceUnlock_ownWaiterKeepsItsNewHold(t *testing.T) {
	each(t, perKind, func(t *testing.T, k lockKind) {
		e := newEnv(t)
		other := e.client(rlock.Options{})
		c, err := rlock.New(newSlowForce(e.Rueidis()), rlock.Options{KeyPrefix: e.Prefix})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, c.Close()) })

		_, err = k.on(other, "f").lock(bg)
		require.NoError(t, err)
		got := make(chan context.Context, 1)
		go func() {
			w, err := k.on(c, "f").lock(bg)
			assert.NoError(t, err)
			got <- w
		}()
		require.Eventually(t, func() bool { return len(e.Channels()) == 1 }, 3*time.Second, time.Millisecond,
			"the waiter subscribed")
		ok, err := k.on(c, "f").force(bg)
		require.NoError(t, err)
		require.True(t, ok)
		var w context.Context
		select {
		case w = <-got:
		case <-time.After(3 * time.Second):
			t.Fatal("the waiter did not get the lock after the force unlock")
		}
		require.NoError(t, w.Err(), "the waiter's new hold lives on: %v", context.Cause(w))
		require.NoError(t, k.on(c, "f").release(w)) // and the env's check finds nothing left
	})
}
