package rlock

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Defaults applied by [New] to zero fields of [Options].
const (
	// DefaultKeyPrefix is the namespace of every key and channel.
	DefaultKeyPrefix = "rlock"
	// DefaultWatchdogTimeout is the lease of locks taken without [WithLease] (Redisson's
	// lockWatchdogTimeout); the watchdog renews it every third.
	DefaultWatchdogTimeout = 30 * time.Second
	// DefaultFairWaitTimeout is how long a queued fair waiter that stops polling keeps its place.
	DefaultFairWaitTimeout = 5 * time.Second
	// DefaultSyncTimeout is how long a new hold waits for Options.SyncReplicas.
	DefaultSyncTimeout = time.Second
)

// Options configures a [Client]. The zero value is valid and means every default.
type Options struct {
	// KeyPrefix is the namespace of every key and channel; default "rlock". It must not
	// contain '{' or '}', which would move the hash tag.
	KeyPrefix string
	// WatchdogTimeout is the lease of locks taken without WithLease, renewed every third of
	// it; default 30s; at least 3ms. Redis gets it in whole milliseconds (the rest is dropped).
	WatchdogTimeout time.Duration
	// Wait is how a blocked Lock waits; default PubSub().
	Wait WaitStrategy
	// FairWaitTimeout is how long after its last poll a queued fair waiter keeps its place;
	// default 5s; at least 3ms (waiters poll every third of it). Live waiters poll well within
	// it and never lose their place.
	FairWaitTimeout time.Duration
	// Logger receives background errors (renewal failures); default: none, and they are discarded.
	Logger *slog.Logger
	// SyncReplicas, if above 0, makes every new hold (of any kind or mode; not a re-entry)
	// count only once that many replicas have acknowledged it (WAIT, on the connection that
	// took it); otherwise the hold is given back and the call returns an error wrapping
	// [ErrNotReplicated]. Watchdog renewals count only once acknowledged too (one connection and
	// WAIT per hash slot per period): a hold whose lease reached too few replicas ends at its
	// local lease end with [ErrLockLost], as if the renewals had failed. Releases and re-entries
	// are not waited for. Default 0: don't wait.
	SyncReplicas int
	// SyncTimeout is how long a new hold waits for SyncReplicas acknowledgements; default 1s.
	SyncTimeout time.Duration
	// Observer, if not nil, is told of every call that takes or releases a hold, and of what happens
	// to holds (started, ended, renewal failures, handoffs), for metrics and tracing; see
	// [Observer]. Default: none, which costs nothing.
	Observer Observer
	// RestartGrace, if above 0, is the Redis documentation's "delayed restart", done by the
	// library: a server (a cluster node) that has been up for less than RestartGrace grants no
	// new hold of any kind (uptime as INFO reports it, in whole seconds: the grace may last up
	// to a second longer, never shorter). Lock, RLock and Acquire wait until the grace has passed or their context ends;
	// TryLock(ctx, 0) and the other Try forms return [ErrNotObtained]. Re-entries, releases and
	// renewals of holds the server still has are not held back. Set it to at least the longest
	// lease any client uses (WatchdogTimeout, WithLease): then a restart that lost every key
	// (no persistence, or the last second of an everysec AOF) cannot make two holders. It does
	// not cover a failover to a lagging replica, which did not restart: that is what
	// SyncReplicas is for. Whole milliseconds; default 0: off, at no cost.
	RestartGrace time.Duration
}

// withDefaults validates o and fills in its defaults.
func (o Options) withDefaults() (Options, error) {
	switch {
	case o.WatchdogTimeout < 0:
		return o, invalidf("negative WatchdogTimeout %v", o.WatchdogTimeout)
	case o.FairWaitTimeout < 0:
		return o, invalidf("negative FairWaitTimeout %v", o.FairWaitTimeout)
	case o.SyncReplicas < 0:
		return o, invalidf("negative SyncReplicas %d", o.SyncReplicas)
	case o.RestartGrace < 0:
		return o, invalidf("negative RestartGrace %v", o.RestartGrace)
	case o.RestartGrace > 0 && o.RestartGrace < time.Millisecond:
		return o, invalidf("RestartGrace %v is below 1ms", o.RestartGrace)
	case o.SyncTimeout < 0:
		return o, invalidf("negative SyncTimeout %v", o.SyncTimeout)
	case o.SyncTimeout > 0 && o.SyncTimeout < time.Millisecond:
		return o, invalidf("SyncTimeout %v is below 1ms", o.SyncTimeout)
	case strings.ContainsAny(o.KeyPrefix, "{}"):
		return o, invalidf("KeyPrefix %q contains '{' or '}'", o.KeyPrefix)
	case o.WatchdogTimeout > 0 && o.WatchdogTimeout < 3*time.Millisecond:
		return o, invalidf("WatchdogTimeout %v is below 3ms", o.WatchdogTimeout)
	case o.FairWaitTimeout > 0 && o.FairWaitTimeout < 3*time.Millisecond:
		return o, invalidf("FairWaitTimeout %v is below 3ms", o.FairWaitTimeout)
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = DefaultKeyPrefix
	}
	if o.WatchdogTimeout == 0 {
		o.WatchdogTimeout = DefaultWatchdogTimeout
	}
	if o.FairWaitTimeout == 0 {
		o.FairWaitTimeout = DefaultFairWaitTimeout
	}
	if o.SyncTimeout == 0 {
		o.SyncTimeout = DefaultSyncTimeout
	}
	if o.Wait == nil {
		o.Wait = PubSub()
	} else if err := o.Wait.validate(); err != nil {
		return o, err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// WaitStrategy is how a blocked Lock waits for the lock to be released. Build one with
// [PubSub] or [Spin].
type WaitStrategy interface {
	// String names the strategy, for logs and benchmark tables.
	String() string
	validate() error
}

type pubSubWait struct{}

// PubSub returns the default strategy: a waiter sleeps until an unlock message arrives on the
// lock's channel, through one subscription per lock name per Client shared by its local
// waiters; one message wakes one local waiter. Each sleep is bounded by the holder's remaining
// lease, so a lost message costs at most one lease. A subscription is kept for about a second
// after its last waiter leaves, for the next one (Close ends it at once).
func PubSub() WaitStrategy { return pubSubWait{} }

func (pubSubWait) String() string  { return "pubsub" }
func (pubSubWait) validate() error { return nil }

type spinWait struct{ interval time.Duration }

// Spin returns a strategy that polls the lock every interval (Spring's SPIN_LOCK, 100ms
// there). It needs no pub/sub. interval must be at least 1ms; otherwise every call on a mutex
// using it (and New, given it in Options) returns an error wrapping [ErrInvalid].
func Spin(interval time.Duration) WaitStrategy { return spinWait{interval: interval} }

func (s spinWait) String() string { return fmt.Sprintf("spin(%v)", s.interval) }
func (s spinWait) validate() error {
	if s.interval < time.Millisecond {
		return invalidf("Spin interval %v is below 1ms", s.interval)
	}
	return nil
}

// MutexOption configures one lock of any kind: pass it to [Client.NewMutex],
// [Client.NewFairMutex], [Client.NewRWMutex], [Client.NewFairRWMutex] or [Client.NewSemaphore].
// An invalid option is reported by every call on that lock (an error wrapping [ErrInvalid]).
type MutexOption func(*mutexConfig)

type mutexConfig struct {
	lease   time.Duration // 0: watchdog
	wait    WaitStrategy
	fencing bool
	err     error
}

// WithLease gives every hold a fixed lease of d (whole milliseconds: Redis gets no finer
// lease): no watchdog renews it, and the hold context's deadline is the lease end, just before
// Redis' (see the package doc). A lease in Redis is never shortened: a re-entry (or a
// renewal) sets the owner's lease to at least its own, so re-entering with a shorter lease than
// the owner holds by leaves the longer one, and the earlier hold context lives to its own
// deadline. d must be at least 1ms.
func WithLease(d time.Duration) MutexOption {
	return func(c *mutexConfig) {
		if d <= 0 {
			c.err = invalidf("WithLease(%v): lease must be positive", d)
			return
		}
		if d < time.Millisecond {
			c.err = invalidf("WithLease(%v): lease is below 1ms", d)
			return
		}
		c.lease = d
	}
}

// WithWait makes this lock (of any kind) wait with w instead of [Options.Wait].
func WithWait(w WaitStrategy) MutexOption {
	return func(c *mutexConfig) {
		if w == nil {
			c.err = invalidf("WithWait(nil)")
			return
		}
		if err := w.validate(); err != nil {
			c.err = err
			return
		}
		c.wait = w
	}
}

// WithFencing makes every new hold (not a re-entry) take a strictly larger fencing token from
// a per-lock counter, read with [Mutex.Token] or [RWMutex.Token] (a read hold gets the last
// writer's token). All locks of one name should agree on it. A [Semaphore] refuses it: its
// calls return an error wrapping [ErrInvalid]. Tokens are exact up to 2^53 (the Redis scripts'
// numbers are doubles): a counter that is not an integer from -2^53 to 2^53 is refused, and
// once it reaches 2^53 a call that would take a new token fails; either error wraps
// [ErrInvalid] and changes nothing (releases still work).
func WithFencing() MutexOption {
	return func(c *mutexConfig) { c.fencing = true }
}
