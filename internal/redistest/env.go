package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

var prefixSeq atomic.Int64

// NewPrefix is a key prefix no other test of this process has: tag, the process id and a
// sequence number.
func NewPrefix(tag string) string {
	return fmt.Sprintf("%s%d-%d", tag, os.Getpid(), prefixSeq.Add(1))
}

// Env is one test's namespace on a deployment: a key prefix of its own, and a check when the
// test ends that no keys (but fencing counters) and no channels remain on any node.
type Env struct {
	T      testing.TB
	Dep    *Deployed
	Proxy  *Proxy // if set, the clients reach the data nodes through it (see Through)
	Prefix string
	Dirty  bool // the test leaves keys behind on purpose (they expire)
}

// NewEnv returns an Env on the suite's deployment (see Main); it skips t under -short.
func NewEnv(t testing.TB) *Env {
	NeedsRedis(t)
	return NewEnvOn(t, suite)
}

// NewEnvAt returns an Env on the standalone server at addr (one the test started).
func NewEnvAt(t testing.TB, addr string) *Env {
	t.Helper()
	NeedsRedis(t)
	dep, err := Open(Standalone(addr))
	require.NoError(t, err)
	t.Cleanup(dep.Close)
	return NewEnvOn(t, dep)
}

// NewEnvOn returns an Env on dep.
func NewEnvOn(t testing.TB, dep *Deployed) *Env {
	t.Helper()
	NeedsRedis(t)
	e := &Env{T: t, Dep: dep, Prefix: NewPrefix("rlt")}
	t.Cleanup(e.checkClean) // runs after the clients' Close (cleanups run last-in first-out)
	return e
}

// Admin is a client of e's deployment for tests' own commands.
func (e *Env) Admin() rueidis.Client { return e.Dep.Admin }

// Rueidis returns a new rueidis client of e's deployment (through e's proxy, if any), closed
// when the test ends.
func (e *Env) Rueidis() rueidis.Client {
	e.T.Helper()
	o := e.Dep.ClientOption()
	if e.Proxy != nil {
		o.DialCtxFn = e.Proxy.Dial
	}
	rc, err := rueidis.NewClient(o)
	require.NoError(e.T, err)
	e.T.Cleanup(rc.Close)
	return rc
}

// Through returns an Env whose clients reach the data nodes through p; keys are checked by e.
func (e *Env) Through(p *Proxy) *Env {
	c := *e
	c.Proxy = p
	return &c
}

// LockKey is the Redis key of the lock called name in e.
func (e *Env) LockKey(name string) string { return e.Prefix + ":{" + name + "}" }

// Master is the node that serves the lock called name in e.
func (e *Env) Master(name string) Node { return e.Dep.MasterOf(e.LockKey(name)) }

// ReplicasOf are the replicas of the master m.
func (e *Env) ReplicasOf(m Node) []Node { return e.Dep.Replicas[m.Addr] }

// Keys lists this env's keys, on every master.
func (e *Env) Keys() []string {
	var keys []string
	for _, n := range e.Dep.Masters {
		k, err := n.Do(e.T, "KEYS", e.Prefix+":*").AsStrSlice()
		require.NoError(e.T, err)
		keys = append(keys, k...)
	}
	return keys
}

// Channels lists this env's subscribed channels, classic and sharded, on every data node
// (replicas included): a channel subscribed on two nodes is listed twice.
func (e *Env) Channels() []string {
	classic, sharded := e.ChannelsByKind()
	return append(classic, sharded...)
}

// ChannelsByKind is Channels split into classic and sharded ones.
func (e *Env) ChannelsByKind() (classic, sharded []string) {
	for _, n := range e.Dep.Nodes {
		c, s := n.Channels(e.T, e.Prefix+":*")
		classic, sharded = append(classic, c...), append(sharded, s...)
	}
	return classic, sharded
}

// LeftOn describes, per node, the channels of e still subscribed there.
func (e *Env) LeftOn() string {
	var b strings.Builder
	for _, n := range e.Dep.Nodes {
		c, s := n.Channels(e.T, e.Prefix+":*")
		if len(c)+len(s) > 0 {
			fmt.Fprintf(&b, " %s: %v %v", n.Addr, c, s)
		}
	}
	return b.String()
}

func (e *Env) checkClean() {
	if e.Dirty || e.T.Failed() {
		return
	}
	require.Eventually(e.T, func() bool {
		for _, k := range e.Keys() {
			if !strings.HasSuffix(k, ":fence") {
				return false
			}
		}
		return len(e.Channels()) == 0
	}, 3*time.Second, 10*time.Millisecond, "keys or channels left behind: %v;%s", e.Keys(), e.LeftOn())
}

// keyedCommands are the commands on keys that tests send with Do: how many of the arguments
// are keys (-1: all of them).
var keyedCommands = map[string]int{
	"GET": 1, "SET": 1, "DEL": -1, "EXISTS": -1, "TYPE": 1, "PTTL": 1, "PEXPIRE": 1, "PEXPIRETIME": 1,
	"HGET": 1, "HGETALL": 1, "HKEYS": 1, "HDEL": 1, "LLEN": 1, "LRANGE": 1, "RPUSH": 1, "ZADD": 1,
	"ZCARD": 1, "ZRANGE": 1, "ZREM": 1, "ZSCORE": 1, "DUMP": 1,
	"KEYS": 1, // a pattern with a lock's hash tag: the node of that lock
}

// Do runs a raw command on e's deployment: a command on keys (keyedCommands) on the master
// that serves them, TIME on any node. Anything else must name its node (see Node, Master).
func (e *Env) Do(args ...string) rueidis.RedisResult {
	e.T.Helper()
	name := strings.ToUpper(args[0])
	n, keyed := keyedCommands[name]
	switch {
	case keyed && (n < 0 || n > len(args)-1):
		n = len(args) - 1
	case keyed:
	case name == "TIME", e.Dep.Topology != "cluster":
	default:
		e.T.Fatalf("do %v: say which node runs it", args)
	}
	cmd := func() rueidis.Completed {
		return e.Dep.Admin.B().Arbitrary(args[0]).Keys(args[1 : 1+n]...).Args(args[1+n:]...).Build()
	}
	res := e.Dep.Admin.Do(context.Background(), cmd())
	if err := res.Error(); err != nil && readOnly[name] && !isRedisErr(err) {
		// A read that met a connection another test's CLIENT KILL closed (rueidis does not
		// retry arbitrary commands) reads again on a new one.
		res = e.Dep.Admin.Do(context.Background(), cmd())
	}
	return res
}

// readOnly are the keyedCommands that only read, which Do runs again after a transport error.
var readOnly = map[string]bool{
	"GET": true, "EXISTS": true, "TYPE": true, "PTTL": true, "PEXPIRETIME": true, "HGET": true,
	"HGETALL": true, "HKEYS": true, "LLEN": true, "LRANGE": true, "ZCARD": true, "ZRANGE": true,
	"ZSCORE": true, "KEYS": true, "TIME": true, "DUMP": true,
}

// isRedisErr reports whether err is a reply of the server (not a transport error).
func isRedisErr(err error) bool {
	_, ok := rueidis.IsRedisErr(err)
	return ok
}

// OnMasters runs a command on every master and returns the errors joined.
func (e *Env) OnMasters(args ...string) error {
	e.T.Helper()
	var errs []error
	for _, n := range e.Dep.Masters {
		errs = append(errs, n.Do(e.T, args...).Error())
	}
	return errors.Join(errs...)
}

// KillClients kills the clients of type typ (CLIENT KILL TYPE) on every data node and returns
// how many.
func (e *Env) KillClients(typ string) int64 {
	e.T.Helper()
	var killed int64
	for _, n := range e.Dep.Nodes {
		k, err := n.Do(e.T, "CLIENT", "KILL", "TYPE", typ).AsInt64()
		require.NoError(e.T, err)
		killed += k
	}
	return killed
}

// Numsub is how many subscriptions channel has, classic and sharded, over every data node.
func (e *Env) Numsub(channel string) int64 {
	e.T.Helper()
	var total int64
	for _, n := range e.Dep.Nodes {
		for _, cmd := range []string{"NUMSUB", "SHARDNUMSUB"} {
			v, err := n.Do(e.T, "PUBSUB", cmd, channel).ToArray()
			require.NoError(e.T, err)
			k, err := v[1].AsInt64()
			require.NoError(e.T, err)
			total += k
		}
	}
	return total
}
