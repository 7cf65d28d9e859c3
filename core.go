package rlock

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock/internal/wire"
)

// core is what every part of a Client shares to talk to Redis: the rueidis client and the
// options, ids, the variants of the scripts this client runs, and the client's lifetime.
type core struct {
	rc         rueidis.Client
	cluster    bool // group multi-key commands by slot
	sharded    bool // wake-ups by sharded pub/sub (SPUBLISH, SSUBSCRIBE): on a cluster
	opts       Options
	obs        Observer      // opts.Observer; nil: none
	leaseMs    string        // opts.WatchdogTimeout in whole milliseconds, as Redis gets it
	lease      time.Duration // the same, as a duration
	fairWaitMs string        // opts.FairWaitTimeout in milliseconds
	id         string        // random, prefixes this client's request ids (idLen bytes)
	// graceMs is Options.RestartGrace in milliseconds (0: none); graced caches the scripts'
	// variants for it by the SHA-1 of the original (see variant).
	graceMs int64
	graced  sync.Map
	seq     atomic.Uint64 // request id counter

	ctx    context.Context // done once Close starts
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine of the client, and the gate: Close waits for them
	closed atomic.Bool
	// starting counts flights being counted in wg (see startFlight).
	starting atomic.Int64
	// settle wakes the settler: a lane has work left (see settleSoon).
	settle chan struct{}
	// log keeps the log of failures that repeat during an outage short (see quietLog), per
	// node (see slotNodes).
	log   quietLog
	nodes slotNodes
}

// idLen is the length of a client id; a request id is the client id and a counter.
const idLen = 12

// init sets c up for client with opts, validated and defaulted.
func (c *core) init(client rueidis.Client, opts Options) {
	c.rc = client
	c.cluster = client.Mode() == rueidis.ClientModeCluster
	c.sharded = c.cluster
	c.opts, c.obs = opts, opts.Observer
	c.lease = opts.WatchdogTimeout.Truncate(time.Millisecond)
	c.leaseMs = strconv.FormatInt(c.lease.Milliseconds(), 10)
	c.fairWaitMs = strconv.FormatInt(opts.FairWaitTimeout.Milliseconds(), 10)
	if opts.RestartGrace > 0 {
		c.graceMs = opts.RestartGrace.Milliseconds()
	}
	c.id = NewOwnerID()[:idLen]
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.settle = make(chan struct{}, 1)
	c.log.init(opts.Logger)
	c.nodes.c = c
	c.wg.Add(1) // the gate (see startFlight)
}

// settleSoon wakes the settler: a lane has work left that its caller did not settle.
func (c *core) settleSoon() {
	select {
	case c.settle <- struct{}{}:
	default:
	}
}

// requestID returns an id unique to this call among all clients: the client id (idLen bytes)
// and a counter.
func (c *core) requestID() string {
	var b [32]byte
	return string(strconv.AppendUint(append(b[:0], c.id...), c.seq.Add(1), 36))
}

// variant returns the variant of s that c runs: sharded pub/sub on a cluster, and with c's
// Options.RestartGrace, if set (made once per client and script).
func (c *core) variant(s wire.Script) wire.Variant {
	v := s.For(c.sharded)
	if c.graceMs == 0 {
		return v
	}
	if g, ok := c.graced.Load(v.SHA1()); ok {
		return g.(wire.Variant)
	}
	g, _ := c.graced.LoadOrStore(v.SHA1(), v.WithGrace(c.graceMs))
	return g.(wire.Variant)
}

// eval runs script s: on conn if it is not nil, else through the client (EVALSHA, falling back
// to EVAL when the server lacks the script).
func (c *core) eval(ctx context.Context, conn rueidis.DedicatedClient, s wire.Script, keys, args []string) rueidis.RedisResult {
	if conn == nil {
		return c.variant(s).Exec(ctx, c.rc, keys, args)
	}
	return c.variant(s).ExecOn(ctx, conn, keys, args)
}

// slotOf groups keys for multi-key commands: by hash slot on a cluster, all in one group
// otherwise.
func (c *core) slotOf(key string) uint16 {
	if c.cluster {
		return wire.Slot(key)
	}
	return 0
}

// waitReplicas is the WAIT command of Options.SyncReplicas.
func (c *core) waitReplicas(b rueidis.Builder) rueidis.Completed {
	return b.Wait().Numreplicas(int64(c.opts.SyncReplicas)).Timeout(c.opts.SyncTimeout.Milliseconds()).Build()
}

// notReplicated reads the reply of waitReplicas sent after what was written ("the hold", "the
// renewal"): nil when enough replicas acknowledged it, else an error wrapping ErrNotReplicated.
func (c *core) notReplicated(what string, res rueidis.RedisResult) error {
	acked, err := res.AsInt64()
	switch {
	case err != nil:
		return fmt.Errorf("%w: WAIT after %s failed: %w", ErrNotReplicated, what, err)
	case acked < int64(c.opts.SyncReplicas):
		return fmt.Errorf("%w: %d of %d replicas acknowledged %s within %v", ErrNotReplicated,
			acked, c.opts.SyncReplicas, what, c.opts.SyncTimeout)
	}
	return nil
}

// The contexts of commands. A command whose outcome a call must learn runs detached from the
// caller's cancellation: a flight's context (see bound.go) is cancelled only when its caller
// leaves it, and a call without a bound runs without any.

// detach returns ctx without its cancellation and deadline, for a Redis command whose outcome
// the call must learn even if its caller leaves (rueidis' timeouts bound it); values such as
// a tracing span are kept. A giveUp context is kept as it is: its work is left for later.
func detach(ctx context.Context) context.Context {
	if _, ok := ctx.(giveUp); ok || ctx.Done() == nil {
		return ctx
	}
	return context.WithoutCancel(ctx)
}

// giveUp is the context of a flight or a background pass: cancelled (never given a deadline,
// which would make rueidis close a connection under the other calls on it) once it is given
// up. The commands under it keep its cancellation (see detach): a call cut short leaves its
// work on the lane.
type giveUp struct{ context.Context }

// giveUpAfter returns a context for one background pass that stops waiting for replies after
// d. It is cancelled rather than given a deadline: rueidis closes a connection whose deadline
// passes mid-call, failing every other call multiplexed on it, while a cancelled call is merely
// abandoned (it may or may not have been sent; either way the watchdog renews again).
func giveUpAfter(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	t := time.AfterFunc(d, cancel)
	return ctx, func() {
		t.Stop()
		cancel()
	}
}
