package rlock

import (
	"net"
	"slices"
	"strconv"
	"sync"
	"time"
)

// slotNodes names the node that serves a hash slot on a cluster, so that the log counts the
// failures of the background work (renewals, settling) per node, as a node fails and answers
// again by itself (see quietLog). It reads CLUSTER SLOTS when it must name a failing slot and
// its copy is older than quietEvery, asking one node after another until one answers within
// replyGrace each; a slot it cannot name (no node answered, or off a cluster) is "": every
// node at once.
type slotNodes struct {
	c *core
	// reading is held while the copy is read (a failing slot's caller waits for it, so that
	// it names the node too).
	reading sync.Mutex
	mu      sync.Mutex // guards the copy: ranges, sorted by first slot, taken at read
	ranges  []slotRange
	read    time.Time
}

// slotRange is the node that serves the slots first to last.
type slotRange struct {
	first, last uint16
	node        string // host:port
}

// of returns the node that serves slot as far as the copy says, or "". failing: the slot's
// work just failed, so a copy older than quietEvery is read again first (the cluster may have
// failed over), which takes at most replyGrace per node asked.
func (n *slotNodes) of(slot uint16, failing bool) string {
	if !n.c.cluster {
		return ""
	}
	if failing {
		n.reading.Lock()
		n.mu.Lock()
		stale := time.Since(n.read) >= quietEvery
		n.mu.Unlock()
		if stale {
			ranges := n.fetch()
			n.mu.Lock()
			n.read = time.Now()
			if ranges != nil {
				n.ranges = ranges
			}
			n.mu.Unlock()
		}
		n.reading.Unlock()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	i, found := slices.BinarySearchFunc(n.ranges, slot, func(r slotRange, s uint16) int {
		switch {
		case r.last < s:
			return -1
		case r.first > s:
			return 1
		}
		return 0
	})
	if !found {
		return ""
	}
	return n.ranges[i].node
}

// fetch reads CLUSTER SLOTS from the first node that answers within replyGrace, and returns
// the slots' masters, or nil if no node answered.
func (n *slotNodes) fetch() []slotRange {
	for _, node := range n.c.rc.Nodes() {
		ctx, cancel := giveUpAfter(n.c.ctx, replyGrace)
		entries, err := node.Do(ctx, node.B().ClusterSlots().Build()).ToArray()
		cancel()
		if err != nil {
			continue
		}
		var ranges []slotRange
		for _, e := range entries {
			f, err := e.ToArray()
			if err != nil || len(f) < 3 {
				continue
			}
			first, err1 := f[0].AsInt64()
			last, err2 := f[1].AsInt64()
			m, err3 := f[2].ToArray()
			if err1 != nil || err2 != nil || err3 != nil || len(m) < 2 {
				continue
			}
			host, err1 := m[0].ToString()
			port, err2 := m[1].AsInt64()
			if err1 != nil || err2 != nil {
				continue
			}
			ranges = append(ranges, slotRange{uint16(first), uint16(last),
				net.JoinHostPort(host, strconv.FormatInt(port, 10))})
		}
		slices.SortFunc(ranges, func(a, b slotRange) int { return int(a.first) - int(b.first) })
		return ranges
	}
	return nil
}

// logKey is the quiet log's key of work (such as "renewal") on slot's node, and the log
// attributes that name the node; failing: the work just failed (see of).
func (n *slotNodes) logKey(work string, slot uint16, failing bool) (string, []any) {
	node := n.of(slot, failing)
	if node == "" {
		return work, nil
	}
	return work + " " + node, []any{"node", node}
}
