package rlock

import (
	"context"
	"time"

	"github.com/rlock-go/rlock/internal/wire"
)

// A fair mutex hands the lock out in the order waiters arrived. Beside the lock hash it keeps
// a queue (list) of waiting owners and their deadlines (sorted set), all changed only by the
// fair_*.lua scripts:
//
//   - A waiter joins the queue with its first attempt and refreshes its deadline (server time
//     plus FairWaitTimeout) with every later attempt, at least every third of the timeout, so a
//     live waiter never loses its place however long it waits. A waiter that stops polling
//     (crashed, partitioned) is purged from wherever it stands once its deadline passes, so it
//     delays the others by at most FairWaitTimeout plus one poll. Redisson instead lets a dead
//     waiter stall the queue for its threadWaitTime (5 minutes), and purges only the head.
//   - The lock is taken only by the head of the queue (or anyone, when nobody waits); a
//     single-attempt TryLock never joins, so it fails while others wait even if the lock is
//     momentarily free.
//   - Direct handoff: the last release grants the lock to the first live waiter itself (hash
//     field "\1g" names the request it was granted to) and tells it so in a message addressed
//     to its owner on the lock's one channel; the waiter returns without another round trip.
//     The other waiters sleep until their refresh, so wake-ups and commands per acquisition do
//     not grow with the number of waiters. A grant's lease is a claim of at most
//     FairWaitTimeout (see lock.claimFor), which the watchdog extends to the full lease soon
//     after, so a grant to a waiter that is gone holds the lock no longer than its place would
//     have. A waiter that misses the message finds the grant at its next attempt; the head also
//     wakes at the holder's lease end, which publishes nothing.
//   - A waiter that gives up (cancelled, timed out, client closed) removes its entry before
//     returning, gives back a grant it did not learn of, and hands a free lock to the next
//     head.

// NewFairMutex returns the fair mutex called name: the same API and options as
// [Client.NewMutex] (reentrancy, leases, watchdog, loss, fencing), but waiters acquire it in
// arrival order. It does not touch Redis; invalid arguments are reported by every method.
// All mutexes of one name must be fair, or none.
func (c *Client) NewFairMutex(name string, opts ...MutexOption) *Mutex {
	m := new(Mutex)
	c.bind(&m.locker, KindFairMutex, name, newFairMutexKind, opts)
	return m
}

// fairMutexKind is the fair Mutex: the hash of a plain Mutex, a queue and deadlines.
type fairMutexKind struct {
	lk                                             *lock
	acquireKeys, releaseKeys, leaveKeys, renewKeys []string // each script's KEYS
}

func newFairMutexKind(h *locker) kind {
	k := h.keys
	return &fairMutexKind{lk: &h.lock, acquireKeys: k.FairAcquire(), releaseKeys: k.FairRelease(),
		leaveKeys: k.FairLeave(), renewKeys: k.Renew(false)}
}

func (*fairMutexKind) name() string { return KindFairMutex }

func (*fairMutexKind) style(access) waitStyle {
	return waitStyle{wake: wakeAddressed, queued: true, checks: true}
}

func (k *fairMutexKind) acquire(ctx context.Context, r request) (attempt, error) {
	lk := k.lk
	a := attempt{sent: time.Now()}
	reply, err := wire.FairAcquire.Ints(lk.core.eval(ctx, r.conn, wire.FairAcquire, k.acquireKeys, wire.FairAcquireArgs{
		Owner: r.owner, LeaseMs: lk.leaseMs, Request: r.id, Mode: modeArg[r.mode], Fencing: lk.fencing,
		FairWaitMs: lk.core.fairWaitMs, Join: r.join, ClaimMs: lk.claimMs, Label: r.label}.Strings()))
	if err != nil {
		return a, lk.redisErr("acquire", err)
	}
	return lk.parseAttempt(a, reply)
}

func (k *fairMutexKind) release(ctx context.Context, owner string, _ access, req string) (releaseReply, error) {
	c := k.lk.core
	r, err := wire.FairRelease.Ints(c.variant(wire.FairRelease).Exec(ctx, c.rc, k.releaseKeys,
		wire.FairReleaseArgs{Owner: owner, Request: req}.Strings()))
	if err != nil {
		return releaseReply{}, err
	}
	return parseReleased(wire.ParseRelease(r))
}

func (k *fairMutexKind) dequeue(ctx context.Context, r request) error {
	lk := k.lk
	return lk.core.variant(wire.FairLeave).Exec(ctx, lk.core.rc, k.leaveKeys,
		wire.FairLeaveArgs{Owner: r.owner, Request: r.id, ClaimMs: lk.claimMs, Fencing: lk.fencing,
			Label: r.label}.Strings()).Error()
}

func (k *fairMutexKind) renewal() (wire.Script, []string) { return wire.Renew, k.renewKeys }

func (*fairMutexKind) renewOwner(owner string, _ access) string { return owner }

func (*fairMutexKind) checkKind() string { return wire.CheckMutex }

func (k *fairMutexKind) force() (wire.Script, []string, []string) {
	return wire.ForceUnlock, k.lk.keys.ForceUnlock(true),
		wire.ForceUnlockArgs{Message: wire.AddressedPrefix, Fair: true}.Strings()
}
