package wire

// Special fields of a lock's hash (Keys.Lock). Hold fields are owner ids (Mutex), "r:<owner>"
// and "w:<owner>" (RWMutex) or hold ids (Semaphore), none of which starts with a control
// character; the library's own fields start with one, so they never clash with a hold:
//
//   - "\x00<client><owner>": the replay record of the last request of a client (the first 12
//     bytes of its request ids) for an owner, "<request id>:<count>" (lib.lua marker/record).
//   - the fields below, "\x01" and a letter. The scripts use lib.lua's FIELD_KIND, FIELD_GRANT,
//     ... (lib.lua alone spells them); fields_test.go checks the two agree.
const (
	// FieldKind is the kind of lock the hash is: "rw" (RWMutex), "sem" (Semaphore) or "el"
	// (an election); a Mutex's hash has none. A script given a hash of another kind raises
	// WRONGTYPE.
	FieldKind = "\x01k"
	// FieldGrant records a grant (direct handoff): in a fair Mutex's hash, the request id the
	// last release granted the lock to; in a fair RWMutex's, FieldGrant + "<r|w>:<owner>" is
	// the request id granted that hold. The grantee's next attempt finds it there.
	FieldGrant = "\x01g"
	// FieldWriter is the owner that holds an RWMutex for writing.
	FieldWriter = "\x01w"
	// FieldPermits is a Semaphore's permit count, checked against every caller's.
	FieldPermits = "\x01p"
	// FieldUsed is the number of a Semaphore's permits held.
	FieldUsed = "\x01u"
	// FieldValue is an election leader's value (Campaign's, or the last Proclaim's), beside
	// its hold (the candidate id's field) and gone with it.
	FieldValue = "\x01v"
	// FieldTerm is an election leader's term, beside its hold and gone with it; the fencing
	// counter keeps the last term handed out.
	FieldTerm = "\x01t"
	// FieldLone names the lone hold of an RWMutex or a Semaphore ("r:<owner>", "w:<owner>" or
	// a hold id) while it is the only one: its lease is then the hash's expiry, and the leases
	// zset has no entry. A second hold (or a waiter) moves it into the zset first.
	FieldLone = "\x01o"
	// FieldLabel + a hold's field is that hold's label (WithLabel), written only for a
	// labelled hold and gone with the hold.
	FieldLabel = "\x01l"
	// FieldSince + a hold's field is the server time (ms) the labelled hold began: re-entries
	// keep it; gone with the hold.
	FieldSince = "\x01s"
)

// MaxExact is 2^53, the largest integer the scripts keep exact: Lua's numbers are doubles. A
// Semaphore has at most this many permits, and a fencing counter holds an integer from
// -MaxExact to MaxExact (lib.lua's MAX_TOKEN); at MaxExact it gives no new token.
const MaxExact = 1 << 53
