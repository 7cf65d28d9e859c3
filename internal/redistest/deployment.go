package redistest

import (
	"fmt"
	"os"
	"strings"

	"github.com/redis/rueidis"
)

// TopologyEnv names the deployment the tests run on:
//
//	standalone  the default: one server at REDIS_ADDR
//	cluster     a Redis Cluster whose nodes are REDIS_CLUSTER_ADDRS (scripts/with-cluster.sh)
//	sentinel    a primary and replicas behind the sentinels REDIS_SENTINEL_ADDRS, with
//	            REDIS_SENTINEL_MASTER and REDIS_SENTINEL_DATA (scripts/with-sentinel.sh)
const TopologyEnv = "RLOCK_TEST_TOPOLOGY"

// Deployment is a Redis deployment the tests run on.
type Deployment struct {
	Topology  string   // "standalone", "cluster" or "sentinel"
	Addrs     []string // what clients are given: the server, the cluster's nodes or the sentinels
	MasterSet string   // sentinel: the primary's name
	Data      []string // every data node: the server, the cluster's nodes, or primary and replicas
}

// DeploymentFromEnv returns the deployment TopologyEnv names, or an error naming the variable
// that is missing.
func DeploymentFromEnv() (Deployment, error) {
	list := func(name string) ([]string, error) {
		v := os.Getenv(name)
		if v == "" {
			return nil, fmt.Errorf("%s=%s needs %s", TopologyEnv, os.Getenv(TopologyEnv), name)
		}
		return strings.Split(v, ","), nil
	}
	switch topo := os.Getenv(TopologyEnv); topo {
	case "", "standalone":
		addrs, err := list("REDIS_ADDR")
		return Deployment{Topology: "standalone", Addrs: addrs, Data: addrs}, err
	case "cluster":
		addrs, err := list("REDIS_CLUSTER_ADDRS")
		return Deployment{Topology: topo, Addrs: addrs, Data: addrs}, err
	case "sentinel":
		addrs, err1 := list("REDIS_SENTINEL_ADDRS")
		data, err2 := list("REDIS_SENTINEL_DATA")
		master := os.Getenv("REDIS_SENTINEL_MASTER")
		if master == "" {
			master = "rlock"
		}
		if err1 != nil {
			return Deployment{}, err1
		}
		return Deployment{Topology: topo, Addrs: addrs, MasterSet: master, Data: data}, err2
	default:
		return Deployment{}, fmt.Errorf("%s=%q: want standalone, cluster or sentinel", TopologyEnv, topo)
	}
}

// Standalone is the deployment of the one server at addr.
func Standalone(addr string) Deployment {
	return Deployment{Topology: "standalone", Addrs: []string{addr}, Data: []string{addr}}
}

// ClientOption returns the options of a rueidis client of d.
func (d Deployment) ClientOption() rueidis.ClientOption {
	o := rueidis.ClientOption{InitAddress: d.Addrs, DisableCache: true}
	if d.Topology == "sentinel" {
		o.Sentinel = rueidis.SentinelOption{MasterSet: d.MasterSet}
	}
	return o
}

// NewClient returns a rueidis client of d; the caller closes it.
func (d Deployment) NewClient() (rueidis.Client, error) {
	return rueidis.NewClient(d.ClientOption())
}
