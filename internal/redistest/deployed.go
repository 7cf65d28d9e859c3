package redistest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Deployed is a Deployment opened: an admin client of it and direct clients of its data
// nodes, as the nodes' roles were when it was opened (the suite's do not change).
type Deployed struct {
	Deployment
	Admin    rueidis.Client    // routes keyed commands as the library's clients do
	Nodes    []Node            // every data node
	Masters  []Node            // the cluster's masters, or the primary
	Replicas map[string][]Node // each master's, by its address
	Slots    []SlotRange       // cluster: which master serves which slots

	slotOf sync.Map // key -> its hash slot (CLUSTER KEYSLOT), asked once
}

// SlotRange is a range of cluster hash slots and the address of the master serving them.
type SlotRange struct {
	Lo, Hi uint16
	Master string
}

// ClusterSlots reads a CLUSTER SLOTS reply: each slot range and its master's address.
func ClusterSlots(res rueidis.RedisResult) ([]SlotRange, error) {
	shards, err := res.ToArray()
	if err != nil {
		return nil, err
	}
	var slots []SlotRange
	for _, s := range shards {
		v, err := s.ToArray()
		if err != nil || len(v) < 3 {
			return nil, fmt.Errorf("CLUSTER SLOTS: bad entry %v", s)
		}
		lo, _ := v[0].AsInt64()
		hi, _ := v[1].AsInt64()
		mv, _ := v[2].ToArray()
		host, _ := mv[0].ToString()
		port, _ := mv[1].AsInt64()
		slots = append(slots, SlotRange{uint16(lo), uint16(hi), net.JoinHostPort(host, strconv.FormatInt(port, 10))})
	}
	return slots, nil
}

// Open connects to d's nodes and finds their roles; on error it leaves no client open. The
// caller closes the result.
func Open(d Deployment) (_ *Deployed, err error) {
	dep := &Deployed{Deployment: d, Replicas: map[string][]Node{}}
	defer func() {
		if err != nil {
			dep.Close()
		}
	}()
	if dep.Admin, err = d.NewClient(); err != nil {
		return nil, fmt.Errorf("%s deployment at %v: %w", d.Topology, d.Addrs, err)
	}
	for _, a := range d.Data {
		n, err := OpenNode(a)
		if err != nil {
			return nil, err
		}
		dep.Nodes = append(dep.Nodes, n)
	}
	for _, n := range dep.Nodes {
		info, err := n.Info("replication")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.Addr, err)
		}
		switch info["role"] {
		case "master":
			dep.Masters = append(dep.Masters, n)
		case "slave":
			m := net.JoinHostPort(info["master_host"], info["master_port"])
			dep.Replicas[m] = append(dep.Replicas[m], n)
		}
	}
	if len(dep.Masters) == 0 || (d.Topology != "cluster" && len(dep.Masters) != 1) {
		return nil, fmt.Errorf("%s deployment: masters %d", d.Topology, len(dep.Masters))
	}
	if d.Topology == "cluster" {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m := dep.Masters[0]
		if dep.Slots, err = ClusterSlots(m.RC.Do(ctx, m.RC.B().ClusterSlots().Build())); err != nil {
			return nil, err
		}
	}
	return dep, nil
}

// Close closes d's clients.
func (d *Deployed) Close() {
	if d.Admin != nil {
		d.Admin.Close()
	}
	for _, n := range d.Nodes {
		n.RC.Close()
	}
}

// ChannelsLeft waits up to 3s for no channel matching pattern, classic or sharded, to be
// subscribed on any data node, and describes those that still are ("" for none).
func (d *Deployed) ChannelsLeft(pattern string) string {
	deadline := time.Now().Add(3 * time.Second)
	for {
		var b strings.Builder
		for _, n := range d.Nodes {
			for _, cmd := range []string{"CHANNELS", "SHARDCHANNELS"} {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				chs, err := n.RC.Do(ctx, n.RC.B().Arbitrary("PUBSUB", cmd, pattern).Build()).AsStrSlice()
				cancel()
				if err != nil || len(chs) > 0 {
					fmt.Fprintf(&b, " %s %s: %v %v;", n.Addr, cmd, chs, err)
				}
			}
		}
		if b.Len() == 0 || time.Now().After(deadline) {
			return b.String()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// slot is the cluster hash slot of key, as CLUSTER KEYSLOT on the first node that answers says
// (asked once per key); it panics if no node answers.
func (d *Deployed) slot(key string) uint16 {
	if s, ok := d.slotOf.Load(key); ok {
		return s.(uint16)
	}
	for _, n := range d.Nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s, err := n.RC.Do(ctx, n.RC.B().ClusterKeyslot().Key(key).Build()).AsInt64()
		cancel()
		if err == nil {
			d.slotOf.Store(key, uint16(s))
			return uint16(s)
		}
	}
	panic("no node answers CLUSTER KEYSLOT " + key)
}

// MasterOf is the master that serves key (as the slots were when d was opened); it panics if
// none does.
func (d *Deployed) MasterOf(key string) Node {
	if d.Topology != "cluster" {
		return d.Masters[0]
	}
	s := d.slot(key)
	for _, r := range d.Slots {
		if s >= r.Lo && s <= r.Hi {
			for _, m := range d.Masters {
				if m.Addr == r.Master {
					return m
				}
			}
		}
	}
	panic(fmt.Sprintf("no master serves slot %d of %s", s, key))
}

// WaitSteady waits until every node answers, every master has its replicas online and every
// replica its link up and synced, and (cluster) every node says cluster_state:ok; it fails t
// after within.
func (d *Deployed) WaitSteady(t testing.TB, within time.Duration) {
	t.Helper()
	why := "?"
	steady := func() bool {
		for _, n := range d.Nodes {
			info, err := n.Info("replication")
			if err != nil {
				why = n.Addr + ": " + err.Error()
				return false
			}
			switch info["role"] {
			case "master":
				want := len(d.Replicas[n.Addr])
				if info["connected_slaves"] != strconv.Itoa(want) {
					why = n.Addr + ": connected_slaves " + info["connected_slaves"]
					return false
				}
				for i := range want {
					if !strings.Contains(info[fmt.Sprintf("slave%d", i)], "state=online") {
						why = n.Addr + ": a replica is not online"
						return false
					}
				}
				// Online is not enough: a replica fresh from a full sync may not answer WAIT's
				// GETACK until its first periodic ACK, up to a second later.
				if want > 0 {
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					r := n.RC.DoMulti(ctx, n.RC.B().Set().Key(d.probeKey(n)).Value("1").Px(time.Second).Build(),
						n.RC.B().Wait().Numreplicas(int64(want)).Timeout(100).Build())
					cancel()
					if acked, err := r[1].AsInt64(); err != nil || acked < int64(want) {
						why = fmt.Sprintf("%s: %d of %d replicas acknowledge writes (%v)", n.Addr, acked, want, err)
						return false
					}
				}
			default:
				if info["master_link_status"] != "up" || info["master_sync_in_progress"] != "0" {
					why = n.Addr + ": replica link down or syncing"
					return false
				}
			}
			if d.Topology == "cluster" {
				ci, err := n.Do(t, "CLUSTER", "INFO").ToString()
				if err != nil || !strings.Contains(ci, "cluster_state:ok") {
					why = n.Addr + ": cluster_state not ok"
					return false
				}
			}
		}
		return true
	}
	WaitHealthy(t, "the "+d.Topology+" deployment", within, func() string {
		if steady() {
			return ""
		}
		return why
	})
}

// probeKey is a key that the master m serves, for WaitSteady's writes (it expires at once).
func (d *Deployed) probeKey(m Node) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("rltest-probe-%d", i)
		if d.MasterOf(k).Addr == m.Addr {
			return k
		}
	}
}

// WaitHealthy polls unhealthy, which says why what is not healthy yet ("" once it is), until
// it returns "", and fails t if that takes longer than within.
func WaitHealthy(t testing.TB, what string, within time.Duration, unhealthy func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		why := unhealthy()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is not steady after %v: %s", what, within, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
