package wire

import "strconv"

// Each script's ARGV as a Go type: its fields are the arguments in ARGV order, each with a
// `argv` tag quoting a phrase of that argument's line in the script's header comment, and
// Strings gives them as the script takes them. header_test.go checks the fields, the tags and
// Strings against the headers, so the two cannot drift apart. Numbers in milliseconds or
// permits are decimal strings: the library formats them once per lock, not per call.

// Mode is how an acquire script treats the lock (ARGV mode of the acquire scripts).
type Mode string

// Modes of an acquire attempt.
const (
	Take Mode = "take" // take a free lock or re-enter
	// TakeNew is Take for an owner made for the request whose earlier attempts were all
	// answered (acquire.lua only): a lock that is there is another owner's; one call less.
	TakeNew Mode = "takenew"
	Reenter Mode = "reenter" // re-enter a hold the owner has; leave a free lock to the waiters
	Resolve Mode = "resolve" // report whether the request ran (and took a hold); change nothing
	// Look is a queued waiter's look once it has subscribed (fair_acquire.lua and
	// sem_acquire.lua): as Take when the request ran or was granted; otherwise it writes
	// nothing, and replies pttl -2 when a Take could succeed or must join the queue again.
	Look Mode = "check"
)

// Access is the hold an RWMutex script takes or gives back: "w" to write, "r" to read.
type Access string

// Accesses of an RWMutex hold.
const (
	Write Access = "w"
	Read  Access = "r"
)

// flag is how the scripts take a yes-or-no argument: '1' or '0'.
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// join is how the acquire scripts take whether to wait: 'wait' or 'try'.
func join(b bool) string {
	if b {
		return "wait"
	}
	return "try"
}

// flavour is how the RWMutex scripts take the kind: 'fair' or 'plain'.
func flavour(fair bool) string {
	if fair {
		return "fair"
	}
	return "plain"
}

// labelled appends label, the last, optional ARGV of the scripts that take one, to args
// unless it is "" (unlabelled: the script reads ARGV[n] as nil).
func labelled(args []string, label string) []string {
	if label == "" {
		return args
	}
	return append(args, label)
}

// AcquireArgs is acquire.lua's ARGV.
type AcquireArgs struct {
	Owner   string `argv:"owner id"`
	LeaseMs string `argv:"lease in milliseconds"`
	Request string `argv:"request id"`
	Mode    Mode   `argv:"mode"`
	Label   string `argv:"label"` // "": unlabelled (not sent)
}

// Strings returns a as ARGV.
func (a AcquireArgs) Strings() []string {
	return labelled([]string{a.Owner, a.LeaseMs, a.Request, string(a.Mode)}, a.Label)
}

// FairAcquireArgs is fair_acquire.lua's ARGV.
type FairAcquireArgs struct {
	Owner      string `argv:"owner id"`
	LeaseMs    string `argv:"lease in milliseconds"`
	Request    string `argv:"request id"`
	Mode       Mode   `argv:"mode"`
	Fencing    bool   `argv:"fencing token"`
	FairWaitMs string `argv:"FairWaitTimeout in milliseconds"`
	Join       bool   `argv:"'wait' to join"`
	ClaimMs    string `argv:"claim in milliseconds"`
	Label      string `argv:"label"` // "": unlabelled (not sent)
}

// Strings returns a as ARGV.
func (a FairAcquireArgs) Strings() []string {
	return labelled([]string{a.Owner, a.LeaseMs, a.Request, string(a.Mode), flag(a.Fencing), a.FairWaitMs, join(a.Join),
		a.ClaimMs}, a.Label)
}

// RWAcquireArgs is rw_acquire.lua's ARGV.
type RWAcquireArgs struct {
	Owner      string `argv:"owner id"`
	LeaseMs    string `argv:"lease in milliseconds"`
	Request    string `argv:"request id"`
	Mode       Mode   `argv:"mode"`
	Access     Access `argv:"'r' for a read hold"`
	Fencing    bool   `argv:"fencing counter"`
	FairWaitMs string `argv:"FairWaitTimeout in milliseconds"`
	Join       bool   `argv:"'wait' to wait"`
	Fair       bool   `argv:"'fair' for arrival order"`
	ClaimMs    string `argv:"claim in milliseconds"`
	Label      string `argv:"label"` // "": unlabelled (not sent)
}

// Strings returns a as ARGV.
func (a RWAcquireArgs) Strings() []string {
	return labelled([]string{a.Owner, a.LeaseMs, a.Request, string(a.Mode), string(a.Access), flag(a.Fencing), a.FairWaitMs,
		join(a.Join), flavour(a.Fair), a.ClaimMs}, a.Label)
}

// SemAcquireArgs is sem_acquire.lua's ARGV.
type SemAcquireArgs struct {
	Hold       string `argv:"hold id"`
	LeaseMs    string `argv:"lease in milliseconds"`
	Request    string `argv:"request id"`
	Mode       Mode   `argv:"mode"`
	Permits    string `argv:"permits of the semaphore"`
	N          string `argv:"permits this hold takes"`
	FairWaitMs string `argv:"FairWaitTimeout in milliseconds"`
	Join       bool   `argv:"'wait' to join"`
	ClaimMs    string `argv:"claim in milliseconds"`
	Label      string `argv:"label"` // "": unlabelled (not sent)
}

// Strings returns a as ARGV.
func (a SemAcquireArgs) Strings() []string {
	return labelled([]string{a.Hold, a.LeaseMs, a.Request, string(a.Mode), a.Permits, a.N, a.FairWaitMs, join(a.Join),
		a.ClaimMs}, a.Label)
}

// ReleaseArgs is release.lua's ARGV.
type ReleaseArgs struct {
	Owner   string `argv:"owner id"`
	Request string `argv:"request id"`
	Message string `argv:"unlock message"` // UnlockMessage
}

// Strings returns a as ARGV.
func (a ReleaseArgs) Strings() []string { return []string{a.Owner, a.Request, a.Message} }

// FairReleaseArgs is fair_release.lua's ARGV.
type FairReleaseArgs struct {
	Owner   string `argv:"owner id"`
	Request string `argv:"request id"`
}

// Strings returns a as ARGV.
func (a FairReleaseArgs) Strings() []string { return []string{a.Owner, a.Request} }

// RWReleaseArgs is rw_release.lua's ARGV.
type RWReleaseArgs struct {
	Owner   string `argv:"owner id"`
	Request string `argv:"request id"`
	Access  Access `argv:"'r' or 'w'"`
	Fair    bool   `argv:"'fair' or 'plain'"`
}

// Strings returns a as ARGV.
func (a RWReleaseArgs) Strings() []string {
	return []string{a.Owner, a.Request, string(a.Access), flavour(a.Fair)}
}

// SemReleaseArgs is sem_release.lua's ARGV.
type SemReleaseArgs struct {
	Hold string `argv:"hold id"`
}

// Strings returns a as ARGV.
func (a SemReleaseArgs) Strings() []string { return []string{a.Hold} }

// FairLeaveArgs is fair_leave.lua's ARGV.
type FairLeaveArgs struct {
	Owner   string `argv:"owner id"`
	Request string `argv:"request id"`
	ClaimMs string `argv:"its claim"`
	Fencing bool   `argv:"its fencing flag"`
	Label   string `argv:"its label"` // "": unlabelled (not sent)
}

// Strings returns a as ARGV.
func (a FairLeaveArgs) Strings() []string {
	return labelled([]string{a.Owner, a.Request, a.ClaimMs, flag(a.Fencing)}, a.Label)
}

// RWLeaveArgs is rw_leave.lua's ARGV.
type RWLeaveArgs struct {
	Owner   string `argv:"owner id"`
	Access  Access `argv:"'r' or 'w'"`
	Fair    bool   `argv:"'fair' or 'plain'"`
	Request string `argv:"request id"`
	ClaimMs string `argv:"its claim"`
	Fencing bool   `argv:"its fencing flag"`
	Label   string `argv:"its label"` // "": unlabelled (not sent)
}

// Strings returns a as ARGV.
func (a RWLeaveArgs) Strings() []string {
	return labelled([]string{a.Owner, string(a.Access), flavour(a.Fair), a.Request, a.ClaimMs, flag(a.Fencing)}, a.Label)
}

// SemLeaveArgs is sem_leave.lua's ARGV.
type SemLeaveArgs struct {
	Hold    string `argv:"hold id"`
	ClaimMs string `argv:"its claim"`
	N       string `argv:"its permits"`
	Label   string `argv:"its label"` // "": unlabelled (not sent)
}

// Strings returns a as ARGV.
func (a SemLeaveArgs) Strings() []string { return labelled([]string{a.Hold, a.ClaimMs, a.N}, a.Label) }

// ForceUnlockArgs is forceunlock.lua's ARGV: a plain Mutex's wakes one waiter with
// UnlockMessage; a fair one's (Fair) wakes the queue's head, AddressedPrefix and its address.
type ForceUnlockArgs struct {
	Message string `argv:"unlock message"`
	Fair    bool   `argv:"'1' for a fair lock"`
}

// Strings returns a as ARGV (ARGV[2] only for a fair lock).
func (a ForceUnlockArgs) Strings() []string {
	if a.Fair {
		return []string{a.Message, "1"}
	}
	return []string{a.Message}
}

// RWForceUnlockArgs is rw_forceunlock.lua's ARGV.
type RWForceUnlockArgs struct {
	Fair bool `argv:"'fair' or 'plain'"`
}

// Strings returns a as ARGV.
func (a RWForceUnlockArgs) Strings() []string { return []string{flavour(a.Fair)} }

// SemForceReleaseArgs is sem_forcerelease.lua's ARGV: none.
type SemForceReleaseArgs struct{}

// Strings returns a as ARGV.
func (SemForceReleaseArgs) Strings() []string { return nil }

// InspectArgs is the ARGV of inspect.lua and rw_inspect.lua.
type InspectArgs struct {
	Owner string `argv:"owner id"` // whose hold counts to read; "" for none
}

// Strings returns a as ARGV.
func (a InspectArgs) Strings() []string { return []string{a.Owner} }

// SemInspectArgs is sem_inspect.lua's ARGV.
type SemInspectArgs struct {
	Permits string `argv:"permits of the semaphore"`
}

// Strings returns a as ARGV.
func (a SemInspectArgs) Strings() []string { return []string{a.Permits} }

// StateArgs is state.lua's ARGV.
type StateArgs struct {
	Kind string `argv:"the kind the caller made"` // a Kind of the root package, or ""
}

// Strings returns a as ARGV.
func (a StateArgs) Strings() []string { return []string{a.Kind} }

// RenewArgs is the ARGV of renew.lua, rw_renew.lua and sem_renew.lua: the lease, then one
// owner per hold (a semaphore: hold id; an RWMutex: the lease field of one mode, "r:" or "w:"
// and the owner), whose keys (Keys.Renew) come in the same order.
type RenewArgs struct {
	LeaseMs string   `argv:"lease in milliseconds"`
	Owners  []string `argv:"id"`
}

// Strings returns a as ARGV.
func (a RenewArgs) Strings() []string {
	return append(append(make([]string, 0, 1+len(a.Owners)), a.LeaseMs), a.Owners...)
}

// CheckArgs is check.lua's ARGV: the holds' kind (CheckMutex, CheckRW or CheckSem), then one
// owner (a semaphore: hold id) per hold, whose keys (Keys.Renew of that kind) come in the same
// order.
type CheckArgs struct {
	Kind   string   `argv:"the holds' kind"`
	Owners []string `argv:"owner id"`
}

// check.lua's names of the kinds' key layouts.
const (
	CheckMutex = "mutex" // Mutex and fair Mutex: the hash
	CheckRW    = "rw"    // RWMutex: the hash and the leases
	CheckSem   = "sem"   // Semaphore: the hash and the leases
)

// Strings returns a as ARGV.
func (a CheckArgs) Strings() []string {
	return append(append(make([]string, 0, 1+len(a.Owners)), a.Kind), a.Owners...)
}

// CampaignArgs is el_campaign.lua's ARGV.
type CampaignArgs struct {
	Candidate  string `argv:"candidate id"` // the Campaign call's request id
	LeaseMs    string `argv:"lease in milliseconds"`
	Mode       Mode   `argv:"mode"` // Take or Resolve
	FairWaitMs string `argv:"FairWaitTimeout in milliseconds"`
	Join       bool   `argv:"'wait' to join"`
	ClaimMs    string `argv:"claim in milliseconds"`
	Value      string `argv:"value"`
	Label      string `argv:"label"` // "": unlabelled (not sent)
}

// Strings returns a as ARGV.
func (a CampaignArgs) Strings() []string {
	return labelled([]string{a.Candidate, a.LeaseMs, string(a.Mode), a.FairWaitMs, join(a.Join), a.ClaimMs, a.Value},
		a.Label)
}

// ResignArgs is el_resign.lua's ARGV.
type ResignArgs struct {
	Candidate string `argv:"candidate id of the term"`
	Term      int64  `argv:"term, as the term context carries it"`
}

// Strings returns a as ARGV.
func (a ResignArgs) Strings() []string {
	return []string{a.Candidate, strconv.FormatInt(a.Term, 10)}
}

// ProclaimArgs is el_proclaim.lua's ARGV.
type ProclaimArgs struct {
	Candidate string `argv:"candidate id of the term"`
	Term      int64  `argv:"term, as the term context carries it"`
	Value     string `argv:"value"`
}

// Strings returns a as ARGV.
func (a ProclaimArgs) Strings() []string {
	return []string{a.Candidate, strconv.FormatInt(a.Term, 10), a.Value}
}

// ElectionLeaveArgs is el_leave.lua's ARGV: the candidate's, as its Campaign attempts gave them.
type ElectionLeaveArgs struct {
	Candidate string `argv:"candidate id"`
	ClaimMs   string `argv:"its claim"`
	Value     string `argv:"its value"`
	Label     string `argv:"its label"` // "": unlabelled (not sent)
}

// Strings returns a as ARGV.
func (a ElectionLeaveArgs) Strings() []string {
	return labelled([]string{a.Candidate, a.ClaimMs, a.Value}, a.Label)
}

// NoArgs is the ARGV of el_leader.lua and el_forceunlock.lua: none.
type NoArgs struct{}

// Strings returns a as ARGV.
func (NoArgs) Strings() []string { return nil }

// MemberSpec is how the MultiLock's group scripts take a member (ARGV member i): its lease in
// milliseconds, whether it is fair, and whether it has fencing tokens. The library makes it
// once per member.
func MemberSpec(leaseMs string, fair, fencing bool) string {
	flags := ""
	if fair {
		flags += "f"
	}
	if fencing {
		flags += "t"
	}
	return leaseMs + ":" + flags
}

// MultiAcquireArgs is multi_acquire.lua's ARGV; the group's KEYS are each member's
// Keys.Member, in the order of Members.
type MultiAcquireArgs struct {
	Owner      string   `argv:"owner id"`
	Request    string   `argv:"request id"`
	Mode       Mode     `argv:"mode"` // Take or Resolve
	FairWaitMs string   `argv:"FairWaitTimeout in milliseconds"`
	Join       bool     `argv:"'wait' to join"`
	Label      string   `argv:"label"`    // "": unlabelled
	Members    []string `argv:"member i"` // MemberSpec of each
}

// Strings returns a as ARGV.
func (a MultiAcquireArgs) Strings() []string {
	return append(append(make([]string, 0, 6+len(a.Members)), a.Owner, a.Request, string(a.Mode), a.FairWaitMs,
		join(a.Join), a.Label), a.Members...)
}

// MultiReleaseArgs is multi_release.lua's ARGV (KEYS as MultiAcquireArgs').
type MultiReleaseArgs struct {
	Owner   string   `argv:"owner id"`
	Request string   `argv:"request id"`
	Message string   `argv:"unlock message"` // UnlockMessage
	Members []string `argv:"member i"`       // MemberSpec of each
}

// Strings returns a as ARGV.
func (a MultiReleaseArgs) Strings() []string {
	return append(append(make([]string, 0, 3+len(a.Members)), a.Owner, a.Request, a.Message), a.Members...)
}

// MultiLeaveArgs is multi_leave.lua's ARGV (KEYS as MultiAcquireArgs'): the waiting call's.
type MultiLeaveArgs struct {
	Owner   string   `argv:"owner id"`
	Request string   `argv:"request id"`
	Label   string   `argv:"its label"` // "": unlabelled
	Members []string `argv:"member i"`  // MemberSpec of each
}

// Strings returns a as ARGV.
func (a MultiLeaveArgs) Strings() []string {
	return append(append(make([]string, 0, 3+len(a.Members)), a.Owner, a.Request, a.Label), a.Members...)
}
