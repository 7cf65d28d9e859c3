package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// clusterScript starts a throwaway 3-master + 3-replica cluster, runs a command with
// REDIS_CLUSTER_ADDRS set, and stops every server by PID when the command ends.
const clusterScript = "scripts/with-cluster.sh"

// clusterWait is the command the benchmark has clusterScript run: it prints the node
// addresses and waits for the end of its input, which comes when the benchmark closes the
// pipe or dies.
const clusterWait = `echo "$REDIS_CLUSTER_ADDRS"; exec cat >/dev/null`

// clusterProc is a running clusterScript.
type clusterProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr syncBuffer
	done   chan struct{} // closed when the script has exited
	// started is the script's last line once the cluster was ready: versions, PIDs, start time.
	started string
}

// startCluster returns the cluster at REDIS_CLUSTER_ADDRS (comma-separated node addresses),
// or starts one with clusterScript, found from the working directory up. The nodes' roles are
// read from the nodes themselves.
func startCluster(ctx context.Context) (*redisServer, error) {
	s := &redisServer{Topology: topoCluster}
	if env := os.Getenv("REDIS_CLUSTER_ADDRS"); env != "" {
		s.Addrs = splitAddrs(env)
	} else {
		script, err := findUp(clusterScript)
		if err != nil {
			return nil, fmt.Errorf("-topology cluster needs REDIS_CLUSTER_ADDRS or %s: %w", clusterScript, err)
		}
		cp, addrs, err := runClusterScript(ctx, script)
		if err != nil {
			return nil, err
		}
		s.Addrs, s.Started, s.cluster = addrs, true, cp
	}
	if len(s.Addrs) == 0 {
		s.Stop()
		return nil, errors.New("no cluster node addresses")
	}
	for _, addr := range s.Addrs {
		info, err := nodeInfo(ctx, addr, "server", "replication", "cluster")
		if err != nil {
			s.Stop()
			return nil, fmt.Errorf("cluster node %s: %w", addr, err)
		}
		if infoField(info, "cluster_enabled") != "1" {
			s.Stop()
			return nil, fmt.Errorf("%s is not a cluster node (cluster_enabled:%s)", addr, infoField(info, "cluster_enabled"))
		}
		s.Version = infoField(info, "redis_version")
		if infoField(info, "role") == "master" {
			s.Masters = append(s.Masters, addr)
		} else {
			s.Replicas = append(s.Replicas, addr)
		}
	}
	if len(s.Masters) == 0 {
		s.Stop()
		return nil, errors.New("no master among the cluster nodes")
	}
	return s, nil
}

// splitAddrs splits a comma-separated address list, dropping empty entries.
func splitAddrs(list string) []string {
	var addrs []string
	for a := range strings.SplitSeq(list, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// findUp looks for the file rel in the working directory and its parents.
func findUp(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%s not found in the working directory or above", rel)
		}
		dir = parent
	}
}

// runClusterScript starts script with clusterWait and returns once it has printed the
// addresses. The script gets a process group of its own, so Ctrl-C reaches only the
// benchmark, which stops the cluster when it is done.
func runClusterScript(ctx context.Context, script string) (*clusterProc, []string, error) {
	cp := &clusterProc{done: make(chan struct{})}
	cp.cmd = exec.Command(script, "sh", "-c", clusterWait)
	cp.cmd.Stderr = &cp.stderr
	cp.cmd.SysProcAttr = scriptProcAttr()
	// The servers inherit the script's output; do not wait for them to close it.
	cp.cmd.WaitDelay = 5 * time.Second
	var err error
	if cp.stdin, err = cp.cmd.StdinPipe(); err != nil {
		return nil, nil, err
	}
	stdout, err := cp.cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cp.cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start %s: %w", script, err)
	}
	go func() { _ = cp.cmd.Wait(); close(cp.done) }()
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- strings.TrimSpace(l)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	fail := func(why string) (*clusterProc, []string, error) {
		cp.stop()
		return nil, nil, fmt.Errorf("%s %s: %s", script, why, lastLine(cp.stderr.String()))
	}
	// The script may install redis-server first.
	select {
	case l := <-line:
		if l == "" {
			return fail("printed no addresses")
		}
		cp.started = lastLine(cp.stderr.String())
		return cp, splitAddrs(l), nil
	case <-cp.done:
		return fail("exited")
	case <-time.After(3 * time.Minute):
		return fail("gave no addresses in 3 minutes")
	case <-ctx.Done():
		cp.stop()
		return nil, nil, ctx.Err()
	}
}

// stop closes the script's input, which ends its command; the script then stops every server
// by PID. If it has not exited after 20s it is sent SIGTERM (its trap stops the servers), and
// SIGKILL 20s later.
func (cp *clusterProc) stop() {
	_ = cp.stdin.Close()
	for _, step := range []func(){func() {}, func() { _ = cp.cmd.Process.Signal(termSignal) }, func() { _ = cp.cmd.Process.Kill() }} {
		step()
		select {
		case <-cp.done:
			return
		case <-time.After(20 * time.Second):
		}
	}
	<-cp.done
}
