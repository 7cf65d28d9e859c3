package rlock

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock/internal/wire"
)

// State is who holds a lock and who waits for it, as Redis had it at one instant of its clock.
// Read it with [Mutex.State], [RWMutex.State], [Semaphore.State] or [Client.State].
type State struct {
	Name    string   // the lock's name
	Kind    string   // KindMutex, KindFairMutex, KindRWMutex, KindFairRWMutex, KindSemaphore or KindElection
	Holders []Holder // in no particular order; empty when free; lapsed holds are not listed
	Waiters []Waiter // waiters that hold a place, in the order they will be served
	Token   int64    // last fencing token handed out for this name; 0: none
	// Permits is a Semaphore's permit count as Redis stores it while the semaphore is in use
	// (held or waited for); 0 for the other kinds, and for a semaphore nobody uses.
	Permits int64
}

// Holder is one hold of a lock in a [State].
type Holder struct {
	Owner string        // the owner id (a Semaphore hold: the hold id its hold context carries)
	Count int           // hold count (a Semaphore: permits held)
	Mode  string        // "write", "read", or "" for a Mutex or Semaphore
	Lease time.Duration // lease left in Redis (server time), > 0; -1 for a mutex key without expiry (never made by rlock)
	Label string        // the label the hold was taken with (WithLabel); "" if none
	// Since is how long the owner has held it without a gap (server time), from its first
	// labelled hold: re-entries do not reset it; 0 if unlabelled.
	Since time.Duration
}

// Waiter is one waiter that holds a place in a [State].
type Waiter struct {
	Owner    string        // the owner id (a Semaphore waiter: the id its hold will have)
	Mode     string        // as Holder.Mode
	Permits  int64         // a Semaphore waiter's request; 0 otherwise
	Deadline time.Duration // how long until this waiter loses its place if it stops polling
	Label    string        // the label the waiter waits with (WithLabel); "" if none
}

// State returns who holds m and who waits for it (a fair mutex's queue; a plain Mutex lists
// no waiters), in one read-only round trip bounded by ctx, which also works on a replica and
// changes nothing in Redis. Kind is the kind m was made as. Errors: [ErrClosed], an error
// wrapping [ErrInvalid] (an invalid name, or a key of another type or lock kind at the name),
// or a Redis or transport error.
func (m *Mutex) State(ctx context.Context) (State, error) { return m.state(ctx) }

// State returns who holds rw, one [Holder] per owner and mode (an owner holding both modes is
// two), and who waits: the fair queue, or for a plain RWMutex the writers that hold new readers
// back. It is otherwise [Mutex.State].
func (rw *RWMutex) State(ctx context.Context) (State, error) { return rw.state(ctx) }

// State returns the holds of s (Owner: the hold id; Count: its permits) and its queue (each
// waiter's Permits), as [Mutex.State] does. A semaphore in use with another permit count than
// s has is an error wrapping [ErrInvalid], as for [Semaphore.Available].
func (s *Semaphore) State(ctx context.Context) (State, error) {
	st, err := s.state(ctx)
	if err == nil && st.Permits != s.permits && (len(st.Holders) > 0 || len(st.Waiters) > 0) {
		return State{}, s.sem.permitsErr(st.Permits)
	}
	return st, err
}

// State returns the state of the lock called name, whatever its kind, which it tells from the
// keys Redis has: [Mutex.State] of the kind found, in one read-only round trip bounded by ctx.
// A fair kind shows as fair only while its queue exists (a free fair lock, or a held one that
// nobody waits for, shows as the plain kind), and a free name gives Kind "". Errors:
// [ErrClosed], an error wrapping [ErrInvalid] (an invalid name, or keys that are not a lock of
// this library), or a Redis or transport error.
func (c *Client) State(ctx context.Context, name string) (State, error) {
	if err := checkName(name); err != nil {
		return State{}, fmt.Errorf("lock %q: %w", name, err)
	}
	if c.closed.Load() {
		return State{}, ErrClosed
	}
	if ctx == nil {
		return State{}, fmt.Errorf("lock %q: %w", name, invalidf("nil context"))
	}
	keys := wire.NewKeys(c.opts.KeyPrefix, name)
	st, err := c.readState(ctx, keys, "")
	if err != nil {
		if re, ok := rueidis.IsRedisErr(err); ok && strings.Contains(re.Error(), "WRONGTYPE") {
			err = invalidf("a key of this lock (%s*) holds a value that is not a lock of this library", keys.Lock)
		}
		return State{}, fmt.Errorf("lock %q: %w", name, err)
	}
	st.Name = name
	return st, nil
}

// state is State for every kind: the script reads the keys as lk's kind has them.
func (lk *lock) state(ctx context.Context) (State, error) {
	if err := lk.check(ctx); err != nil {
		return State{}, err
	}
	st, err := lk.core.readState(ctx, lk.keys, lk.kind.name())
	if err != nil {
		return State{}, lk.redisErr("state", err)
	}
	st.Name = lk.name
	return st, nil
}

// readState runs internal/wire/lua/state.lua for the lock of keys, read as kind (a Kind
// constant; "": tell it from the keys), and decodes its reply (see wire.ParseState).
func (c *core) readState(ctx context.Context, keys wire.Keys, kind string) (State, error) {
	var reply []rueidis.RedisMessage
	if err := c.read(ctx, func(ctx context.Context) (err error) {
		reply, err = c.variant(wire.ReadState).Exec(ctx, c.rc, keys.State(), wire.StateArgs{Kind: kind}.Strings()).ToArray()
		return err
	}); err != nil {
		return State{}, err
	}
	r, err := wire.ParseState(reply)
	switch {
	case err == wire.ErrBadCounter:
		return State{}, invalidf("fencing counter %q is not an integer from -2^53 to 2^53", keys.Fence)
	case err != nil:
		return State{}, badReply(err)
	}
	st := State{Kind: r.Kind, Token: r.Token, Permits: r.Permits}
	for _, h := range r.Holders {
		st.Holders = append(st.Holders, Holder{Owner: h.Owner, Count: int(h.Count), Mode: h.Mode, Lease: h.Lease,
			Label: h.Label, Since: h.Since})
	}
	for _, w := range r.Waiters {
		st.Waiters = append(st.Waiters, Waiter{Owner: w.Owner, Mode: w.Mode, Permits: w.Permits, Deadline: w.Deadline,
			Label: w.Label})
	}
	return st, nil
}
