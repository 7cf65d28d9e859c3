package rlock

import (
	"context"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock/internal/wire"
)

// access is the way a hold holds its lock: exclusively (every kind but an RWMutex's read
// holds) or shared (an RWMutex's read holds). An owner's holds of each access are counted
// apart.
type access uint8

const (
	exclusive access = iota
	shared
	accesses // the number of accesses
)

// kind is what one kind of lock contributes: everything that differs between kinds. A kind is
// bound to its lock when the lock is made, and knows its keys, scripts and settings; the
// acquire and release paths (acquire.go, release.go), the renewals, the hold checks and State
// do the rest the same way for every kind. Each method that runs a script runs it once, under
// ctx.
type kind interface {
	// name is the Kind that observers and State see.
	name() string
	// style is how a waiter for access a waits.
	style(a access) waitStyle
	// acquire runs the acquire script for r (see attempt).
	acquire(ctx context.Context, r request) (attempt, error)
	// release runs the release script for one hold of owner in access a, under request id req.
	release(ctx context.Context, owner string, a access, req string) (releaseReply, error)
	// dequeue removes the waiter of request r from the lock's queue (queued waiters only), and
	// gives back a hold a release granted it.
	dequeue(ctx context.Context, r request) error
	// renewal is the script that renews watchdog holds of this kind and the keys it takes per
	// hold (all in the lock's slot); see renew.lua.
	renewal() (wire.Script, []string)
	// renewOwner is how the renewal script names the holds of owner in access a.
	renewOwner(owner string, a access) string
	// checkKind is the kind check.lua checks the holds of this kind as (wire.CheckMutex, ...).
	checkKind() string
	// force is the force-unlock script with its keys and arguments.
	force() (s wire.Script, keys, args []string)
}

// waitStyle is how a waiter of a kind waits under PubSub (Spin polls instead of waking).
type waitStyle struct {
	wake wakeBy
	// queued waiters hold a place that others wait behind (a fair queue, a waiting writer, a
	// semaphore's queue): they refresh it at least every third of FairWaitTimeout and remove
	// it when they give up.
	queued bool
	// prefix makes a waiter's address (wakeAddressed): prefix + owner.
	prefix string
	// checks: the kind's acquire script has the checkOnly mode, which a waiter runs instead of
	// a full attempt when a new subscription's confirmation wakes it (see waiter.queue).
	checks bool
}

// barging reports whether s is the plain Mutex's, whose new Lock calls follow the barging
// rules (see courtesy.go).
func (s waitStyle) barging() bool { return s == waitStyle{wake: wakeOne} }

// courteous reports whether s is a plain RWMutex writer's, whose new Lock calls keep only the
// courtesy window of the barging rules (see courtesy.go).
func (s waitStyle) courteous() bool { return s == waitStyle{wake: wakeOne, queued: true} }

// Ways a waiter is woken by the lock's channel (see wakeup.go).
type wakeBy uint8

const (
	wakeOne       wakeBy = iota // "0" or "*": one waiter per client, barging rules (courtesy.go) for a plain Mutex
	wakeReaders                 // "*": every reader of the client
	wakeAddressed               // "@" + address: the waiter with that address
)

// request is one acquire attempt: who asks, under which request id, how.
type request struct {
	owner  string
	id     string // request id: the same for every attempt of one call
	mode   int    // takeLock, reenterOnly, resolveOnly or checkOnly
	access access
	n      int64  // permits (Semaphore)
	value  string // what observers see while the candidate leads (an election's Campaign)
	label  string // the label of the hold and the wait (WithLabel); "": none
	join   bool   // join (or stay in) the queue if the lock is not free
	// answered: an earlier attempt of this call got a reply and none lost one, so, for an owner
	// made for the call (owner == id), the request has not run and nobody else holds as the
	// owner: a plain Mutex's attempt need not read the hash (wire.TakeNew).
	answered bool
	// conn, if not nil, is the connection the script must run on (see core.eval).
	conn rueidis.DedicatedClient
}

// Modes of an acquire attempt.
const (
	takeLock    = iota // take a free lock or re-enter
	reenterOnly        // re-enter a hold the owner has; leave a free lock to the waiters
	resolveOnly        // report whether request req ran (and took a hold); change nothing
	// checkOnly: a queued waiter's first look after it subscribed (waitStyle.checks): a grant
	// or a request that ran is taken as by takeLock; otherwise nothing is written, and a pttl
	// of 0 says that a takeLock attempt could succeed, or must join the queue again (the
	// call's place is gone: a grant may have come and gone); any other pttl, that the lock is
	// another owner's and the place is there.
	checkOnly
)

// modeArg is the script argument of each mode.
var modeArg = [...]wire.Mode{takeLock: wire.Take, reenterOnly: wire.Reenter, resolveOnly: wire.Resolve,
	checkOnly: wire.Look}

// attempt is the outcome of one run of an acquire script.
type attempt struct {
	acquired bool
	count    int64         // owner's hold count in the attempt's access after acquiring
	token    int64         // fencing token of the hold
	pttl     time.Duration // when not acquired: how long the holder may keep it, -1 for no end
	head     bool          // queued, not acquired: the owner is next (it also wakes at pttl)
	// joined, queued and not acquired: this attempt put the call's entry in the queue (it was
	// not there: the first attempt, or the entry was granted or purged since the last one).
	joined bool
	sent   time.Time // when the script was sent: the lease ends no earlier than sent+lease
	// claim, for a hold a release granted this call (direct handoff), is its lease in Redis
	// from no earlier than sent (instead of the lock's lease) until the holder extends it.
	claim time.Duration
	// unreplicated, for a new hold with Options.SyncReplicas, is the error wrapping
	// ErrNotReplicated when too few replicas acknowledged it: the caller gives it back.
	unreplicated error
}

// releaseReply is the outcome of one run of a release script.
type releaseReply struct {
	left  int64 // the owner's remaining holds in that access; -1: it held none
	total int64 // its remaining holds in every access
	woken int64 // clients the release message reached
}

// parseReleased is a release script's decoded reply (see wire.ParseRelease) as a releaseReply.
func parseReleased(r wire.Released, err error) (releaseReply, error) {
	if err != nil {
		return releaseReply{}, badReply(err)
	}
	return releaseReply{left: r.Left, total: r.Total, woken: r.Woken}, nil
}
