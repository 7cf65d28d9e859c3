package rlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock/internal/wire"
)

// MultiLock holds several Mutexes of one Client as one: every member or none. Members that
// live in one hash slot (all of them off a Cluster; on a Cluster, names that share a {tag})
// form a group, taken and released by one script (internal/wire/lua/multi_*.lua), so no other
// client sees some of them taken and the others not. Groups are taken in one order that every
// client computes alike, by slot and then name, holding the earlier groups while a set waits
// for a later one: sets over overlapping members never wait for each other in a cycle. Each
// member keeps its own keys, lease, fencing and wait strategy, so a set and a single Mutex on
// one name exclude each other, and a set waits in a fair member's queue as its other waiters
// do. It holds only the members, so it is safe to share between goroutines. Create one with
// [Client.NewMultiLock].
type MultiLock struct {
	c       *Client
	members []*Mutex       // in the order they are taken (see order)
	fair    []bool         // per member: a fair Mutex
	groups  []lockGroup    // runs of members in one hash slot, in order
	index   map[string]int // a member's index by its lock key
	err     error          // invalid members: returned by every call
}

// lockGroup is a run of a MultiLock's members that live in one hash slot: what one group script
// takes.
type lockGroup struct {
	from, to int      // its members: members[from:to]
	keys     []string // their keys, as the group scripts take them (wire.Keys.Member)
	specs    []string // their wire.MemberSpec, in order
}

// maxMembers is the most members a MultiLock takes.
const maxMembers = 1000

// NewMultiLock returns the MultiLock of members: Mutexes of c, plain or fair, each with its
// own options. It does not touch Redis. No member, more than 1,000, a nil member, a member
// given twice (two Mutexes of one name count as one), a member of another Client or an invalid
// member are reported by every method of the returned MultiLock as an error wrapping
// [ErrInvalid].
func (c *Client) NewMultiLock(members ...*Mutex) *MultiLock {
	ml := &MultiLock{c: c, members: slices.Clone(members)}
	ml.err = ml.init()
	return ml
}

// init checks the members, puts them in order and makes the groups.
func (ml *MultiLock) init() error {
	ms := ml.members
	switch {
	case len(ms) == 0:
		return fmt.Errorf("multilock: %w", invalidf("no member"))
	case len(ms) > maxMembers:
		return fmt.Errorf("multilock: %w", invalidf("%d members, more than %d", len(ms), maxMembers))
	}
	for i, m := range ms {
		switch {
		case m == nil:
			return fmt.Errorf("multilock: %w", invalidf("member %d is nil", i))
		case m.err != nil:
			return fmt.Errorf("multilock: member: %w", m.err)
		case m.c != ml.c:
			return fmt.Errorf("multilock: %w", invalidf("mutex %q is a member of another Client", m.name))
		}
	}
	ml.order()
	ml.index = make(map[string]int, len(ms))
	ml.fair = make([]bool, len(ms))
	for i, m := range ms {
		if _, twice := ml.index[m.keys.Lock]; twice {
			return fmt.Errorf("multilock: %w", invalidf("mutex %q given twice", m.name))
		}
		ml.index[m.keys.Lock] = i
		ml.fair[i] = m.kind.name() == KindFairMutex
		if i == 0 || ml.c.slotOf(m.keys.Lock) != ml.c.slotOf(ms[i-1].keys.Lock) {
			ml.groups = append(ml.groups, lockGroup{from: i})
		}
		g := &ml.groups[len(ml.groups)-1]
		g.to = i + 1
		g.keys = append(g.keys, m.keys.Member()...)
		g.specs = append(g.specs, wire.MemberSpec(m.leaseMs, ml.fair[i], m.fencing))
	}
	return nil
}

// order sorts the members in the order every client takes them: by hash slot on a Cluster,
// then by name.
func (ml *MultiLock) order() {
	c := ml.c
	slices.SortStableFunc(ml.members, func(a, b *Mutex) int {
		if d := cmp.Compare(c.slotOf(a.keys.Lock), c.slotOf(b.keys.Lock)); d != 0 {
			return d
		}
		return strings.Compare(a.name, b.name)
	})
}

// Names returns the members' names in the order they are taken: by hash slot on a Cluster (all
// in one slot elsewhere), then by name. It does not block.
func (ml *MultiLock) Names() []string {
	names := make([]string, len(ml.members))
	for i, m := range ml.members {
		if m != nil {
			names[i] = m.name
		}
	}
	return names
}

// Lock acquires every member for the owner in ctx, or for a fresh owner if ctx carries none,
// blocking until all are held, ctx is done, or the Client is closed. The members of a group
// (one hash slot) are taken at once or not at all; uncontended, every group is tried at once,
// one round trip per node. While a group is held by others the set holds the groups before it
// and waits: on the member that blocks it (in that member's queue if it is fair, with its
// member's wait strategy), never giving up what it holds because of another set. A member the
// owner holds already is re-entered (its lease never shortened). It returns one hold context,
// derived from ctx and carrying the owner, that carries a hold of every member: each member's
// [Mutex.HoldCount], [Mutex.Token] and [Mutex.Unlock] accept it. It is cancelled with cause
// [ErrLockLost] as soon as any member's hold is lost (and never looks live past the earliest
// member's lease end; see [Mutex.Lock]), and the library then gives the other members back at
// once; it is cancelled with [context.Canceled] once Unlock has released them. On error the
// context is nil and nothing is held, nor left in Redis: ctx's error, [ErrClosed], an error
// wrapping [ErrInvalid] or [ErrNotReplicated], or a Redis error reply. Transport errors while
// waiting are retried; an attempt whose reply was lost is resolved, and given back if it took
// the group.
func (ml *MultiLock) Lock(ctx context.Context) (context.Context, error) {
	return ml.acquire(ctx, false, 0)
}

// TryLock is [MultiLock.Lock] that gives up after wait in all (not per member) with
// [ErrNotObtained]; wait 0 makes a single attempt of every group. Giving up gives back every
// member it took and leaves every queue it waited in: nothing is left in Redis.
func (ml *MultiLock) TryLock(ctx context.Context, wait time.Duration) (context.Context, error) {
	return ml.acquire(ctx, true, wait)
}

// Unlock releases one hold of every member for the owner in ctx, each group in one script,
// all groups in one round trip per node. Given the hold context of a Lock, it releases that
// Lock's holds once: a retry (also after an error whose outcome was unknown) never releases a
// member twice, and a second Unlock returns [ErrNotHeld]. Given a context that carries only
// an owner ([WithOwner]), it releases one hold of each member that owner holds. It ignores
// ctx's cancellation for the release, retrying transport errors for a few seconds as
// [Mutex.Unlock] does. Errors: [ErrNotHeld] when the owner holds none of the members (Redis
// untouched for members whose loss was seen); [ErrLockLost] when a member was lost (the
// members still held are released); [ErrClosed]; or a transport or Redis error, after which
// each member's hold is unchanged or released, settled as [Mutex.Unlock] settles one. The
// members' hold records end as Mutex.Unlock ends them.
func (ml *MultiLock) Unlock(ctx context.Context) error {
	if err := ml.check(ctx); err != nil {
		return err
	}
	owner, ok, err := ml.callerOwner(ctx)
	if err != nil {
		return err
	} else if !ok {
		return ml.errorf("%w: the context carries no owner; pass the context that Lock returned", ErrNotHeld)
	}
	s := heldSet(ctx, ml)
	if s != nil && s.owner != owner {
		s = nil // a hold context of another owner, re-labelled with WithOwner
	}
	all := make([]int, len(ml.members))
	for i := range all {
		all[i] = i
	}
	out := ml.release(detach(ctx), owner, s, all)
	lost, notHeld := s != nil && s.lost.Load(), 0
	for _, err := range out {
		switch {
		case err == nil:
		case errors.Is(err, ErrLockLost):
			lost = true
		case errors.Is(err, ErrNotHeld):
			notHeld++
		default:
			return err
		}
	}
	switch {
	case lost:
		return ml.errorf("%w", ErrLockLost)
	case notHeld == len(out):
		return ml.errorf("%w", ErrNotHeld)
	}
	return nil
}

// check returns the error every call must return before doing anything, or nil.
func (ml *MultiLock) check(ctx context.Context) error {
	if ml.err != nil {
		return ml.err
	}
	if ml.c.closed.Load() {
		return ErrClosed
	}
	if ctx == nil {
		return ml.errorf("%w", invalidf("nil context"))
	}
	return nil
}

// callerOwner returns the owner ctx carries, validated, and whether it carries one.
func (ml *MultiLock) callerOwner(ctx context.Context) (string, bool, error) {
	owner, ok := Owner(ctx)
	if !ok {
		return "", false, nil
	}
	if err := validateOwner(owner); err != nil {
		return "", false, ml.errorf("%w", err)
	}
	return owner, true, nil
}

// errorf returns an error naming the set (its first members).
func (ml *MultiLock) errorf(format string, args ...any) error {
	names := ml.Names()
	label := fmt.Sprintf("%q", names)
	if len(names) > 3 {
		label = fmt.Sprintf("%q ... (%d members)", names[:3], len(names))
	}
	return fmt.Errorf("multilock %s: "+format, append([]any{label}, args...)...)
}

// redisErr wraps an error from Redis with the operation, as lock.redisErr does; a member key of
// the wrong type, a member of another kind, or a bad fencing counter becomes an error wrapping
// ErrInvalid.
func (ml *MultiLock) redisErr(op string, err error) error {
	if re, ok := rueidis.IsRedisErr(err); ok {
		msg := re.Error()
		switch {
		case strings.Contains(msg, "WRONGTYPE"):
			return ml.errorf("%w", invalidf("a key of a member holds a value that is not a lock of this library, "+
				"or a lock of another kind than a mutex"))
		case strings.Contains(msg, "reached 2^53"):
			return ml.errorf("%w", invalidf("a member's fencing counter reached 2^53: a new token could not be kept exact"))
		case strings.Contains(msg, "not an integer") || strings.Contains(msg, "overflow"):
			return ml.errorf("%w", invalidf("a member's fencing counter is not an integer from -2^53 to 2^53"))
		}
	}
	return ml.errorf("%s: %w", op, err)
}
