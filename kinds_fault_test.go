package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
)

// The Mutex's fault cases (replay_test.go, holdctx_test.go, watchdog_test.go) for the
// read-write mutex and the semaphore: each loses a request or a reply, or breaks the line,
// with redistest.Proxy, and checks one invariant:
// never a double grant, no hold left behind by a call that failed, no release counted twice,
// no hold context outliving its lease, and waiters that survive their connections.

// kfSemPermits is the permits of the semaphores here.
const kfSemPermits = 3

// kfTarget is one lock kind and mode under test: a read-write mutex held for reading or for
// writing, or n permits of a semaphore. Its calls go through the subject client (through the
// fault proxy); held and others read Redis through a client that holds nothing.
type kfTarget struct {
	name                         string // for subtests: "plain/read", "fair/write", "semaphore"
	acquireScript, releaseScript string
	unit                         int64 // what one hold counts in held: 1, or the permits n

	lock    func(ctx context.Context) (context.Context, error)
	try     func(ctx context.Context, wait time.Duration) (context.Context, error)
	release func(ctx context.Context) error

	// lock1 is lock, but a semaphore's takes 1 permit.
	lock1 func(ctx context.Context) (context.Context, error)
	// count returns what Redis counts for the owner of context h: its holds in this mode, or
	// the semaphore's permits in use.
	count func(h context.Context) (int64, error)
	// otherTry is a TryLock/TryRLock/TryAcquire(0) by another owner through the direct client
	// that conflicts with a hold of this target (wait 0: a single attempt).
	otherTry     func(wait time.Duration) (context.Context, error)
	otherRelease func(ctx context.Context) error
}

// kfRWKinds are the two read-write mutex constructors.
var kfRWKinds = []struct {
	name string
	new  func(c *rlock.Client, name string, opts ...rlock.MutexOption) *rlock.RWMutex
}{
	{"plain", (*rlock.Client).NewRWMutex},
	{"fair", (*rlock.Client).NewFairRWMutex},
}

// kfTargetNames are the names of every target kfTargets makes, in its order.
var kfTargetNames = []string{"plain/read", "plain/write", "fair/read", "fair/write", "semaphore"}

// kfTargets returns every target on the lock called name: subject is the client through the
// proxy, direct a client straight to Redis, opts the lock options of the subject's locks.
func kfTargets(subject, direct *rlock.Client, name string, opts ...rlock.MutexOption) []*kfTarget {
	var ts []*kfTarget
	for _, k := range kfRWKinds {
		rw, obs := k.new(subject, name, opts...), k.new(direct, name)
		for _, write := range []bool{false, true} {
			t := &kfTarget{name: k.name + "/read", acquireScript: "rw_acquire.lua", releaseScript: "rw_release.lua", unit: 1,
				lock: rw.RLock, lock1: rw.RLock, try: rw.TryRLock, release: rw.RUnlock,
				otherTry: func(wait time.Duration) (context.Context, error) {
					return obs.TryLock(rlock.WithOwner(bg, rlock.NewOwnerID()), wait)
				},
				otherRelease: obs.Unlock,
			}
			if write {
				t.name, t.lock, t.lock1, t.try, t.release = k.name+"/write", rw.Lock, rw.Lock, rw.TryLock, rw.Unlock
			}
			t.count = func(h context.Context) (int64, error) {
				owner, ok := rlock.Owner(h)
				if !ok {
					return 0, errors.New("the context carries no owner")
				}
				r, w, err := obs.HoldCount(rlock.WithOwner(bg, owner))
				if write {
					return int64(w), err
				}
				return int64(r), err
			}
			ts = append(ts, t)
		}
	}
	const n = 2
	s, obs := subject.NewSemaphore(name, kfSemPermits, opts...), direct.NewSemaphore(name, kfSemPermits)
	ts = append(ts, &kfTarget{name: "semaphore", acquireScript: "sem_acquire.lua", releaseScript: "sem_release.lua", unit: n,
		lock:  func(ctx context.Context) (context.Context, error) { return s.Acquire(ctx, n) },
		lock1: func(ctx context.Context) (context.Context, error) { return s.Acquire(ctx, 1) },
		try: func(ctx context.Context, wait time.Duration) (context.Context, error) {
			return s.TryAcquire(ctx, n, wait)
		},
		release: s.Release,
		count: func(context.Context) (int64, error) {
			avail, err := obs.Available(bg)
			return kfSemPermits - avail, err
		},
		otherTry: func(wait time.Duration) (context.Context, error) {
			return obs.TryAcquire(bg, kfSemPermits-n+1, wait)
		},
		otherRelease: obs.Release,
	})
	return ts
}

// eachTarget runs f as a subtest per target (see kfTargets) on its own env, proxy and lock
// "k", with subject client options opts.
func eachTarget(t *testing.T, opts rlock.Options, f func(t *testing.T, e *env, p *redistest.Proxy, k *kfTarget)) {
	for i, name := range kfTargetNames {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			p := e.newProxy()
			k := kfTargets(e.through(p).client(opts), e.client(rlock.Options{}), "k")[i]
			require.Equal(t, name, k.name)
			f(t, e, p, k)
		})
	}
}

// held is k.count(h), required to succeed.
func (k *kfTarget) held(t *testing.T, h context.Context) int64 {
	t.Helper()
	n, err := k.count(h)
	require.NoError(t, err)
	return n
}

// requireNothingHeld requires that no key but fencing counters is left under e's prefix.
func requireNothingHeld(t *testing.T, e *env, msg string) {
	t.Helper()
	keys := slices.DeleteFunc(e.Keys(), func(k string) bool { return strings.HasSuffix(k, ":fence") })
	require.Empty(t, keys, msg)
}

// requireKeptOut requires that another owner cannot take a conflicting hold now.
func requireKeptOut(t *testing.T, k *kfTarget, msg string) {
	t.Helper()
	h, err := k.otherTry(0)
	if err == nil {
		require.NoError(t, k.otherRelease(h))
	}
	require.ErrorIs(t, err, rlock.ErrNotObtained, msg)
}

// An acquire whose reply is lost after the script took the hold, in a call that then gives up,
// gives the hold back before it returns (no phantom hold); one whose reply or request is lost
// in a call that goes on is replayed under its request id and counted once (no double grant).
func TestKindsFault_lostAcquire(t *testing.T) {
	t.Run("TryLock 0", func(t *testing.T) {
		eachTarget(t, rlock.Options{}, func(t *testing.T, e *env, p *redistest.Proxy, k *kfTarget) {
			p.DropReply(matchScript(k.acquireScript, e.LockKey("k")))
			_, err := k.try(bg, 0)
			require.ErrorIs(t, err, rlock.ErrNotObtained, "the reply was lost: not obtained")
			require.EqualValues(t, 1, p.Fired())
			requireNothingHeld(t, e, "the hold the lost reply took was given back before the call returned")
		})
	})
	t.Run("context ends after the lost reply", func(t *testing.T) {
		eachTarget(t, rlock.Options{}, func(t *testing.T, e *env, p *redistest.Proxy, k *kfTarget) {
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			// cancel as the fault fires, before the client can learn of it
			p.DropReply(redistest.ThenCall(matchScript(k.acquireScript, e.LockKey("k")), cancel))
			_, err := k.lock(ctx)
			require.ErrorIs(t, err, context.Canceled)
			require.EqualValues(t, 1, p.Fired())
			requireNothingHeld(t, e, "the hold the lost reply took was given back before the call returned")
		})
	})
	for _, fault := range []string{"reply", "request"} {
		t.Run("blocking call, lost "+fault, func(t *testing.T) {
			eachTarget(t, rlock.Options{}, func(t *testing.T, e *env, p *redistest.Proxy, k *kfTarget) {
				match := matchScript(k.acquireScript, e.LockKey("k"))
				if fault == "request" {
					p.DropRequest(match)
				} else {
					p.DropReply(match)
				}
				h, err := k.lock(bg)
				require.NoError(t, err)
				require.EqualValues(t, 1, p.Fired(), "the fault fired")
				require.NoError(t, h.Err())
				assert.Equal(t, k.unit, k.held(t, h), "Redis counts the hold once")
				requireKeptOut(t, k, "the hold is in Redis")
				require.NoError(t, k.release(h))
				requireNothingHeld(t, e, "one release gave everything back")
			})
		})
	}
}

// A second hold through the hold context (a re-entry of a read-write mutex; a new hold of the
// semaphore) whose request or reply is lost is counted once: the release of the second hold
// leaves the first one held, and its context live.
func TestKindsFault_secondHoldWithLostRequestOrReply(t *testing.T) {
	for _, fault := range []string{"request", "reply"} {
		t.Run(fault, func(t *testing.T) {
			eachTarget(t, rlock.Options{}, func(t *testing.T, e *env, p *redistest.Proxy, k *kfTarget) {
				lock, unit := k.lock1, int64(1) // a semaphore's holds take 1 permit each: two fit
				outer, err := lock(bg)
				require.NoError(t, err)
				match := matchScript(k.acquireScript, e.LockKey("k"))
				if fault == "request" {
					p.DropRequest(match)
				} else {
					p.DropReply(match)
				}
				inner, err := lock(outer)
				require.NoError(t, err)
				require.EqualValues(t, 1, p.Fired(), "the fault fired")
				assert.Equal(t, 2*unit, k.held(t, inner), "Redis counts the second hold once")

				require.NoError(t, k.release(inner))
				assert.Equal(t, unit, k.held(t, outer), "the first hold remains")
				assert.NoError(t, outer.Err(), "the first hold context lives on")
				require.NoError(t, k.release(outer))
				assert.ErrorIs(t, context.Cause(outer), context.Canceled)
				requireNothingHeld(t, e, "both holds were released")
			})
		})
	}
}

// A release whose reply is lost is replayed under its request id: it returns nil and gives
// back exactly one hold (the semaphore: exactly its permits); a second Release of that
// semaphore hold is ErrNotHeld and gives back nothing.
func TestKindsFault_lostReleaseReply(t *testing.T) {
	eachTarget(t, rlock.Options{}, func(t *testing.T, e *env, p *redistest.Proxy, k *kfTarget) {
		var first, second context.Context
		var err error
		if k.name == "semaphore" { // 1 permit, then 2: all 3 out
			first, err = k.lock1(bg)
			require.NoError(t, err)
			second, err = k.lock(bg)
			require.NoError(t, err)
			require.EqualValues(t, kfSemPermits, k.held(t, second))
		} else { // a hold and a re-entry
			first, err = k.lock(bg)
			require.NoError(t, err)
			second, err = k.lock(first)
			require.NoError(t, err)
			require.EqualValues(t, 2, k.held(t, second))
		}
		p.DropReply(matchScript(k.releaseScript, e.LockKey("k")))
		require.NoError(t, k.release(second), "the release ran; its replay says so")
		require.EqualValues(t, 1, p.Fired(), "the fault fired")
		if k.name == "semaphore" {
			assert.EqualValues(t, 1, k.held(t, first), "the released hold's 2 permits came back, once")
			assert.ErrorIs(t, k.release(second), rlock.ErrNotHeld, "a second Release of the hold")
			assert.EqualValues(t, 1, k.held(t, first), "... gives back nothing")
		} else {
			assert.EqualValues(t, 1, k.held(t, first), "one hold released, once")
		}
		require.NoError(t, first.Err(), "the remaining hold's context lives on")
		require.NoError(t, k.release(first))
		requireNothingHeld(t, e, "everything released")
	})
}

// A release that ran but whose reply was lost, followed by an outage longer than the release's
// retries, is settled when Redis is back: the hold ends as released (not lost), and the
// caller's retried release returns nil; one more is ErrNotHeld.
func TestKindsFault_lostReleaseReplyThenOutage(t *testing.T) {
	for i, name := range kfTargetNames {
		if name == "plain/write" || name == "fair/read" {
			continue // the other three cover both modes, both kinds and the semaphore
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each waits seconds for the watchdog; they share nothing
			e := newEnv(t)
			p := e.newProxy()
			k := kfTargets(e.through(p).client(rlock.Options{WatchdogTimeout: 6 * time.Second}), e.client(rlock.Options{}), "rel")[i]
			h, err := k.lock(bg)
			require.NoError(t, err)

			p.DropReplyThenOutage(matchScript(k.releaseScript, e.LockKey("rel")), 3500*time.Millisecond)
			require.Error(t, k.release(h), "every retry failed in the outage")
			assert.Empty(t, e.Keys(), "the release had run")

			// The watchdog settles the release (its next tick after the outage), not marking it lost.
			require.Error(t, causeOf(h, 6*time.Second), "the hold context ends once settled")
			assert.ErrorIs(t, context.Cause(h), context.Canceled)
			assert.NotErrorIs(t, context.Cause(h), rlock.ErrLockLost)
			require.NoError(t, k.release(h), "the retried release returns the settled outcome")
			assert.ErrorIs(t, k.release(h), rlock.ErrNotHeld)
			requireNothingHeld(t, e, "released once")
		})
	}
}

// Replay records do not collide between clients sharing an owner id: a release of the same
// owner by another client between a lost release reply and its replay is not undone by the
// replay (read-write mutex, both modes; semaphore holds are never shared).
func TestKindsFault_sharedOwnerReplayDoesNotReleaseTwice(t *testing.T) {
	for i, name := range kfTargetNames[:4] {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			p := e.newProxy()
			a := kfTargets(e.through(p).client(rlock.Options{}), e.client(rlock.Options{}), "sh")[i]
			b := kfTargets(e.client(rlock.Options{}), e.client(rlock.Options{}), "sh")[i]
			owner := rlock.WithOwner(bg, "shared-owner")
			var holds []context.Context
			for range 3 {
				h, err := a.lock(owner)
				require.NoError(t, err)
				holds = append(holds, h)
			}
			require.EqualValues(t, 3, a.held(t, owner))
			// a's release runs, its reply is lost, and its retries wait out an outage;
			// meanwhile b (not proxied) releases one hold.
			p.DropReplyThenOutage(matchScript(a.releaseScript, e.LockKey("sh")), 300*time.Millisecond)
			done := make(chan error, 1)
			go func() { done <- a.release(holds[2]) }()
			require.Eventually(t, func() bool { n, err := b.count(owner); return p.Fired() == 1 && err == nil && n == 2 },
				time.Second, 100*time.Microsecond)
			require.NoError(t, b.release(owner))
			require.NoError(t, <-done, "the replay after the outage returns the recorded outcome")
			assert.EqualValues(t, 1, a.held(t, owner), "3 holds, 2 releases: 1 left")
			require.NoError(t, holds[0].Err())
			require.NoError(t, a.release(holds[1]))
			requireNothingHeld(t, e, "3 holds, 3 releases")
		})
	}
}

// A waiter whose connections are cut while it waits (its subscription too) still gets the lock
// soon after the holder lets go: the holder releases right after the cut, so the wake-up may be
// lost, and the waiter must notice by itself (re-subscription, the holder's lease as last seen,
// its own polling). And a waiter whose connections are cut and which then gives up leaves
// nothing behind: no queue entry, no waiting-writer entry, no subscription.
func TestKindsFault_killedConnectionWhileWaiting(t *testing.T) {
	for _, strategy := range strategies {
		t.Run(strategy.name, func(t *testing.T) { killedWhileWaiting(t, strategy.name, strategy.wait) })
	}
}

// killedWhileWaiting is TestKindsFault_killedConnectionWhileWaiting for one wait strategy.
func killedWhileWaiting(t *testing.T, strategy string, wait rlock.WaitStrategy) {
	for i, name := range kfTargetNames {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			p := e.newProxy()
			// The waiter is the subject; the holder takes the conflicting hold directly.
			k := kfTargets(e.through(p).client(rlock.Options{Wait: wait}), e.client(rlock.Options{WatchdogTimeout: time.Second}), "kw")[i]
			waitUntilWaiting := func() {
				if strategy == "spin" {
					time.Sleep(100 * time.Millisecond)
					return
				}
				require.Eventually(t, func() bool { return len(e.Channels()) == 1 }, 2*time.Second, time.Millisecond)
				time.Sleep(20 * time.Millisecond)
			}

			t.Run("acquires after the cut", func(t *testing.T) {
				other, err := k.otherTry(0)
				require.NoError(t, err)
				got := make(chan error, 1)
				var h context.Context
				go func() {
					var err error
					h, err = k.lock(bg)
					got <- err
				}()
				waitUntilWaiting()
				p.CutAll()
				time.Sleep(30 * time.Millisecond)
				p.CutAll()
				released := time.Now()
				require.NoError(t, k.otherRelease(other))
				p.CutAll()
				select {
				case err := <-got:
					require.NoError(t, err)
				case <-time.After(5 * time.Second):
					t.Fatal("the waiter did not get the lock within 5s of the release")
				}
				took := time.Since(released)
				t.Logf("acquired %v after the release", took.Round(time.Millisecond))
				assert.Less(t, took, 2*time.Second, "the waiter noticed the release (holder's lease 1s)")
				require.NoError(t, k.release(h))
			})

			t.Run("gives up after the cut", func(t *testing.T) {
				other, err := k.otherTry(0)
				require.NoError(t, err)
				got := make(chan error, 1)
				go func() {
					_, err := k.try(bg, 600*time.Millisecond)
					got <- err
				}()
				waitUntilWaiting()
				p.CutAll()
				time.Sleep(50 * time.Millisecond)
				p.CutAll()
				select {
				case err := <-got:
					require.ErrorIs(t, err, rlock.ErrNotObtained)
				case <-time.After(5 * time.Second):
					t.Fatal("the waiter's TryLock did not return within 5s")
				}
				require.NoError(t, k.otherRelease(other))
				// A waiting entry left behind would last its FairWaitTimeout (5s).
				require.Eventually(t, func() bool { return len(e.Keys()) == 0 && len(e.Channels()) == 0 },
					2*time.Second, 5*time.Millisecond, "left behind: keys %v, channels %v", e.Keys(), e.Channels())
			})
		})
	}
}

// With renewals failing for good, each hold context ends by the lease end as of its last
// successful renewal, before another owner can take what it held.
func TestKindsFault_lossSignalledByLeaseEnd(t *testing.T) {
	eachTarget(t, rlock.Options{WatchdogTimeout: 900 * time.Millisecond}, func(t *testing.T, e *env, p *redistest.Proxy, k *kfTarget) {
		h, err := k.lock(bg)
		require.NoError(t, err)
		p.Outage(5 * time.Second)
		var h2 context.Context
		for h2 == nil {
			h2, err = k.otherTry(0)
			if errors.Is(err, rlock.ErrNotObtained) {
				time.Sleep(200 * time.Microsecond)
				continue
			}
			require.NoError(t, err)
		}
		assert.Error(t, h.Err(), "the hold context ended before another owner got the lock")
		assert.ErrorIs(t, context.Cause(h), rlock.ErrLockLost)
		require.NoError(t, k.otherRelease(h2))
		e.Dirty = true // the proxied client's state may outlive the test by a moment
	})
}

// A lease that is not a whole number of milliseconds is cut to one: the hold context's
// deadline comes before the lease Redis has, so it has passed by the time another owner can
// take the lock.
func TestKindsFault_fractionalLeaseEndsInTime(t *testing.T) {
	for i, name := range kfTargetNames {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			k := kfTargets(e.client(rlock.Options{}), e.client(rlock.Options{}), "frac",
				rlock.WithLease(fractionalLease))[i]
			endsByLease(t, 30, func() (context.Context, error) { return k.lock(bg) },
				func() (context.Context, error) { return k.otherTry(0) }, k.otherRelease)
		})
	}
}

// Bad input is rejected with ErrInvalid and changes nothing: a fencing counter that is not a
// number (or cannot grow, for a write hold), or a key of the wrong type at any of a lock's keys.
func TestKindsFault_badInputChangesNothing(t *testing.T) {
	e := newEnv(t)
	c := e.client(rlock.Options{})
	for _, k := range kfRWKinds {
		for _, mode := range []string{"read", "write"} {
			for _, fence := range []string{"not-a-number", "9223372036854775807"} {
				if mode == "read" && fence != "not-a-number" {
					continue // a read hold only reads the counter
				}
				t.Run(fmt.Sprintf("%s/%s/fence %s", k.name, mode, fence), func(t *testing.T) {
					name := fmt.Sprintf("fence-%s-%s-%s", k.name, mode, fence[:3])
					key := e.LockKey(name) + ":fence"
					require.NoError(t, e.Do("SET", key, fence).Error())
					defer e.Do("DEL", key)
					rw := k.new(c, name, rlock.WithFencing())
					var err error
					if mode == "read" {
						_, err = rw.TryRLock(bg, 0)
					} else {
						_, err = rw.TryLock(bg, 0)
					}
					assert.ErrorIs(t, err, rlock.ErrInvalid)
					assert.ErrorContains(t, err, "fencing counter")
					assert.Equal(t, []string{key}, e.Keys(), "nothing but the counter")
				})
			}
		}
	}

	// The keys of each kind (design: P:{name} and these suffixes).
	layouts := []struct {
		kind string
		keys []string
	}{
		{"plain", []string{"", ":leases", ":writers"}},
		{"fair", []string{"", ":leases", ":queue", ":deadlines"}},
		{"semaphore", []string{"", ":leases", ":queue", ":deadlines"}},
	}
	for _, l := range layouts {
		for _, suffix := range l.keys {
			modes := []string{"read", "write"}
			if l.kind == "semaphore" {
				modes = []string{"acquire"}
			}
			for _, mode := range modes {
				t.Run(fmt.Sprintf("%s/%s/wrong type at %q", l.kind, mode, "P:{name}"+suffix), func(t *testing.T) {
					name := "wt-" + l.kind + strings.TrimPrefix(suffix, ":") + "-" + mode
					key := e.LockKey(name) + suffix
					require.NoError(t, e.Do("SET", key, "x").Error())
					defer e.Do("DEL", key)
					var err error
					switch {
					case l.kind == "semaphore":
						_, err = c.NewSemaphore(name, kfSemPermits).TryAcquire(bg, 1, 0)
					default:
						rw := c.NewRWMutex(name)
						if l.kind == "fair" {
							rw = c.NewFairRWMutex(name)
						}
						if mode == "read" {
							_, err = rw.TryRLock(bg, 0)
						} else {
							_, err = rw.TryLock(bg, 0)
						}
					}
					assert.ErrorIs(t, err, rlock.ErrInvalid)
					assert.Equal(t, []string{key}, e.Keys(), "no other key was written")
					v, err := e.Do("GET", key).ToString()
					require.NoError(t, err)
					assert.Equal(t, "x", v, "the foreign key is untouched")
				})
			}
		}
	}
}
