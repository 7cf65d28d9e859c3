package wire

import (
	"strconv"
	"strings"
	"time"
)

// Messages on a lock's channel (Keys.Channel). The scripts publish three kinds, and
// ParseMessage tells them apart:
//
//   - "@<address>": for the one queued waiter at address (fair kinds and semaphores: its
//     owner, "<r|w>:<owner>" for a fair RWMutex, a semaphore hold's id), woken to try itself
//     (queue.lua handOver, leases.lua grantPermits and grantRW, forceunlock.lua).
//   - "@<address>\0<request id>\0<fencing token>\0<claim ms>": a grant (direct handoff): the
//     release gave the lock to that waiter's request, with that token and a lease of claim ms
//     from when the script ran (queue.lua grantMessage, where the scripts build it).
//   - ReadersMessage "*": every waiting reader of a client, and one other waiter
//     (rw_release.lua, rw_leave.lua, rw_forceunlock.lua); anything else, UnlockMessage "0"
//     in practice, wakes one waiter per client (release.lua, rw_release.lua).
const (
	// AddressedPrefix starts a message for one waiter; forceunlock.lua takes it as an
	// argument and appends the queue head's address.
	AddressedPrefix = "@"
	// ReadersMessage wakes every waiting reader and one other waiter.
	ReadersMessage = "*"
	// UnlockMessage wakes one waiter; release.lua and forceunlock.lua take it as an argument.
	UnlockMessage = "0"
)

// MessageKind is what a message on a lock's channel wakes.
type MessageKind uint8

// Kinds of message (see ParseMessage).
const (
	WakeOne       MessageKind = iota // one waiter per client
	WakeReaders                      // every reader of a client, and one other waiter
	WakeAddressed                    // the waiters at one address
)

// ParseMessage reads a message on a lock's channel: its kind, and for WakeAddressed the
// address and the grant it carries ("" for none; see ParseGrant). It does not allocate.
func ParseMessage(msg string) (kind MessageKind, addr, grant string) {
	rest, ok := strings.CutPrefix(msg, AddressedPrefix)
	if !ok {
		if msg == ReadersMessage {
			return WakeReaders, "", ""
		}
		return WakeOne, "", ""
	}
	addr, grant, _ = strings.Cut(rest, "\x00")
	return WakeAddressed, addr, grant
}

// Grant is a grant that an addressed message carries: the release gave the lock to request
// Request with fencing token Token and a lease of Claim from when the script ran.
type Grant struct {
	Request string
	Token   int64
	Claim   time.Duration
}

// ParseGrant reads the grant part of an addressed message (as ParseMessage returns it), and
// reports whether it is a well-formed grant with a positive claim.
func ParseGrant(grant string) (Grant, bool) {
	req, rest, ok := strings.Cut(grant, "\x00")
	if !ok {
		return Grant{}, false
	}
	tok, claim, _ := strings.Cut(rest, "\x00")
	token, err1 := strconv.ParseInt(tok, 10, 64)
	ms, err2 := strconv.ParseInt(claim, 10, 64)
	if err1 != nil || err2 != nil || ms <= 0 {
		return Grant{}, false
	}
	return Grant{Request: req, Token: token, Claim: time.Duration(ms) * time.Millisecond}, true
}

// Messages on an election's leader channel (Keys.Leader), for observers; candidates wait on
// the lock's channel, so these wake none of them. The election scripts publish three kinds
// (kind_election.lua's announce, vacate and leaderMessage build them):
//
//   - "leader <term> <lease ms> <value>": a new leader with that term (a Campaign that took the
//     lead, or a release that handed it over), its lease from when the script ran (a grant's
//     claim, which the leader extends soon after: renewals publish nothing) and its value;
//   - "proclaim <term> <lease ms> <value>": the leader of that term proclaimed a new value;
//   - "vacant <term>": the leader of that term resigned, gave the lead back or was forced
//     out, and nobody is next.
//
// A leader whose lease runs out publishes nothing: an observer re-reads the leadership
// (el_leader.lua) at the lease's end.

// LeaderEventKind is what a message on the leader channel says.
type LeaderEventKind uint8

// Kinds of message on the leader channel (see ParseLeaderMessage).
const (
	NewLeader  LeaderEventKind = iota + 1 // "leader"
	Proclaimed                            // "proclaim"
	Vacant                                // "vacant"
)

// LeaderEvent is a message on the leader channel, read.
type LeaderEvent struct {
	Kind  LeaderEventKind
	Term  int64
	Lease time.Duration // NewLeader, Proclaimed: the lease left when the script ran
	Value string        // NewLeader, Proclaimed
}

// ParseLeaderMessage reads a message on the leader channel, and reports whether it is a
// well-formed one (a positive term; a lease of -1, no expiry, or more). It allocates nothing
// but what the value needs (a substring of msg).
func ParseLeaderMessage(msg string) (LeaderEvent, bool) {
	what, rest, _ := strings.Cut(msg, " ")
	var e LeaderEvent
	switch what {
	case "leader":
		e.Kind = NewLeader
	case "proclaim":
		e.Kind = Proclaimed
	case "vacant":
		term, err := strconv.ParseInt(rest, 10, 64)
		if err != nil || term <= 0 {
			return LeaderEvent{}, false
		}
		return LeaderEvent{Kind: Vacant, Term: term}, true
	default:
		return LeaderEvent{}, false
	}
	term, rest, ok1 := strings.Cut(rest, " ")
	lease, value, ok2 := strings.Cut(rest, " ")
	t, err1 := strconv.ParseInt(term, 10, 64)
	ms, err2 := strconv.ParseInt(lease, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil || t <= 0 || ms < -1 {
		return LeaderEvent{}, false
	}
	e.Term, e.Lease, e.Value = t, time.Duration(ms)*time.Millisecond, value
	if ms < 0 {
		e.Lease = -1
	}
	return e, true
}
