package redistest

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

// Cluster is the Redis Cluster at REDIS_CLUSTER_ADDRS (scripts/with-cluster.sh), its nodes
// reached directly, whatever deployment the suite runs on.
type Cluster struct {
	Addrs []string
	Nodes []Node
}

// ClusterFromEnv returns the cluster at REDIS_CLUSTER_ADDRS with a client of each node, closed
// when the test ends; it skips t when that is not set.
func ClusterFromEnv(t *testing.T) *Cluster {
	t.Helper()
	c := ClusterAddrsFromEnv(t)
	for _, a := range c.Addrs {
		c.Nodes = append(c.Nodes, NewNode(t, a))
	}
	return c
}

// ClusterAddrsFromEnv returns the cluster at REDIS_CLUSTER_ADDRS with no node clients yet; it
// skips t when that is not set.
func ClusterAddrsFromEnv(t *testing.T) *Cluster {
	t.Helper()
	env := os.Getenv("REDIS_CLUSTER_ADDRS")
	if env == "" {
		t.Skip("REDIS_CLUSTER_ADDRS is not set (scripts/with-cluster.sh sets it)")
	}
	return &Cluster{Addrs: strings.Split(env, ",")}
}

// Client returns a rueidis cluster client of c, closed when the test ends unless closed before.
func (c *Cluster) Client(t *testing.T) rueidis.Client {
	t.Helper()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs, DisableCache: true})
	require.NoError(t, err)
	require.Equal(t, rueidis.ClientModeCluster, rc.Mode())
	var once sync.Once
	t.Cleanup(func() { once.Do(rc.Close) })
	return rc
}

// MastersNow are the nodes that are masters now; it requires 3.
func (c *Cluster) MastersNow(t *testing.T) []Node {
	var ms []Node
	for _, n := range c.Nodes {
		if n.Role(t) == "master" {
			ms = append(ms, n)
		}
	}
	require.Len(t, ms, 3)
	return ms
}

// Owner returns the address of the master serving key's slot now.
func (c *Cluster) Owner(t *testing.T, key string) string {
	slot, err := c.Nodes[0].Do(t, "CLUSTER", "KEYSLOT", key).AsInt64()
	require.NoError(t, err)
	slots, err := ClusterSlots(c.Nodes[0].Do(t, "CLUSTER", "SLOTS"))
	require.NoError(t, err)
	for _, s := range slots {
		if slot >= int64(s.Lo) && slot <= int64(s.Hi) {
			return s.Master
		}
	}
	t.Fatalf("no owner for slot %d", slot)
	return ""
}

// LeftChannels reports, per node, the channels of prefix still subscribed, their total over
// the nodes and how many distinct channels that is.
func (c *Cluster) LeftChannels(t *testing.T, prefix string) (detail string, total, distinct int) {
	var b strings.Builder
	seen := map[string]bool{}
	for _, n := range c.Nodes {
		classic, sharded := n.Channels(t, prefix+":*")
		total += len(classic) + len(sharded)
		for _, ch := range append(classic, sharded...) {
			seen[ch] = true
		}
		fmt.Fprintf(&b, " %s(%s)=%d+%d", n.Addr, n.Role(t), len(classic), len(sharded))
	}
	return b.String(), total, len(seen)
}
