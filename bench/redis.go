package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock/internal/redistest"
)

// Topologies (-topology).
const (
	topoStandalone = "standalone"
	topoCluster    = "cluster"
)

// redisServer is the Redis the benchmark talks to: a throwaway redis-server or cluster it
// started, or the one REDIS_ADDR (REDIS_CLUSTER_ADDRS) names.
type redisServer struct {
	Topology string
	Addrs    []string // what clients connect to: the server, or every node of the cluster
	Masters  []string // the nodes measured (INFO, MONITOR): the server, or the cluster's masters
	Replicas []string // the cluster's replicas
	Version  string
	Started  bool // true when this program started it (and must stop it)

	srv  *redistest.Server // the redis-server this program started
	done <-chan struct{}   // closed when the started process has exited
	log  bytes.Buffer

	cluster *clusterProc // the scripts/with-cluster.sh running the cluster, if this program started it
}

// Cluster reports whether the server is a Redis Cluster.
func (s *redisServer) Cluster() bool { return s.Topology == topoCluster }

// Describe says where the server is, for the progress line and the JSON.
func (s *redisServer) Describe() string {
	if !s.Cluster() {
		return s.Addrs[0]
	}
	return fmt.Sprintf("%d masters (%s) + %d replicas (%s)", len(s.Masters), strings.Join(s.Masters, ","),
		len(s.Replicas), strings.Join(s.Replicas, ","))
}

// startRedis returns the server of topology: for standalone the one at REDIS_ADDR, or
// redis-server started on a free loopback port with persistence off (redistest.StartServer);
// for cluster see
// startCluster.
func startRedis(ctx context.Context, topology string) (*redisServer, error) {
	switch topology {
	case topoStandalone:
	case topoCluster:
		return startCluster(ctx)
	default:
		return nil, fmt.Errorf("unknown topology %q (have %s, %s)", topology, topoStandalone, topoCluster)
	}
	if addr := os.Getenv("REDIS_ADDR"); addr != "" {
		s := &redisServer{Topology: topoStandalone, Addrs: []string{addr}, Masters: []string{addr}}
		return s, s.waitReady(ctx, 5*time.Second)
	}
	s := &redisServer{Topology: topoStandalone, Started: true}
	srv, err := redistest.StartServer(redistest.ServerOptions{
		Args:        []string{"--maxclients", "10000", "--loglevel", "warning"},
		Output:      &s.log,
		SysProcAttr: childProcAttr(),
	})
	if err != nil {
		return nil, fmt.Errorf("%w (install redis-server, e.g. apt-get install redis-server, or set REDIS_ADDR); redis-server output: %s",
			err, strings.TrimSpace(s.log.String()))
	}
	s.srv, s.done = srv, srv.Exited()
	s.Addrs, s.Masters = []string{srv.Addr}, []string{srv.Addr}
	if err := s.waitReady(ctx, 10*time.Second); err != nil {
		s.Stop()
		return nil, fmt.Errorf("%w; redis-server output: %s", err, strings.TrimSpace(s.log.String()))
	}
	return s, nil
}

// waitReady pings the server until it answers, and reads its version.
func (s *redisServer) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if s.done != nil {
			select {
			case <-s.done:
				return errors.New("redis-server exited at start")
			default:
			}
		}
		info, err := nodeInfo(ctx, s.Addrs[0], "server")
		if err == nil {
			s.Version = infoField(info, "redis_version")
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis at %s not ready after %v: %w", s.Addrs[0], limit, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// nodeInfo asks the server at addr (that node alone, not the cluster) for INFO sections.
func nodeInfo(ctx context.Context, addr string, sections ...string) (string, error) {
	c, err := newNodeClient(addr, func(o *rueidis.ClientOption) { o.DisableRetry = true })
	if err != nil {
		return "", err
	}
	defer c.Close()
	return c.Do(ctx, c.B().Info().Section(sections...).Build()).ToString()
}

// Stop stops the server if this program started it, by its PID, and removes its directory
// (see redistest.Server.Stop).
func (s *redisServer) Stop() {
	if s.cluster != nil {
		s.cluster.stop()
		return
	}
	if s.srv != nil {
		s.srv.Stop()
	}
}

// infoField reads one "name:value" line of an INFO reply.
func infoField(info, name string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// commandStats is INFO commandstats as calls per command name
// ("evalsha", "client|tracking", ...).
type commandStats map[string]int64

// parseCommandStats reads the calls of each command from the reply of INFO commandstats.
func parseCommandStats(info string) commandStats { return parseCommandStatsField(info, "calls") }

// parseCommandStatsField reads one integer field ("calls", "usec") of each command from the
// reply of INFO commandstats.
func parseCommandStatsField(info, field string) commandStats {
	st := commandStats{}
	for line := range strings.SplitSeq(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
		if !ok {
			continue
		}
		name, fields, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		for f := range strings.SplitSeq(fields, ",") {
			if v, ok := strings.CutPrefix(f, field+"="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				st[name] = n
			}
		}
	}
	return st
}

// serverCPU is what one INFO reply says about Redis' CPU: its process CPU time (used_cpu_user
// plus used_cpu_sys, the whole process) and the time spent in each command (commandstats usec;
// a script's usec includes the calls it made, which are counted again under their own names).
type serverCPU struct {
	CPU  time.Duration
	Usec commandStats
	// Calls are the commandstats calls, to count the scripts the Usec belong to.
	Calls commandStats
}

// parseServerCPU reads INFO cpu and commandstats from one reply.
func parseServerCPU(info string) serverCPU {
	var cpu float64
	for _, f := range []string{"used_cpu_user", "used_cpu_sys"} {
		v, _ := strconv.ParseFloat(infoField(info, f), 64)
		cpu += v
	}
	return serverCPU{CPU: time.Duration(cpu * 1e9), Usec: parseCommandStatsField(info, "usec"),
		Calls: parseCommandStats(info)}
}

// readServerCPU asks Redis for its CPU time and command times.
func readServerCPU(ctx context.Context, c rueidis.Client) (serverCPU, error) {
	info, err := c.Do(ctx, c.B().Info().Section("cpu", "commandstats").Build()).ToString()
	if err != nil {
		return serverCPU{}, err
	}
	return parseServerCPU(info), nil
}

// usedMemory reads INFO memory used_memory, in bytes.
func usedMemory(ctx context.Context, c rueidis.Client) (int64, error) {
	info, err := c.Do(ctx, c.B().Info().Section("memory").Build()).ToString()
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(infoField(info, "used_memory"), 10, 64)
}

// scriptCommands are the commands that run a script. A script cannot run
// another script, so every call of these was sent by a client.
var scriptCommands = []string{"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"}

// delta returns after-before per command, leaving out the benchmark's own
// INFO and marker ECHO calls.
func (after commandStats) delta(before commandStats) commandStats {
	d := commandStats{}
	for k, v := range after {
		if k == "info" || k == "echo" {
			continue
		}
		if n := v - before[k]; n != 0 {
			d[k] = n
		}
	}
	return d
}

// scripts sums the script commands.
func (st commandStats) scripts() int64 {
	var n int64
	for _, k := range scriptCommands {
		n += st[k]
	}
	return n
}

// total sums every command, including the ones scripts ran inside.
func (st commandStats) total() int64 {
	var n int64
	for _, v := range st {
		n += v
	}
	return n
}
