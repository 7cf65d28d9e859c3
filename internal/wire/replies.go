package wire

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// Each script's reply as a Go value. The Parse functions read a reply of the shape the
// script's header states; a reply of another shape is ErrBadReply. They do not allocate,
// except ParseState and on errors.

// ErrBadReply is a script reply of an unexpected shape.
var ErrBadReply = errors.New("unexpected reply from Redis")

// ErrReadHoldsOnly is rw_acquire.lua's {-1}: an owner that holds the lock only for reading
// asked to write, which would wait for itself. Nothing was written.
var ErrReadHoldsOnly = errors.New("the owner holds the lock only for reading")

// PermitsError is the {-3, stored} reply of sem_acquire.lua and sem_inspect.lua: the
// semaphore is in use with Stored permits, not the caller's count. Nothing was written.
type PermitsError struct{ Stored int64 }

func (e PermitsError) Error() string {
	return fmt.Sprintf("the semaphore is in use with %d permits", e.Stored)
}

// Attempt is the reply of an acquire script (acquire.lua, fair_acquire.lua, rw_acquire.lua,
// sem_acquire.lua).
type Attempt struct {
	Acquired bool
	Count    int64 // acquired: the owner's hold count in that access
	Token    int64 // acquired: the hold's fencing token (0 without fencing)
	// Claim, acquired: what is left of the lease of a hold a release granted this request
	// (direct handoff), at least 1ms; 0: not a grant (the hold has the lock's lease).
	Claim time.Duration
	// PTTL, not acquired: how long the holder may keep the lock; 0 when it is free but another
	// waiter is ahead (or left to the waiters), -1 for no end.
	PTTL   time.Duration
	Head   bool // not acquired, queued: the caller is next
	Joined bool // not acquired, queued: this attempt put the caller's entry in the queue
}

// ParseAttempt reads an acquire script's reply: {1, count, token} when acquired, {1, count,
// token, claim ms} when a release granted it to the request, {0, pttl, head[, joined]} when not
// (pttl -1: no expiry, -2: free but another waiter is ahead). The sentinels {-1} and {-3,
// stored} are ErrReadHoldsOnly and a PermitsError.
func ParseAttempt(reply []int64) (Attempt, error) {
	var a Attempt
	switch {
	case len(reply) >= 3 && reply[0] == 1:
		a.Acquired, a.Count, a.Token = true, reply[1], reply[2]
		if len(reply) == 4 && reply[3] >= 0 {
			// 0 would read as no claim, a full lease, for a grant in its last millisecond.
			a.Claim = max(time.Duration(reply[3])*time.Millisecond, time.Millisecond)
		}
		return a, nil
	case len(reply) == 1 && reply[0] == -1:
		return a, ErrReadHoldsOnly
	case len(reply) == 2 && reply[0] == -3:
		return a, PermitsError{Stored: reply[1]}
	case len(reply) < 2 || reply[0] != 0:
		return a, ErrBadReply
	}
	switch a.PTTL = time.Duration(reply[1]) * time.Millisecond; {
	case reply[1] == -2:
		a.PTTL = 0
	case reply[1] < 0:
		a.PTTL = -1
	}
	a.Head = len(reply) >= 3 && reply[2] == 1
	a.Joined = len(reply) >= 4 && reply[3] == 1
	return a, nil
}

// Released is the reply of a release script.
type Released struct {
	Left  int64 // the owner's remaining holds in that access; -1: it held none
	Woken int64 // clients the release message reached
	Total int64 // its remaining holds in every access
}

// ParseRelease reads the {left, woken} reply of release.lua, fair_release.lua and
// sem_release.lua (a semaphore's left: 0 released, -1 no such hold).
func ParseRelease(reply []int64) (Released, error) {
	if len(reply) != 2 {
		return Released{}, ErrBadReply
	}
	return Released{Left: reply[0], Woken: reply[1], Total: reply[0]}, nil
}

// ParseRWRelease reads rw_release.lua's {left, woken, total} reply.
func ParseRWRelease(reply []int64) (Released, error) {
	if len(reply) != 3 {
		return Released{}, ErrBadReply
	}
	return Released{Left: reply[0], Woken: reply[1], Total: reply[2]}, nil
}

// Inspection is inspect.lua's reply.
type Inspection struct {
	Held  bool
	Count int64         // the asked owner's hold count
	PTTL  time.Duration // the hash's: -2ms no key, -1ms no expiry
}

// ParseInspect reads inspect.lua's {held, count, pttl ms} reply.
func ParseInspect(reply []int64) (Inspection, error) {
	if len(reply) != 3 {
		return Inspection{}, ErrBadReply
	}
	return Inspection{Held: reply[0] > 0, Count: reply[1], PTTL: time.Duration(reply[2]) * time.Millisecond}, nil
}

// RWInspection is rw_inspect.lua's reply, counting only holds whose lease has not ended.
type RWInspection struct {
	Writer  bool  // an owner holds it for writing
	Readers int64 // owners holding it for reading
	Read    int64 // the asked owner's read holds
	Write   int64 // the asked owner's write holds
}

// ParseRWInspect reads rw_inspect.lua's {writer, readers, read, write} reply.
func ParseRWInspect(reply []int64) (RWInspection, error) {
	if len(reply) != 4 {
		return RWInspection{}, ErrBadReply
	}
	return RWInspection{Writer: reply[0] == 1, Readers: reply[1], Read: reply[2], Write: reply[3]}, nil
}

// ParseSemInspect reads sem_inspect.lua's reply: the permits not held, or a PermitsError.
func ParseSemInspect(reply []int64) (free int64, err error) {
	switch {
	case len(reply) != 2:
		return 0, ErrBadReply
	case reply[0] == -3:
		return 0, PermitsError{Stored: reply[1]}
	}
	return reply[1], nil
}

// PerHold is the reply of the scripts that take many holds at once (renew.lua, rw_renew.lua,
// sem_renew.lua, check.lua): an entry per hold, in the order the call gave them.
type PerHold []int64

// ParsePerHold reads a per-hold reply for n holds. It does not allocate.
func ParsePerHold(reply []int64, n int) (PerHold, error) {
	if len(reply) != n {
		return nil, ErrBadReply
	}
	return PerHold(reply), nil
}

// Held reports whether hold i is still held: renewed (the renew scripts), or still there with
// its lease not ended (check.lua).
func (p PerHold) Held(i int) bool { return p[i] == 1 }

// ParseForced reads the 1 or 0 reply of forceunlock.lua, rw_forceunlock.lua and
// sem_forcerelease.lua: whether there was anything to end.
func ParseForced(reply int64) (bool, error) {
	switch reply {
	case 0, 1:
		return reply == 1, nil
	}
	return false, ErrBadReply
}

// StateReply is state.lua's reply.
type StateReply struct {
	Kind    string // as the caller gave it, or told from the keys ("" for none)
	Token   int64  // the fencing counter (0 without one)
	Permits int64  // the semaphore's stored permit count (0 if none)
	Holders []StateHolder
	Waiters []StateWaiter // in serving order
}

// StateHolder is one holder in a StateReply.
type StateHolder struct {
	Owner string
	Count int64
	Mode  string        // "write", "read" or ""
	Lease time.Duration // left; -1 for a mutex hash without expiry
	Label string        // "" for none
	Since time.Duration // how long the labelled hold has been held; 0: unlabelled
}

// StateWaiter is one waiter in a StateReply.
type StateWaiter struct {
	Owner    string
	Mode     string
	Permits  int64
	Deadline time.Duration // until its place lapses
	Label    string        // "" for none
}

// ErrBadCounter is a fencing counter that is not an integer from -2^53 to 2^53 (see MaxExact;
// state.lua reads it as it is).
var ErrBadCounter = errors.New("fencing counter is not an integer from -2^53 to 2^53")

// ParseState reads state.lua's reply: {kind, fencing counter, permits, holders as {owner,
// count, mode, lease ms, label, since ms}..., waiters as {owner, mode, permits, deadline ms,
// label}...}.
func ParseState(reply []rueidis.RedisMessage) (StateReply, error) {
	if len(reply) != 5 {
		return StateReply{}, ErrBadReply
	}
	var st StateReply
	var tok string
	var holders, waiters []rueidis.RedisMessage
	var err error
	if st.Kind, err = reply[0].ToString(); err != nil {
		return StateReply{}, ErrBadReply
	}
	if tok, err = reply[1].ToString(); err != nil {
		return StateReply{}, ErrBadReply
	}
	if st.Token, err = strconv.ParseInt(tok, 10, 64); err != nil || st.Token > MaxExact || st.Token < -MaxExact {
		return StateReply{}, ErrBadCounter
	}
	if st.Permits, err = reply[2].AsInt64(); err != nil {
		return StateReply{}, ErrBadReply
	}
	if holders, err = reply[3].ToArray(); err != nil || len(holders)%6 != 0 {
		return StateReply{}, ErrBadReply
	}
	if waiters, err = reply[4].ToArray(); err != nil || len(waiters)%5 != 0 {
		return StateReply{}, ErrBadReply
	}
	for i := 0; i < len(holders); i += 6 {
		owner, err1 := holders[i].ToString()
		count, err2 := holders[i+1].AsInt64()
		mode, err3 := holders[i+2].ToString()
		ms, err4 := holders[i+3].AsInt64()
		label, err5 := holders[i+4].ToString()
		since, err6 := holders[i+5].AsInt64()
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil || err5 != nil || err6 != nil {
			return StateReply{}, ErrBadReply
		}
		lease := time.Duration(ms) * time.Millisecond
		if ms < 0 {
			lease = -1
		}
		st.Holders = append(st.Holders, StateHolder{Owner: owner, Count: count, Mode: mode, Lease: lease, Label: label,
			Since: time.Duration(since) * time.Millisecond})
	}
	for i := 0; i < len(waiters); i += 5 {
		owner, err1 := waiters[i].ToString()
		mode, err2 := waiters[i+1].ToString()
		permits, err3 := waiters[i+2].AsInt64()
		ms, err4 := waiters[i+3].AsInt64()
		label, err5 := waiters[i+4].ToString()
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil || err5 != nil {
			return StateReply{}, ErrBadReply
		}
		st.Waiters = append(st.Waiters, StateWaiter{Owner: owner, Mode: mode, Permits: permits,
			Deadline: time.Duration(ms) * time.Millisecond, Label: label})
	}
	return st, nil
}

// MultiAttempt is multi_acquire.lua's reply. It reads the reply in place.
type MultiAttempt struct {
	Acquired bool
	// Blocked, not acquired: the index (from 0) of the first member that keeps the set out;
	// -1 for a request that has not run (mode Resolve).
	Blocked int
	// PTTL, not acquired: how long the blocking member's holder may keep it; 0 when it is free
	// but another waiter is ahead of the set, -1 for no end.
	PTTL  time.Duration
	Head  bool    // not acquired: the set heads the blocking member's queue
	holds []int64 // acquired: count and token of each member
}

// Count returns member i's hold count (acquired); 0 for a member whose hold has gone since a
// replayed request ran.
func (a MultiAttempt) Count(i int) int64 { return a.holds[2*i] }

// Token returns member i's fencing token (acquired; 0 without fencing).
func (a MultiAttempt) Token(i int) int64 { return a.holds[2*i+1] }

// Held reports whether each of the n members reads a hold (acquired): false only for a
// replayed request whose hold of a member has gone since.
func (a MultiAttempt) Held(n int) bool {
	for i := 0; i < n; i++ {
		if a.Count(i) <= 0 {
			return false
		}
	}
	return true
}

// New reports whether one of the n members' holds is new (acquired, count 1): a hold that
// replicas must acknowledge (SyncReplicas), where a re-entry need not be.
func (a MultiAttempt) New(n int) bool {
	for i := 0; i < n; i++ {
		if a.Count(i) == 1 {
			return true
		}
	}
	return false
}

// ParseMultiAttempt reads multi_acquire.lua's reply for n members: {1, count, token per
// member} when acquired, {0, index from 1, pttl, head} when not (index 0: the request has not
// run). It does not allocate.
func ParseMultiAttempt(reply []int64, n int) (MultiAttempt, error) {
	switch {
	case len(reply) == 1+2*n && reply[0] == 1:
		return MultiAttempt{Acquired: true, Blocked: -1, holds: reply[1:]}, nil
	case len(reply) != 4 || reply[0] != 0 || reply[1] < 0 || reply[1] > int64(n):
		return MultiAttempt{}, ErrBadReply
	}
	a := MultiAttempt{Blocked: int(reply[1]) - 1, PTTL: time.Duration(reply[2]) * time.Millisecond, Head: reply[3] == 1}
	switch {
	case reply[2] == -2:
		a.PTTL = 0
	case reply[2] < 0:
		a.PTTL = -1
	}
	return a, nil
}

// MultiReleased is multi_release.lua's reply: an entry per member. It reads the reply in place.
type MultiReleased []int64

// ParseMultiRelease reads multi_release.lua's {left, woken per member} reply for n members.
// It does not allocate.
func ParseMultiRelease(reply []int64, n int) (MultiReleased, error) {
	if len(reply) != 2*n {
		return nil, ErrBadReply
	}
	return MultiReleased(reply), nil
}

// Left returns member i's remaining hold count: -1 when the owner held none.
func (r MultiReleased) Left(i int) int64 { return r[2*i] }

// Woken returns the clients member i's release message reached.
func (r MultiReleased) Woken(i int) int64 { return r[2*i+1] }

// TermCheck is the reply of el_resign.lua and el_proclaim.lua.
type TermCheck struct {
	Current bool  // the term was the current one, and the script acted
	Told    int64 // current: the clients its message reached
	Term    int64 // not current: the current term (0: nobody leads)
}

// ParseTermCheck reads el_resign.lua's and el_proclaim.lua's reply: {1, told} or {0, term}.
func ParseTermCheck(reply []int64) (TermCheck, error) {
	switch {
	case len(reply) != 2 || reply[0] != 0 && reply[0] != 1:
		return TermCheck{}, ErrBadReply
	case reply[0] == 1:
		return TermCheck{Current: true, Told: reply[1]}, nil
	}
	return TermCheck{Term: reply[1]}, nil
}

// Leadership is el_leader.lua's reply.
type Leadership struct {
	Term  int64         // 0: nobody leads
	Lease time.Duration // the leader's lease left; -1 for a hash without expiry
	Value string
}

// ParseLeadership reads el_leader.lua's {term, lease ms, value} reply.
func ParseLeadership(reply []rueidis.RedisMessage) (Leadership, error) {
	if len(reply) != 3 {
		return Leadership{}, ErrBadReply
	}
	term, err1 := reply[0].AsInt64()
	ms, err2 := reply[1].AsInt64()
	value, err3 := reply[2].ToString()
	if err1 != nil || err2 != nil || err3 != nil {
		return Leadership{}, ErrBadReply
	}
	l := Leadership{Term: term, Lease: time.Duration(ms) * time.Millisecond, Value: value}
	if ms < 0 {
		l.Lease = -1
	}
	return l, nil
}
