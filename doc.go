// Package rlock provides distributed locks on Redis in the style of Redisson, built on the
// rueidis client: a reentrant [Mutex] whose per-owner hold counts live in a Redis hash, a
// watchdog that keeps leases alive, waiting by pub/sub or by polling, a fair (FIFO) mutex, a
// read-write mutex ([RWMutex]) and a weighted, fair [Semaphore], all on one machinery.
//
// # Owners and contexts
//
// Go has no thread identity, so the owner of a hold travels in a [context.Context]:
// [Mutex.Lock] returns a hold context that carries the owner, and a nested Lock given that
// context re-enters the lock instead of waiting for it. [WithOwner] names an owner explicitly;
// two processes that use the same owner id share one hold count.
//
// # Leases and loss
//
// A hold is a lease on one Redis primary, in whole milliseconds. Locks taken without
// [WithLease] are renewed by one watchdog goroutine per [Client] every third of
// [Options.WatchdogTimeout]. The hold context is cancelled with cause [ErrLockLost] as soon as
// the library knows the lease is gone, and at the latest when the lease ends as of the last
// successful renewal (counted from its send time, less 1ms and 0.1%), so it never outlives the
// lease Redis has (a lease in Redis is never shortened: a re-entry or renewal sets it to at
// least its own); work that must not overlap another holder should check that context before
// each step (a context derived from it is the standard library's, and after a pause of the
// process it looks live until a timer of the library has run), and writes to other systems
// should carry a fencing token ([WithFencing], [Mutex.Token]). Mutual exclusion is not
// guaranteed across a failover that loses the lock key, a jump of the Redis server's clock, or
// a pause of the holder longer than its lease.
//
// # Lost replies
//
// Every acquire and release carries a request id that its script records, so a request whose
// reply was lost is replayed, never repeated; a call that gives up after a lost reply learns
// whether its request took the lock and gives it back before returning. A client sends one
// request at a time per owner and lock; one whose outcome is still unknown is settled before
// the next (see [Mutex.Unlock]).
//
// # Waiting
//
// [PubSub] waiters sleep on one shared subscription per lock name per client until an unlock
// message or the holder's remaining lease, whichever comes first; [Spin] waiters poll. A
// PubSub Lock does not barge: it queues behind this client's waiters for the same lock, and
// a client that has just released a lock others wait for holds back its own attempts for a
// moment, so the woken waiter gets it. A fair mutex ([Client.NewFairMutex]) goes further and
// hands the lock out in arrival order across all clients.
//
// # Observing
//
// [Options.Observer] receives calls, holds, lost holds, renewal failures and handoffs; the
// module github.com/rlock-go/rlock/otel turns them into OpenTelemetry metrics and spans.
//
// # Keys
//
// For a lock named N with prefix P (default "rlock") the keys are P:{N} (the lock hash),
// P:{N}:fence (fencing counter), P:{N}:queue and P:{N}:deadlines (waiters of fair kinds and
// semaphores), P:{N}:leases (per-hold leases of read-write mutexes and semaphores),
// P:{N}:writers (waiting writers), and the pub/sub channel P:{N}:ch.
// All share the hash tag {N}, so every script touches one Redis Cluster slot.
package rlock
