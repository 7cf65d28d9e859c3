package rlock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock/internal/wire"
)

// script returns the variant of s that c runs: sharded pub/sub on a cluster, and with c's
// Options.RestartGrace, if set (made once per client and script).
func (c *Client) script(s wire.Script) wire.Variant {
	v := s.For(c.sharded)
	if c.graceMs == 0 {
		return v
	}
	if g, ok := c.gracedScripts.Load(v.SHA1()); ok {
		return g.(wire.Variant)
	}
	g, _ := c.gracedScripts.LoadOrStore(v.SHA1(), v.WithGrace(c.graceMs))
	return g.(wire.Variant)
}

// callTimeout bounds a read made with a context that has already ended.
const callTimeout = 10 * time.Second

// idLen is the length of a client id; a request id is the client id and a counter.
const idLen = 12

// requestID returns an id unique to this call among all clients: the client id (idLen bytes)
// and a counter.
func (c *Client) requestID() string {
	var b [32]byte
	return string(strconv.AppendUint(append(b[:0], c.id...), c.seq.Add(1), 36))
}

// waitReplicas is the WAIT command of Options.SyncReplicas.
func (c *Client) waitReplicas(b rueidis.Builder) rueidis.Completed {
	return b.Wait().Numreplicas(int64(c.opts.SyncReplicas)).Timeout(c.opts.SyncTimeout.Milliseconds()).Build()
}

// notReplicated reads the reply of waitReplicas sent after what was written ("the hold", "the
// renewal"): nil when enough replicas acknowledged it, else an error wrapping ErrNotReplicated.
func (c *Client) notReplicated(what string, res rueidis.RedisResult) error {
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

// eval runs script s for request r: on r's own connection if it has one, else through the
// client (EVALSHA, falling back to EVAL when the server lacks the script).
func (c *Client) eval(ctx context.Context, r *request, s wire.Script, keys, args []string) rueidis.RedisResult {
	if r == nil || r.conn == nil {
		return c.script(s).Exec(ctx, c.rc, keys, args)
	}
	return c.script(s).ExecOn(ctx, r.conn, keys, args)
}

// readCtx returns ctx for a read, or, when it has ended (an ended hold context still names
// its owner), a context with a timeout of its own.
func readCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Err() != nil {
		return context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	}
	return ctx, func() {}
}

// slotOf groups keys for multi-key commands: by hash slot on a cluster, all in one group
// otherwise.
func (c *Client) slotOf(key string) uint16 {
	if c.cluster {
		return wire.Slot(key)
	}
	return 0
}

// giveUpAfter returns a context for one renewal that stops waiting for the reply after d. It
// is cancelled rather than given a deadline: rueidis closes a connection whose deadline passes
// mid-call, failing every other call multiplexed on it, while a cancelled call is merely
// abandoned (it may or may not have been sent; either way the watchdog renews again).
func giveUpAfter(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	t := time.AfterFunc(d, cancel)
	return ctx, func() {
		t.Stop()
		cancel()
	}
}

// detach returns ctx without its cancellation and deadline, for a Redis command whose outcome
// the call must learn even if its caller leaves (rueidis' timeouts bound it); values such as
// a tracing span are kept. A giveUp context is kept as it is: its work is left for later.
func detach(ctx context.Context) context.Context {
	if _, ok := ctx.(giveUp); ok || ctx.Done() == nil {
		return ctx
	}
	return context.WithoutCancel(ctx)
}

// giveUp is the context of the watchdog's settling: cancelled (never given a deadline, which
// would make rueidis close a connection under the other calls on it) once the pass gives up.
// The commands under it keep its cancellation (see detach): a call cut short leaves its work
// on the lane.
type giveUp struct{ context.Context }
