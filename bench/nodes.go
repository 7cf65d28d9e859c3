package main

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// Figures about the server (INFO commandstats, cpu and memory, MONITOR, PUBSUB, CLIENT LIST)
// are read from each node on a connection of its own and summed: over the one server
// standalone, over the masters on a cluster, which run every lock command (the replicas only
// apply their masters' writes). Leak checks (PUBSUB, CLIENT LIST) look at every node,
// replicas included: a client may subscribe anywhere.

// node is one Redis node, reached directly (not through cluster routing).
type node struct {
	addr string
	c    rueidis.Client
}

// newNodeClient connects to the node at addr alone, even when it is a cluster node.
func newNodeClient(addr string, tweak func(*rueidis.ClientOption)) (rueidis.Client, error) {
	return newRueidis([]string{addr}, func(o *rueidis.ClientOption) {
		o.ForceSingleClient = true
		if tweak != nil {
			tweak(o)
		}
	})
}

// dialNodes connects to each of addrs; on error it closes the ones it opened.
func dialNodes(addrs []string) ([]node, error) {
	var ns []node
	for _, a := range addrs {
		c, err := newNodeClient(a, nil)
		if err != nil {
			closeNodes(ns)
			return nil, err
		}
		ns = append(ns, node{a, c})
	}
	return ns, nil
}

func closeNodes(ns []node) {
	for _, n := range ns {
		n.c.Close()
	}
}

// allNodes are the measured nodes and the replicas.
func (e *env) allNodes() []node { return slices.Concat(e.nodes, e.replicas) }

// serverCPU reads INFO cpu and commandstats of every measured node and sums them.
func (e *env) serverCPU(ctx context.Context) (serverCPU, error) {
	var sum serverCPU
	for _, n := range e.nodes {
		s, err := readServerCPU(ctx, n.c)
		if err != nil {
			return serverCPU{}, err
		}
		sum = sum.plus(s)
	}
	return sum, nil
}

// usedMemory sums INFO memory used_memory over the measured nodes.
func (e *env) usedMemory(ctx context.Context) (int64, error) {
	var sum int64
	for _, n := range e.nodes {
		m, err := usedMemory(ctx, n.c)
		if err != nil {
			return 0, err
		}
		sum += m
	}
	return sum, nil
}

// plus returns the sum of two readings (of two nodes).
func (s serverCPU) plus(o serverCPU) serverCPU {
	return serverCPU{CPU: s.CPU + o.CPU, Usec: s.Usec.plus(o.Usec), Calls: s.Calls.plus(o.Calls)}
}

// plus returns the sum of two counts, per command, as a new map.
func (st commandStats) plus(o commandStats) commandStats {
	sum := commandStats{}
	for _, m := range []commandStats{st, o} {
		for k, v := range m {
			sum[k] += v
		}
	}
	return sum
}

// plus returns the sum of two monitors' counts.
func (m monitorCounts) plus(o monitorCounts) monitorCounts {
	return monitorCounts{Client: commandStats(m.Client).plus(o.Client), Script: commandStats(m.Script).plus(o.Script)}
}

// pubsubState is what the nodes say about the channels matching a pattern: classic and sharded
// channels (by name: a classic channel subscribed on two nodes is one channel), and their
// subscriptions summed over the nodes.
type pubsubState struct {
	Channels      int
	Subscriptions int64
}

// pubsub reads the channels matching pattern and their subscribers on every node. Sharded
// channels are asked for on Redis 7 and later.
func (e *env) pubsub(ctx context.Context, pattern string) (pubsubState, error) {
	var st pubsubState
	names := map[string]bool{}
	sharded := versionAtLeast(e.redis.Version, 7)
	for _, n := range e.allNodes() {
		chans, err := n.c.Do(ctx, n.c.B().PubsubChannels().Pattern(pattern).Build()).AsStrSlice()
		if err != nil {
			return st, err
		}
		subs, err := numsub(ctx, n.c, chans, false)
		if err != nil {
			return st, err
		}
		st.Subscriptions += subs
		for _, ch := range chans {
			names["c:"+ch] = true
		}
		if !sharded {
			continue
		}
		schans, err := n.c.Do(ctx, n.c.B().PubsubShardchannels().Pattern(pattern).Build()).AsStrSlice()
		if err != nil {
			return st, err
		}
		if subs, err = numsub(ctx, n.c, schans, true); err != nil {
			return st, err
		}
		st.Subscriptions += subs
		for _, ch := range schans {
			names["s:"+ch] = true
		}
	}
	st.Channels = len(names)
	return st, nil
}

// numsub sums the subscribers of channels on one node (PUBSUB NUMSUB or SHARDNUMSUB, 1,000
// channels a call).
func numsub(ctx context.Context, c rueidis.Client, channels []string, sharded bool) (int64, error) {
	var total int64
	for chunk := range slices.Chunk(channels, 1000) {
		cmd := c.B().PubsubNumsub().Channel(chunk...).Build()
		if sharded {
			cmd = c.B().PubsubShardnumsub().Channel(chunk...).Build()
		}
		m, err := c.Do(ctx, cmd).AsIntMap()
		if err != nil {
			return 0, err
		}
		for _, n := range m {
			total += n
		}
	}
	return total, nil
}

// clientList concatenates CLIENT LIST of every node.
func (e *env) clientList(ctx context.Context) (string, error) {
	var b strings.Builder
	for _, n := range e.allNodes() {
		l, err := n.c.Do(ctx, n.c.B().ClientList().Build()).ToString()
		if err != nil {
			return "", err
		}
		b.WriteString(strings.TrimRight(l, "\n"))
		b.WriteByte('\n')
	}
	return b.String(), nil
}

// versionAtLeast reports whether a Redis version ("7.0.15") is major or later; false when it
// cannot be read.
func versionAtLeast(version string, major int) bool {
	m, _, _ := strings.Cut(version, ".")
	n, err := strconv.Atoi(m)
	return err == nil && n >= major
}

// slotOwners maps every hash slot to the address of its master (CLUSTER SLOTS, asked of one
// node); nil on a standalone server.
func (e *env) slotOwners(ctx context.Context) (map[uint16]string, error) {
	if !e.redis.Cluster() {
		return nil, nil
	}
	c := e.nodes[0].c
	shards, err := c.Do(ctx, c.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return nil, err
	}
	owners := make(map[uint16]string, 16384)
	for _, sh := range shards {
		v, err := sh.ToArray()
		if err != nil || len(v) < 3 {
			continue
		}
		lo, _ := v[0].AsInt64()
		hi, _ := v[1].AsInt64()
		m, err := v[2].ToArray()
		if err != nil || len(m) < 2 {
			continue
		}
		host, _ := m[0].ToString()
		port, _ := m[1].AsInt64()
		addr := host + ":" + strconv.FormatInt(port, 10)
		for s := lo; s <= hi; s++ {
			owners[uint16(s)] = addr
		}
	}
	return owners, nil
}
