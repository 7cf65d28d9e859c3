package failover_test

// Failover measurements (issue 8): what a hold, a waiter and a second client see when Redis
// fails over. Every test skips unless its deployment is set up, and on the deployment that the
// rest of the suite runs on (redistest.TopologyEnv):
//
//	CLUSTER_NODE_TIMEOUT=2000 scripts/with-cluster.sh go test -count=1 -run '^TestFailover_cluster' -v ./internal/failover
//	scripts/with-sentinel.sh go test -count=1 -run '^TestFailover_sentinel' -v ./internal/failover
//
// They report figures with t.Logf. They fail when a lock misbehaves in a way no failover
// excuses: a hold context left running after its lease was found gone, a waiter never woken
// after the holder let go, a subscription left behind; double grants with a lagging replica
// are what replication allows, and are only counted, as are holds with a short lease lost to a
// kill -9 failover. The trial counts can be changed with RLOCK_FAILOVER_TRIALS (cluster, default
// 20), RLOCK_FAILOVER_KILL_ROUNDS (default 4), RLOCK_FAILOVER_SENTINEL_TRIALS (default 3) and
// RLOCK_FAILOVER_ROUNDS (the in-sync tests, default 2). The cluster tests take about 2.5
// minutes in all, the Sentinel ones about 3. make test runs the in-sync ones, the kill -9
// one with a 6s lease and the kill -9 right after a hold (afterhold_test.go), one round each.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
)

// ---- small tools ----

// foDo runs a command on one node with a timeout of its own (a stopped node must not hang
// the test).
func foDo(n node, args ...string) rueidis.RedisResult {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return n.RC.Do(ctx, n.RC.B().Arbitrary(args...).Build())
}

// foSignal sends sig to the process pid (a server that one of the with-* scripts started).
func foSignal(t *testing.T, pid int, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, syscall.Kill(pid, sig))
}

// foRaw is a bare RESP connection: for a command that must be queued on a stopped server, and
// for Sentinel's event channels.
type foRaw struct {
	c net.Conn
	r *bufio.Reader
}

func foDial(addr string) (*foRaw, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	return &foRaw{c: c, r: bufio.NewReader(c)}, nil
}

func (x *foRaw) send(args ...string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	_, err := io.WriteString(x.c, b.String())
	return err
}

// read reads one reply: a string, an int64, an error (a Redis error reply is returned as the
// value, not as err) or a []any.
func (x *foRaw) read() (any, error) {
	line, err := x.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty RESP line")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return errors.New(line[1:]), nil
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return nil, err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(x.r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return nil, err
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = x.read(); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected RESP line %q", line)
}

// foLog collects an rlock client's warnings with their times.
type foLog struct {
	mu    sync.Mutex
	lines []foLine
}

type foLine struct {
	at   time.Time
	text string
}

func (l *foLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, foLine{time.Now(), strings.TrimSpace(string(p))})
	return len(p), nil
}

func (l *foLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

func (l *foLog) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// since summarizes the warnings logged from t0 on: how many, and the first and last of them
// with their times relative to t0.
func (l *foLog) since(t0 time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var got []foLine
	for _, x := range l.lines {
		if !x.at.Before(t0) {
			got = append(got, x)
		}
	}
	if len(got) == 0 {
		return "no warnings"
	}
	short := func(x foLine) string {
		s := x.text
		if i := strings.Index(s, "msg="); i >= 0 {
			s = s[i:]
		}
		if len(s) > 200 {
			s = s[:200] + "..."
		}
		return fmt.Sprintf("+%v %s", x.at.Sub(t0).Round(time.Millisecond), s)
	}
	if len(got) == 1 {
		return "1 warning: " + short(got[0])
	}
	return fmt.Sprintf("%d warnings, first %s; last %s", len(got), short(got[0]), short(got[len(got)-1]))
}

// foNotTheSuites skips t when the rest of the suite runs on the deployment of topology: a
// failover would disturb the tests after it. make test runs the failover tests on a
// deployment of their own, with the suite on the standalone server.
func foNotTheSuites(t *testing.T, topology string) {
	t.Helper()
	redistest.NeedsRedis(t)
	if redistest.Suite().Topology == topology {
		t.Skipf("fails the %s over, which the other tests run on (%s=%s): run it with the suite on "+
			"the standalone server (%s unset)", topology, redistest.TopologyEnv, topology, redistest.TopologyEnv)
	}
}

// foPrefix is a key prefix of its own for one test.
func foPrefix() string { return redistest.NewPrefix("rlfo") }

// ---- cluster ----

// foCluster is the cluster at REDIS_CLUSTER_ADDRS, with what it takes to start a node again
// after a test killed it.
type foCluster struct {
	*redistest.Cluster
	byAddr map[string]node
	top    *testing.T // the test that made it: nodes started again run until it ends
}

// foNodeConf is how a cluster node was started, read from its CONFIG.
type foNodeConf struct {
	dir, conf, bus, timeout, logfile string
}

var (
	foConfMu sync.Mutex
	foConfs  = map[string]foNodeConf{} // by address, recorded when a test first meets the node
)

func foClusterFromEnv(t *testing.T) *foCluster {
	t.Helper()
	c := redistest.ClusterAddrsFromEnv(t)
	foNotTheSuites(t, "cluster")
	f := &foCluster{Cluster: c, byAddr: map[string]node{}, top: t}
	for _, a := range f.Addrs {
		// A node that an earlier test of this file killed (and whose replacement that test
		// stopped when it ended) is started again, as a process of this test.
		if !foPings(a) {
			f.restart(t, a)
		}
		n := redistest.NewNode(t, a)
		f.Nodes = append(f.Nodes, n)
		f.byAddr[a] = n
	}
	foConfMu.Lock()
	defer foConfMu.Unlock()
	for _, n := range f.Nodes {
		if _, ok := foConfs[n.Addr]; ok {
			continue
		}
		get := func(name string) string {
			kv, err := foDo(n, "CONFIG", "GET", name).AsStrMap() // a map in RESP3
			if err != nil {
				return ""
			}
			return kv[name]
		}
		foConfs[n.Addr] = foNodeConf{get("dir"), get("cluster-config-file"), get("cluster-port"),
			get("cluster-node-timeout"), get("logfile")}
	}
	return f
}

// foPings reports whether a server answers PING at addr.
func foPings(addr string) bool {
	raw, err := foDial(addr)
	if err != nil {
		return false
	}
	defer raw.c.Close()
	_ = raw.c.SetDeadline(time.Now().Add(time.Second))
	if raw.send("PING") != nil {
		return false
	}
	v, err := raw.read()
	return err == nil && v == "PONG"
}

// restart starts the cluster node at addr again from its nodes.conf (it rejoins as a replica
// of whoever took its slots); the process is stopped, by its PID, when f's test ends.
func (f *foCluster) restart(t *testing.T, addr string) {
	t.Helper()
	foConfMu.Lock()
	conf, ok := foConfs[addr]
	foConfMu.Unlock()
	require.True(t, ok && conf.conf != "", "no start-up settings known for %s", addr)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("redis-server", "--port", port, "--cluster-port", conf.bus, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--cluster-enabled", "yes", "--cluster-config-file", conf.conf,
		"--cluster-node-timeout", conf.timeout, "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
		"--enable-debug-command", "yes", "--dir", conf.dir, "--logfile", conf.logfile)
	require.NoError(t, cmd.Start())
	f.top.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	require.Eventually(t, func() bool { return foPings(addr) }, 10*time.Second, 20*time.Millisecond,
		"%s did not start again", addr)
	t.Logf("started %s again (pid %d)", addr, cmd.Process.Pid)
}

// slotsOf is the slot map as node n sees it: one owner address per slot range.
func (f *foCluster) slotsOf(n node) (map[[2]int64]string, error) {
	slots, err := redistest.ClusterSlots(foDo(n, "CLUSTER", "SLOTS"))
	if err != nil {
		return nil, err
	}
	m := map[[2]int64]string{}
	for _, s := range slots {
		m[[2]int64{int64(s.Lo), int64(s.Hi)}] = s.Master
	}
	return m, nil
}

// unhealthy says why the cluster is not in its steady state, or "": every node answers with
// cluster_state:ok and no failing node, 3 masters with one online replica each, every
// replica's link up and synced, and every node sees the same slot map.
func (f *foCluster) unhealthy() string {
	var first map[[2]int64]string
	masters := 0
	for _, n := range f.Nodes {
		ci, err := foDo(n, "CLUSTER", "INFO").ToString()
		if err != nil {
			return n.Addr + ": " + err.Error()
		}
		if !strings.Contains(ci, "cluster_state:ok") {
			return n.Addr + ": cluster_state not ok"
		}
		cn, err := foDo(n, "CLUSTER", "NODES").ToString()
		if err != nil {
			return n.Addr + ": " + err.Error()
		}
		for _, l := range strings.Split(cn, "\n") {
			if strings.Contains(l, "fail") || strings.Contains(l, "handshake") {
				return n.Addr + ": a node is failing or in handshake: " + l
			}
		}
		info, err := n.Info("replication")
		if err != nil {
			return n.Addr + ": " + err.Error()
		}
		switch info["role"] {
		case "master":
			masters++
			if info["connected_slaves"] != "1" || !strings.Contains(info["slave0"], "state=online") {
				return n.Addr + ": master without an online replica"
			}
		case "slave":
			if info["master_link_status"] != "up" || info["master_sync_in_progress"] != "0" {
				return n.Addr + ": replica link down or syncing"
			}
		}
		m, err := f.slotsOf(n)
		if err != nil {
			return n.Addr + ": " + err.Error()
		}
		if first == nil {
			first = m
		} else if !mapsEqual(first, m) {
			return "the nodes disagree on the slot map"
		}
	}
	if masters != 3 {
		return fmt.Sprintf("%d masters", masters)
	}
	return ""
}

func mapsEqual(a, b map[[2]int64]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// shard returns the master that owns key's slot now and its replica.
func (f *foCluster) shard(t *testing.T, key string) (m, r node) {
	t.Helper()
	m = f.byAddr[f.ownerOf(t, key)]
	info, err := m.Info("replication")
	require.NoError(t, err)
	require.Equal(t, "master", info["role"], m.Addr)
	var port string
	for _, kv := range strings.Split(info["slave0"], ",") {
		if p, ok := strings.CutPrefix(kv, "port="); ok {
			port = p
		}
	}
	r, ok := f.byAddr["127.0.0.1:"+port]
	require.True(t, ok, "replica of %s: %q", m.Addr, info["slave0"])
	return m, r
}

// ownerOf is the address of the master that serves key's slot, as the first live node says.
func (f *foCluster) ownerOf(t *testing.T, key string) string {
	t.Helper()
	for _, n := range f.Nodes {
		slot, err := foDo(n, "CLUSTER", "KEYSLOT", key).AsInt64()
		if err != nil {
			continue
		}
		m, err := f.slotsOf(n)
		if err != nil {
			continue
		}
		for k, owner := range m {
			if slot >= k[0] && slot <= k[1] {
				return owner
			}
		}
	}
	t.Fatalf("no owner found for %s", key)
	return ""
}

// inSync waits until r has replicated everything m has.
func foWaitInSync(t *testing.T, m, r node) {
	t.Helper()
	require.Eventually(t, func() bool {
		mi, err1 := m.Info("replication")
		ri, err2 := r.Info("replication")
		return err1 == nil && err2 == nil && mi["master_repl_offset"] != "" &&
			mi["master_repl_offset"] == ri["slave_repl_offset"]
	}, 10*time.Second, 10*time.Millisecond, "%s did not catch up with %s", r.Addr, m.Addr)
}

func foRole(n node) string {
	info, err := n.Info("replication")
	if err != nil {
		return "down"
	}
	return info["role"]
}

// foRoutesTo is the node a rueidis cluster client sends key's commands to (an INFO that carries
// the key, which no node redirects), or the error.
func foRoutesTo(rc rueidis.Client, key string) string {
	ctx, cancel := context.WithTimeout(bg, 2*time.Second)
	defer cancel()
	s, err := rc.Do(ctx, rc.B().Arbitrary("INFO").Keys(key).Args("server").Build()).ToString()
	if err != nil {
		return err.Error()
	}
	for _, l := range strings.Split(s, "\r\n") {
		if p, ok := strings.CutPrefix(l, "tcp_port:"); ok {
			return "127.0.0.1:" + p
		}
	}
	return "?"
}

// ---- cluster: a lagging replica ----

// foLagTrial is one failover to a lagging replica.
type foLagTrial struct {
	acquireErr  error
	acquireTook time.Duration
	held        bool
	second      time.Duration // since the failover; -1: never within the window
	secondErr   error         // the second client's last error when it never got the lock
	double      bool          // the second client got the lock while the first still held it
	loss        time.Duration // since the failover (negative: before the TAKEOVER reply arrived)
	lossCause   error
	unlockErr   error
}

func (tr foLagTrial) String() string {
	s := "first: "
	switch {
	case tr.held:
		s += fmt.Sprintf("acquired in %v", redistest.Ms(tr.acquireTook))
	default:
		s += fmt.Sprintf("not acquired in %v (%v)", redistest.Ms(tr.acquireTook), tr.acquireErr)
	}
	if tr.second >= 0 {
		s += fmt.Sprintf("; second acquired %v after the failover", redistest.Ms(tr.second))
	} else {
		s += fmt.Sprintf("; second never acquired (%v)", tr.secondErr)
	}
	if tr.held {
		if tr.lossCause != nil {
			s += fmt.Sprintf("; first told of the loss after %v (%v)", redistest.Ms(tr.loss), tr.lossCause)
		} else {
			s += "; first never told of the loss"
		}
		s += fmt.Sprintf("; its Unlock: %v", tr.unlockErr)
	}
	if tr.double {
		s += "; DOUBLE GRANT"
	}
	return s
}

// TestFailover_clusterLagging_sync0 and _sync1: 20 trials each of a failover to a replica that
// lags. Per trial: stop the lock's master's replica (SIGSTOP) and cut its link (CLIENT KILL TYPE
// replica on the master), so the new hold reaches the master only; take a watchdog Mutex
// (WatchdogTimeout 6s: a renewal every 2s); queue CLUSTER FAILOVER TAKEOVER on the stopped
// replica and resume it, so it is promoted before it can reconnect. Then a second client tries
// the same lock every 20ms: a double grant is the second getting it while the first's hold
// context still runs. The first's loss notice is the delay from the failover to its hold
// context's cancellation with ErrLockLost.
func TestFailover_clusterLagging_sync0(t *testing.T) { foClusterLagging(t, 0) }

func TestFailover_clusterLagging_sync1(t *testing.T) { foClusterLagging(t, 1) }

func foClusterLagging(t *testing.T, syncReplicas int) {
	f := foClusterFromEnv(t)
	trials := redistest.Trials("RLOCK_FAILOVER_TRIALS", 20)
	const watchdog = 6 * time.Second
	prefix := foPrefix()
	var firstLog, secondLog foLog
	newClient := func(l *foLog) (*rlock.Client, rueidis.Client) {
		rc := f.Client(t)
		cl, err := rlock.New(rc, rlock.Options{KeyPrefix: prefix, WatchdogTimeout: watchdog,
			SyncReplicas: syncReplicas, SyncTimeout: 200 * time.Millisecond, Logger: l.logger()})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, cl.Close()) })
		return cl, rc
	}
	first, firstRC := newClient(&firstLog)
	second, secondRC := newClient(&secondLog)
	stale := 0 // trials that began with a client's slot map naming another node than the master

	var results []foLagTrial
	for i := range trials {
		redistest.WaitHealthy(t, "the cluster", 30*time.Second, f.unhealthy)
		name := fmt.Sprintf("lag%d", i)
		m, r := f.shard(t, prefix+":{"+name+"}")
		rpid := r.PID(t)
		// rueidis refreshes its slot map only after a MOVED (within 1s): make sure both clients
		// send this slot to its master, or the stopped replica would hang the trial's commands
		// (a command sent to a stopped node waits about 10s for rueidis' timeout).
		for who, rc := range map[string]rueidis.Client{"first": firstRC, "second": secondRC} {
			if at := foRoutesTo(rc, prefix+":{"+name+"}"); at != m.Addr {
				stale++
				began := time.Now()
				for at != m.Addr && time.Since(began) < 5*time.Second {
					// A keyed read gets MOVED from the old master, which makes rueidis refresh
					// its map (a client that got no MOVED since the failover never does).
					ctx, cancel := context.WithTimeout(bg, 2*time.Second)
					_ = rc.Do(ctx, rc.B().Exists().Key(prefix+":{"+name+"}").Build()).Error()
					cancel()
					time.Sleep(10 * time.Millisecond)
					at = foRoutesTo(rc, prefix+":{"+name+"}")
				}
				t.Logf("trial %d: the %s client's slot map sent %s to the old master (now a replica), "+
					"not to %s; %v later it sent it to %s", i, who, name, m.Addr, time.Since(began).Round(time.Millisecond), at)
				require.Equal(t, m.Addr, at, "trial %d: the %s client's slot map stays stale", i, who)
			}
		}
		// A random phase against the watchdog's renewals (every third of the lease).
		time.Sleep(time.Duration(rand.Int64N(int64(watchdog / 3))))

		// The replica stops, and the master drops its link: the hold will not reach it.
		foSignal(t, rpid, syscall.SIGSTOP)
		resumed := false
		defer func() {
			if !resumed {
				_ = syscall.Kill(rpid, syscall.SIGCONT)
			}
		}()
		killed, err := foDo(m, "CLIENT", "KILL", "TYPE", "replica").AsInt64()
		require.NoError(t, err)
		require.EqualValues(t, 1, killed, "replica links killed on %s", m.Addr)

		var tr foLagTrial
		start := time.Now()
		trialStart := start
		h, err := first.NewMutex(name).Lock(bg) // (the hold context derives from the one given)
		tr.acquireTook = time.Since(start)
		tr.acquireErr, tr.held = err, err == nil
		if syncReplicas > 0 {
			require.ErrorIs(t, err, rlock.ErrNotReplicated, "trial %d: a hold no replica acknowledged", i)
		} else {
			require.NoError(t, err, "trial %d", i)
		}
		var watch *redistest.CtxWatch
		if tr.held {
			watch = redistest.WatchCtx(h)
		}

		// Promote the stopped replica: TAKEOVER waits in its socket, so it is the first thing
		// the replica does when it runs again, before it can reconnect to its master.
		raw, err := foDial(r.Addr)
		require.NoError(t, err)
		require.NoError(t, raw.send("CLUSTER", "FAILOVER", "TAKEOVER"))
		foSignal(t, rpid, syscall.SIGCONT)
		resumed = true
		_ = raw.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		reply, err := raw.read()
		raw.c.Close()
		require.NoError(t, err)
		require.Equal(t, "OK", reply, "CLUSTER FAILOVER TAKEOVER on %s", r.Addr)
		failover := time.Now()

		// The second client tries the lock until it gets it (5s at most).
		tr.second = -1
		var hs context.Context
		for time.Since(failover) < 5*time.Second {
			ctx, cancel := context.WithTimeout(bg, 2*time.Second)
			hs, err = second.NewMutex(name).TryLock(ctx, 0)
			cancel()
			if err == nil {
				at := time.Now()
				tr.second = at.Sub(failover)
				if tr.held {
					lostAt, lost := watch.Ended()
					tr.double = !lost || lostAt.After(at)
				}
				break
			}
			tr.secondErr = err
			time.Sleep(20 * time.Millisecond)
		}

		// How long until the first holder learns (a renewal finds its owner missing)?
		tr.loss = -1
		if tr.held {
			told := false
			select {
			case <-watch.Done:
				told = true
				tr.loss = watch.At.Sub(failover) // negative: told before the TAKEOVER reply came back
				tr.lossCause = context.Cause(h)
			case <-time.After(3 * watchdog):
			}
			tr.unlockErr = first.NewMutex(name).Unlock(h)
			require.True(t, told, "trial %d: the first holder was never told that its hold is gone (%v later)", i, 3*watchdog)
			require.ErrorIs(t, tr.lossCause, rlock.ErrLockLost, "trial %d: the first hold ended, but not as lost", i)
		}
		if hs != nil {
			require.NoError(t, second.NewMutex(name).Unlock(hs), "trial %d: the second holder's Unlock", i)
		}
		t.Logf("trial %2d (%s -> %s): %v; first's log: %s", i, m.Addr, r.Addr, tr, firstLog.since(trialStart))
		results = append(results, tr)
	}

	var held, doubles, notRepl int
	var losses, seconds, acquires []time.Duration
	for _, tr := range results {
		acquires = append(acquires, tr.acquireTook)
		if tr.held {
			held++
		}
		if errors.Is(tr.acquireErr, rlock.ErrNotReplicated) {
			notRepl++
		}
		if tr.double {
			doubles++
		}
		if tr.lossCause != nil {
			losses = append(losses, tr.loss)
		}
		if tr.second >= 0 {
			seconds = append(seconds, tr.second)
		}
	}
	t.Logf("SyncReplicas %d, WatchdogTimeout %v, %d trials: first acquired %d (ErrNotReplicated %d; acquire took %s); "+
		"double grants %d of %d; second acquired after the failover: %s; first told of the loss after the failover: %s",
		syncReplicas, watchdog, len(results), held, notRepl, redistest.DurationStats(acquires), doubles, len(results),
		redistest.DurationStats(seconds), redistest.DurationStats(losses))
	t.Logf("client slot maps naming a replica (the old master) at the start of a trial: %d of %d", stale, 2*len(results))
	t.Logf("warnings logged: first client %d, second client %d", firstLog.count(), secondLog.count())
	redistest.WaitHealthy(t, "the cluster", 30*time.Second, f.unhealthy)
}

// ---- cluster: holds and waiters across a failover with an in-sync replica ----

// TestFailover_clusterGraceful: a holder (WatchdogTimeout 10s) holds a plain and a fair
// Mutex on one master while another client waits for each; the master's replica, in sync,
// takes over with CLUSTER FAILOVER. The holds must survive (no loss, the new master has the
// holder), and when the holder lets go each waiter must be woken by a message (not by its lease
// bound); the handoff is compared with the same handoff before the failover. Where the waiters'
// sharded subscriptions are afterwards is reported (Redis 7.0 leaves them on the old master, now
// a replica, which still delivers the shard's messages). Nothing may stay subscribed. Two rounds
// by default (the second fails back, and releases the locks in the other order).
func TestFailover_clusterGraceful(t *testing.T) {
	f := foClusterFromEnv(t)
	for round := range redistest.Trials("RLOCK_FAILOVER_ROUNDS", 2) {
		t.Run(fmt.Sprintf("round%d", round), func(t *testing.T) { foClusterHoldAcross(t, f, "graceful", round) })
	}
}

// TestFailover_clusterKill: as TestFailover_clusterGraceful, but the master is killed (kill -9)
// and its in-sync replica is promoted by the cluster after cluster-node-timeout; the killed node
// is then started again and rejoins as a replica (the replacement process is stopped when the
// test ends).
func TestFailover_clusterKill(t *testing.T) {
	f := foClusterFromEnv(t)
	for round := range redistest.Trials("RLOCK_FAILOVER_ROUNDS", 2) {
		t.Run(fmt.Sprintf("round%d", round), func(t *testing.T) { foClusterHoldAcross(t, f, "kill", round) })
	}
}

func foClusterHoldAcross(t *testing.T, f *foCluster, how string, round int) {
	redistest.WaitHealthy(t, "the cluster", 40*time.Second, f.unhealthy)
	const lease = 10 * time.Second
	prefix := foPrefix()
	// Two lock names on the same master.
	m, r := f.shard(t, prefix+":{plain0}")
	names := map[string]string{"plain": "plain0"}
	for i := 0; names["fair"] == ""; i++ {
		n := fmt.Sprintf("fair%d", i)
		if f.ownerOf(t, prefix+":{"+n+"}") == m.Addr {
			names["fair"] = n
		}
	}
	kindsHere := []struct {
		name string
		new  mutexMaker
	}{{"plain", (*rlock.Client).NewMutex}, {"fair", (*rlock.Client).NewFairMutex}}
	if round%2 == 1 {
		slices.Reverse(kindsHere) // released in the other order
	}

	var holderLog, waiterLog foLog
	holder, err := rlock.New(f.Client(t), rlock.Options{KeyPrefix: prefix, WatchdogTimeout: lease, Logger: holderLog.logger()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, holder.Close()) })
	waiter, err := rlock.New(f.Client(t), rlock.Options{KeyPrefix: prefix, WatchdogTimeout: lease, Logger: waiterLog.logger()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, waiter.Close()) })

	channel := func(kind string) string { return prefix + ":{" + names[kind] + "}:ch" }
	subscribedOn := func(n node, ch string) bool {
		sharded, err := foDo(n, "PUBSUB", "SHARDCHANNELS", ch).AsStrSlice()
		return err == nil && len(sharded) > 0
	}
	type result struct {
		h   context.Context
		at  time.Time
		err error
	}
	// wait starts a waiter for kind and returns where its result arrives once it has
	// subscribed on node n.
	wait := func(kind string, mk mutexMaker, n node) chan result {
		got := make(chan result, 1)
		go func() {
			ctx, cancel := context.WithTimeout(bg, 60*time.Second)
			defer cancel()
			h, err := mk(waiter, names[kind]).Lock(ctx)
			got <- result{context.WithoutCancel(h), time.Now(), err}
		}()
		require.Eventually(t, func() bool { return subscribedOn(n, channel(kind)) }, 5*time.Second, 5*time.Millisecond,
			"the %s waiter did not subscribe on %s", kind, n.Addr)
		return got
	}
	// handoff unlocks h and returns how long until the waiter had the lock.
	handoff := func(kind string, mk mutexMaker, h context.Context, got chan result) time.Duration {
		start := time.Now()
		require.NoError(t, mk(holder, names[kind]).Unlock(h), "%s: the holder's Unlock", kind)
		select {
		case r := <-got:
			require.NoError(t, r.err, "%s: the waiter", kind)
			require.NoError(t, mk(waiter, names[kind]).Unlock(r.h))
			return r.at.Sub(start)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the waiter was not woken within 30s of the release", kind)
			return 0
		}
	}

	// Before: 5 handoffs per kind, on the master.
	baseline := map[string]time.Duration{}
	for _, k := range kindsHere {
		var ds []time.Duration
		for range 5 {
			h, err := k.new(holder, names[k.name]).Lock(bg)
			require.NoError(t, err)
			got := wait(k.name, k.new, m)
			time.Sleep(5 * time.Millisecond)
			ds = append(ds, handoff(k.name, k.new, h, got))
		}
		slices.Sort(ds)
		baseline[k.name] = ds[len(ds)/2]
	}

	// Hold both, with a waiter on each, and let the replica catch up.
	holds := map[string]context.Context{}
	watches := map[string]*redistest.CtxWatch{}
	waits := map[string]chan result{}
	for _, k := range kindsHere {
		h, err := k.new(holder, names[k.name]).Lock(bg)
		require.NoError(t, err)
		holds[k.name], watches[k.name] = h, redistest.WatchCtx(h)
		waits[k.name] = wait(k.name, k.new, m)
	}
	foWaitInSync(t, m, r)

	start := time.Now()
	switch how {
	case "graceful":
		require.NoError(t, foDo(r, "CLUSTER", "FAILOVER").Error())
	case "kill":
		foSignal(t, m.PID(t), syscall.SIGKILL)
	}
	var promoted time.Duration
	require.Eventually(t, func() bool {
		if foRole(r) == "master" {
			promoted = time.Since(start)
			return true
		}
		return false
	}, 20*time.Second, 5*time.Millisecond, "%s was not promoted", r.Addr)

	// Watch, for up to 3 renewal periods after the promotion: where the waiters' subscriptions
	// are, and when a renewal reaches the new master (the key's PTTL jumps up).
	resub := map[string]time.Duration{}
	var renewedAt time.Duration = -1
	lastPTTL := int64(-10)
	deadline := time.Now().Add(lease)
	for time.Now().Before(deadline) && (len(resub) < len(kindsHere) || renewedAt < 0) {
		for _, k := range kindsHere {
			if _, ok := resub[k.name]; !ok && subscribedOn(r, channel(k.name)) {
				resub[k.name] = time.Since(start)
			}
		}
		if renewedAt < 0 {
			pttl, err := foDo(r, "PTTL", prefix+":{plain0}").AsInt64()
			if err == nil {
				if lastPTTL > 0 && pttl > lastPTTL+100 {
					renewedAt = time.Since(start)
				}
				lastPTTL = pttl
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	var where []string
	for _, n := range f.Nodes {
		for _, k := range kindsHere {
			if subscribedOn(n, channel(k.name)) {
				where = append(where, fmt.Sprintf("%s on %s (%s)", k.name, n.Addr, foRole(n)))
			}
		}
	}
	for _, k := range kindsHere {
		_, lost := watches[k.name].Ended()
		require.False(t, lost, "%s: the hold ended across the failover: %v", k.name, context.Cause(holds[k.name]))
		owners, err := foDo(r, "HKEYS", prefix+":{"+names[k.name]+"}").AsStrSlice()
		require.NoError(t, err)
		require.NotEmpty(t, owners, "%s: the new master has no holder", k.name)
		select {
		case got := <-waits[k.name]:
			t.Fatalf("%s: the waiter returned while the lock was held: %v", k.name, got.err)
		default:
		}
	}

	// Release: each waiter must be woken by the message.
	after := map[string]time.Duration{}
	for _, k := range kindsHere {
		after[k.name] = handoff(k.name, k.new, holds[k.name], waits[k.name])
	}
	t.Logf("%s failover %s -> %s: promoted after %v; holds survived, a renewal reached the new master %v after "+
		"the failover began; waiters resubscribed on the new master after %v; subscriptions then: %v",
		how, m.Addr, r.Addr, redistest.Ms(promoted), redistest.Ms(renewedAt), resub, where)
	for _, k := range kindsHere {
		t.Logf("%s: handoff before the failover %v (median of 5), after %v: extra %v", k.name,
			baseline[k.name].Round(10*time.Microsecond), after[k.name].Round(10*time.Microsecond),
			(after[k.name] - baseline[k.name]).Round(10*time.Microsecond))
		require.Less(t, after[k.name], 2*time.Second, "%s: the waiter was woken by its lease bound, not the release", k.name)
	}
	t.Logf("holder's log: %s; waiter's log: %s", holderLog.since(start), waiterLog.since(start))

	if how == "kill" {
		f.restart(t, m.Addr)
	}
	// Nothing left subscribed anywhere (unsubscribing is asynchronous).
	require.Eventually(t, func() bool {
		_, total, _ := f.LeftChannels(t, prefix)
		return total == 0
	}, 5*time.Second, 20*time.Millisecond, "channels left: %s", func() string { d, _, _ := f.LeftChannels(t, prefix); return d }())
	redistest.WaitHealthy(t, "the cluster", 40*time.Second, f.unhealthy)
}

// TestFailover_clusterKill_lease6s: does a hold with a short lease (WatchdogTimeout 6s, a
// renewal every 2s) outlive a kill -9 failover? The master is killed at a random phase of the
// renewals; while it is gone renewals fail and are retried (10ms doubling, at most a third of
// the lease). Reported per round: when the replica was promoted, whether the hold survived or
// when it was declared lost, and when a waiter on another client got the lock. The killed node
// is started again after each round.
func TestFailover_clusterKill_lease6s(t *testing.T) {
	f := foClusterFromEnv(t)
	const lease = 6 * time.Second
	rounds := redistest.Trials("RLOCK_FAILOVER_KILL_ROUNDS", 4)
	survived := 0
	var losses []time.Duration
	for round := range rounds {
		redistest.WaitHealthy(t, "the cluster", 40*time.Second, f.unhealthy)
		prefix := foPrefix()
		name := "short"
		m, r := f.shard(t, prefix+":{"+name+"}")
		var holderLog foLog
		holder, err := rlock.New(f.Client(t), rlock.Options{KeyPrefix: prefix, WatchdogTimeout: lease, Logger: holderLog.logger()})
		require.NoError(t, err)
		waiter, err := rlock.New(f.Client(t), rlock.Options{KeyPrefix: prefix, WatchdogTimeout: lease})
		require.NoError(t, err)
		h, err := holder.NewMutex(name).Lock(bg)
		require.NoError(t, err)
		watch := redistest.WatchCtx(h)
		type result struct {
			h   context.Context
			at  time.Time
			err error
		}
		got := make(chan result, 1)
		wctx, wcancel := context.WithTimeout(bg, 30*time.Second)
		go func() {
			h, err := waiter.NewMutex(name).Lock(wctx)
			got <- result{h, time.Now(), err}
		}()
		foWaitInSync(t, m, r)
		time.Sleep(time.Duration(rand.Int64N(int64(lease / 3))))
		start := time.Now()
		foSignal(t, m.PID(t), syscall.SIGKILL)
		var promoted time.Duration
		require.Eventually(t, func() bool {
			if foRole(r) == "master" {
				promoted = time.Since(start)
				return true
			}
			return false
		}, 20*time.Second, 5*time.Millisecond, "%s was not promoted", r.Addr)
		// Watch for a lease and a half after the kill.
		var lostAt, waiterAt time.Duration = -1, -1
		var wr result
		deadline := start.Add(lease * 3 / 2)
		for time.Now().Before(deadline) && waiterAt < 0 {
			select {
			case wr = <-got:
				waiterAt = wr.at.Sub(start)
			case <-time.After(10 * time.Millisecond):
			}
		}
		if at, lost := watch.Ended(); lost {
			lostAt = at.Sub(start)
			losses = append(losses, lostAt)
			require.ErrorIs(t, context.Cause(h), rlock.ErrLockLost)
		} else {
			survived++
		}
		if waiterAt >= 0 {
			require.NoError(t, wr.err)
			if lostAt < 0 || lostAt > waiterAt {
				t.Errorf("round %d: the waiter got the lock at +%v while the holder still held it", round, waiterAt)
			}
		}
		t.Logf("round %d (%s -> %s): promoted %s; hold %s; waiter acquired %s; holder's log: %s", round, m.Addr, r.Addr,
			foDur(promoted), map[bool]string{true: "lost " + foDur(lostAt), false: "survived"}[lostAt >= 0],
			foDur(waiterAt), holderLog.since(start))
		unlockErr := holder.NewMutex(name).Unlock(h)
		if lostAt < 0 {
			require.NoError(t, unlockErr)
			wr = <-got
			require.NoError(t, wr.err, "the waiter after the release")
		}
		if wr.h != nil {
			require.NoError(t, waiter.NewMutex(name).Unlock(wr.h))
		}
		wcancel()
		require.NoError(t, waiter.Close())
		require.NoError(t, holder.Close())
		f.restart(t, m.Addr)
	}
	t.Logf("WatchdogTimeout %v, kill -9 of the master with an in-sync replica, %d rounds: the hold survived %d; "+
		"declared lost after the kill: %s", lease, rounds, survived, redistest.DurationStats(losses))
	redistest.WaitHealthy(t, "the cluster", 40*time.Second, f.unhealthy)
}

// ---- Sentinel ----

// foSentinel is the Sentinel deployment of scripts/with-sentinel.sh.
type foSentinel struct {
	master    string
	sentinels []node
	data      []node
	addrs     []string // sentinel addresses
}

func foSentinelFromEnv(t *testing.T) *foSentinel {
	t.Helper()
	env := os.Getenv("REDIS_SENTINEL_ADDRS")
	if env == "" {
		t.Skip("REDIS_SENTINEL_ADDRS is not set (scripts/with-sentinel.sh sets it)")
	}
	foNotTheSuites(t, "sentinel")
	s := &foSentinel{master: os.Getenv("REDIS_SENTINEL_MASTER"), addrs: strings.Split(env, ",")}
	for _, a := range s.addrs {
		s.sentinels = append(s.sentinels, redistest.NewNode(t, a))
	}
	for _, a := range strings.Split(os.Getenv("REDIS_SENTINEL_DATA"), ",") {
		s.data = append(s.data, redistest.NewNode(t, a))
	}
	return s
}

// client returns a rueidis client that finds the primary through the sentinels.
func (s *foSentinel) client(t *testing.T, refresh time.Duration) rueidis.Client {
	t.Helper()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: s.addrs, DisableCache: true,
		Sentinel: rueidis.SentinelOption{MasterSet: s.master, TopologyRefreshInterval: refresh}})
	require.NoError(t, err)
	var once sync.Once
	t.Cleanup(func() { once.Do(rc.Close) })
	return rc
}

// roles returns the data node that is primary now and the replicas.
func (s *foSentinel) roles(t *testing.T) (p node, replicas []node) {
	t.Helper()
	for _, n := range s.data {
		if foRole(n) == "master" {
			p = n
		} else {
			replicas = append(replicas, n)
		}
	}
	require.NotEmpty(t, p.Addr, "no primary")
	return p, replicas
}

// unhealthy says why the deployment is not steady, or "": one primary with both replicas
// online, replicas linked and synced, and every sentinel naming that primary, with no failover
// in progress, and seeing 2 healthy replicas and 2 other sentinels.
func (s *foSentinel) unhealthy() string {
	var p node
	for _, n := range s.data {
		info, err := n.Info("replication")
		if err != nil {
			return n.Addr + ": " + err.Error()
		}
		switch info["role"] {
		case "master":
			if p.Addr != "" {
				return "two primaries"
			}
			p = n
			if info["connected_slaves"] != "2" || !strings.Contains(info["slave0"], "state=online") ||
				!strings.Contains(info["slave1"], "state=online") {
				return "primary without 2 online replicas"
			}
		default:
			if info["master_link_status"] != "up" || info["master_sync_in_progress"] != "0" {
				return n.Addr + ": replica link down or syncing"
			}
		}
	}
	if p.Addr == "" {
		return "no primary"
	}
	for _, sn := range s.sentinels {
		addr, err := foDo(sn, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.master).AsStrSlice()
		if err != nil || len(addr) != 2 || net.JoinHostPort(addr[0], addr[1]) != p.Addr {
			return sn.Addr + " names another primary"
		}
		mm, err := foDo(sn, "SENTINEL", "MASTER", s.master).AsStrMap()
		if err != nil {
			return sn.Addr + ": " + err.Error()
		}
		if mm["flags"] != "master" || mm["num-slaves"] != "2" || mm["num-other-sentinels"] != "2" {
			return fmt.Sprintf("%s: flags %s, %s replicas, %s other sentinels", sn.Addr, mm["flags"],
				mm["num-slaves"], mm["num-other-sentinels"])
		}
		reps, err := foDo(sn, "SENTINEL", "REPLICAS", s.master).ToArray()
		if err != nil {
			return sn.Addr + ": " + err.Error()
		}
		for _, rv := range reps {
			rm, err := rv.AsStrMap()
			if err != nil || rm["flags"] != "slave" || rm["master-link-status"] != "ok" {
				return fmt.Sprintf("%s: replica %s:%s flags %s link %s", sn.Addr, rm["ip"], rm["port"],
					rm["flags"], rm["master-link-status"])
			}
		}
	}
	return ""
}

// foEvents records every sentinel's events (PSUBSCRIBE *).
type foEvents struct {
	mu     sync.Mutex
	events []foEvent
	conns  []*foRaw
	wg     sync.WaitGroup
	notify chan struct{}
}

type foEvent struct {
	at                 time.Time
	sentinel, ch, text string
}

func (s *foSentinel) watchEvents(t *testing.T) *foEvents {
	t.Helper()
	e := &foEvents{notify: make(chan struct{}, 1)}
	for _, a := range s.addrs {
		raw, err := foDial(a)
		require.NoError(t, err)
		require.NoError(t, raw.send("PSUBSCRIBE", "*"))
		_, err = raw.read() // the confirmation
		require.NoError(t, err)
		e.conns = append(e.conns, raw)
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			for {
				v, err := raw.read()
				if err != nil {
					return
				}
				if msg, ok := v.([]any); ok && len(msg) == 4 && msg[0] == "pmessage" {
					ch, _ := msg[2].(string)
					text, _ := msg[3].(string)
					e.mu.Lock()
					e.events = append(e.events, foEvent{time.Now(), a, ch, text})
					e.mu.Unlock()
					select {
					case e.notify <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	t.Cleanup(func() {
		for _, c := range e.conns {
			c.c.Close()
		}
		e.wg.Wait()
	})
	return e
}

// find returns the events on ch since t0 (from sentinel, if not "").
func (e *foEvents) find(ch, sentinel string, t0 time.Time) []foEvent {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []foEvent
	for _, ev := range e.events {
		if ev.ch == ch && !ev.at.Before(t0) && (sentinel == "" || ev.sentinel == sentinel) {
			out = append(out, ev)
		}
	}
	return out
}

// waitFor waits up to d for an event on ch from sentinel since t0.
func (e *foEvents) waitFor(ch, sentinel string, t0 time.Time, d time.Duration) (foEvent, bool) {
	deadline := time.After(d)
	for {
		if evs := e.find(ch, sentinel, t0); len(evs) > 0 {
			return evs[0], true
		}
		select {
		case <-e.notify:
		case <-time.After(5 * time.Millisecond):
		case <-deadline:
			return foEvent{}, false
		}
	}
}

// switches formats when each sentinel announced +switch-master since t0.
func (e *foEvents) switches(t0 time.Time) string {
	var s []string
	for _, ev := range e.find("+switch-master", "", t0) {
		s = append(s, fmt.Sprintf("%s +%v", ev.sentinel, redistest.Ms(ev.at.Sub(t0))))
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// foTarget watches which data node a rueidis client sends its commands to (INFO server's
// tcp_port, every 10ms) and records when it first differs from the primary it started with.
type foTarget struct {
	mu      sync.Mutex
	from    string
	movedAt time.Time
	to      string
	stop    chan struct{}
	done    chan struct{}
}

func foWatchTarget(t *testing.T, rc rueidis.Client, from string) *foTarget {
	_, port, _ := net.SplitHostPort(from)
	w := &foTarget{from: port, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(bg, 500*time.Millisecond)
			s, err := rc.Do(ctx, rc.B().Info().Section("server").Build()).ToString()
			cancel()
			if err != nil {
				continue
			}
			for _, l := range strings.Split(s, "\r\n") {
				if p, ok := strings.CutPrefix(l, "tcp_port:"); ok && p != w.from {
					w.mu.Lock()
					w.movedAt, w.to = time.Now(), p
					w.mu.Unlock()
					return
				}
			}
		}
	}()
	t.Cleanup(w.close)
	return w
}

func (w *foTarget) close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// since is when the client moved, relative to t0 (-1 if it has not).
func (w *foTarget) since(t0 time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.movedAt.IsZero() {
		return -1
	}
	return w.movedAt.Sub(t0)
}

func foDur(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return "+" + redistest.Ms(d)
}

// TestFailover_sentinelInSync: a hold (WatchdogTimeout 6s) and a waiter across SENTINEL
// FAILOVER with in-sync replicas, twice by default. Reported: when each sentinel announced +switch-master,
// when the old primary turned replica, when rueidis clients moved to the new primary (one that
// only listens for +switch-master, the default, and one with TopologyRefreshInterval 1s),
// whether the hold survived, and the handoff to the waiter afterwards.
func TestFailover_sentinelInSync(t *testing.T) {
	s := foSentinelFromEnv(t)
	for round := range redistest.Trials("RLOCK_FAILOVER_ROUNDS", 2) {
		t.Run(fmt.Sprintf("round%d", round), func(t *testing.T) {
			redistest.WaitHealthy(t, "the Sentinel deployment", 40*time.Second, s.unhealthy)
			events := s.watchEvents(t)
			const lease = 6 * time.Second
			prefix := foPrefix()
			var holderLog, waiterLog foLog
			holderRC, waiterRC, refreshRC := s.client(t, 0), s.client(t, 0), s.client(t, time.Second)
			holder, err := rlock.New(holderRC, rlock.Options{KeyPrefix: prefix, WatchdogTimeout: lease, Logger: holderLog.logger()})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, holder.Close()) })
			waiter, err := rlock.New(waiterRC, rlock.Options{KeyPrefix: prefix, WatchdogTimeout: lease, Logger: waiterLog.logger()})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, waiter.Close()) })
			p, reps := s.roles(t)

			h, err := holder.NewMutex("insync").Lock(bg)
			require.NoError(t, err)
			watch := redistest.WatchCtx(h)
			type result struct {
				h   context.Context
				at  time.Time
				err error
			}
			got := make(chan result, 1)
			go func() {
				ctx, cancel := context.WithTimeout(bg, 90*time.Second)
				defer cancel()
				h, err := waiter.NewMutex("insync").Lock(ctx)
				got <- result{context.WithoutCancel(h), time.Now(), err}
			}()
			ch := prefix + ":{insync}:ch"
			require.Eventually(t, func() bool {
				chs, err := foDo(p, "PUBSUB", "CHANNELS", ch).AsStrSlice()
				return err == nil && len(chs) == 1
			}, 5*time.Second, 5*time.Millisecond, "the waiter did not subscribe")
			for _, r := range reps {
				foWaitInSync(t, p, r)
			}

			targets := map[string]*foTarget{"holder": foWatchTarget(t, holderRC, p.Addr),
				"waiter": foWatchTarget(t, waiterRC, p.Addr), "refresh 1s": foWatchTarget(t, refreshRC, p.Addr)}
			start := time.Now()
			require.NoError(t, foDo(s.sentinels[0], "SENTINEL", "FAILOVER", s.master).Error())
			// Until every client moved and the old primary is a replica, or 30s.
			var demoted time.Duration = -1
			var newP node
			for time.Since(start) < 30*time.Second {
				if demoted < 0 && foRole(p) == "slave" {
					demoted = time.Since(start)
				}
				moved := 0
				for _, w := range targets {
					if w.since(start) >= 0 {
						moved++
					}
				}
				if demoted >= 0 && moved == len(targets) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			for _, r := range reps {
				if foRole(r) == "master" {
					newP = r
				}
			}
			require.NotEmpty(t, newP.Addr, "no replica was promoted")
			// Two renewal periods on the new primary.
			time.Sleep(2 * lease / 3)
			_, lost := watch.Ended()
			owners, err := foDo(newP, "HKEYS", prefix+":{insync}").AsStrSlice()
			require.NoError(t, err)
			promoted, _ := events.waitFor("+promoted-slave", "", start, 0)
			var moves []string
			for _, name := range []string{"holder", "waiter", "refresh 1s"} {
				moves = append(moves, fmt.Sprintf("%s %s", name, foDur(targets[name].since(start))))
			}
			t.Logf("SENTINEL FAILOVER %s -> %s: +promoted-slave %s; +switch-master: %s; old primary a replica %s; "+
				"rueidis clients moved: %s", p.Addr, newP.Addr, foDur(promoted.at.Sub(start)), events.switches(start),
				foDur(demoted), strings.Join(moves, ", "))
			t.Logf("hold: lost %v (%v); owners on the new primary %v; holder's log: %s", lost, context.Cause(h), owners,
				holderLog.since(start))
			require.False(t, lost, "the hold was lost across a failover with in-sync replicas: %v", context.Cause(h))
			require.NotEmpty(t, owners, "the new primary has no holder")

			select {
			case r := <-got:
				t.Fatalf("the waiter returned while the lock was held: %v", r.err)
			default:
			}
			released := time.Now()
			require.NoError(t, holder.NewMutex("insync").Unlock(h))
			select {
			case r := <-got:
				require.NoError(t, r.err)
				t.Logf("handoff to the waiter after the failover: %v; waiter's log: %s", r.at.Sub(released).Round(10*time.Microsecond),
					waiterLog.since(start))
				require.Less(t, r.at.Sub(released), 2*time.Second, "the waiter was woken by its lease bound, not the release")
				require.NoError(t, waiter.NewMutex("insync").Unlock(r.h))
			case <-time.After(30 * time.Second):
				t.Fatalf("the waiter was not woken within 30s of the release")
			}
			require.Eventually(t, func() bool {
				for _, n := range s.data {
					chs, err := foDo(n, "PUBSUB", "CHANNELS", prefix+":*").AsStrSlice()
					if err != nil || len(chs) > 0 {
						return false
					}
				}
				return true
			}, 5*time.Second, 20*time.Millisecond, "channels left behind")
			redistest.WaitHealthy(t, "the Sentinel deployment", 40*time.Second, s.unhealthy)
		})
	}
}

// TestFailover_sentinelLagging_watchdog6s and _watchdog30s: SENTINEL FAILOVER to a replica
// that lacks the hold. Per trial: both replicas stop (SIGSTOP) and the primary drops their
// links, a client takes a watchdog Mutex, SENTINEL FAILOVER is asked, and the replicas run again
// once the sentinel has sent the promotion (+failover-state-wait-promotion), so the promoted one
// never gets the hold. A second client, running since before the failover, tries the lock every
// 50ms: a double grant is it getting the lock while the first's hold context still runs.
func TestFailover_sentinelLagging_watchdog6s(t *testing.T) { foSentinelLagging(t, 6*time.Second) }

func TestFailover_sentinelLagging_watchdog30s(t *testing.T) { foSentinelLagging(t, 30*time.Second) }

func foSentinelLagging(t *testing.T, lease time.Duration) {
	s := foSentinelFromEnv(t)
	trials := redistest.Trials("RLOCK_FAILOVER_SENTINEL_TRIALS", 3)
	prefix := foPrefix()
	var firstLog, secondLog foLog
	firstRC, secondRC := s.client(t, 0), s.client(t, 0)
	first, err := rlock.New(firstRC, rlock.Options{KeyPrefix: prefix, WatchdogTimeout: lease, Logger: firstLog.logger()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, first.Close()) })
	second, err := rlock.New(secondRC, rlock.Options{KeyPrefix: prefix, WatchdogTimeout: lease, Logger: secondLog.logger()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, second.Close()) })

	doubles := 0
	var seconds, losses []time.Duration
	for i := range trials {
		redistest.WaitHealthy(t, "the Sentinel deployment", 60*time.Second, s.unhealthy)
		events := s.watchEvents(t)
		p, reps := s.roles(t)
		name := fmt.Sprintf("lag%d", i)
		// A random phase against the watchdog's renewals (every third of the lease).
		time.Sleep(time.Duration(rand.Int64N(int64(lease / 3))))
		var pids []int
		for _, r := range reps {
			pids = append(pids, r.PID(t))
		}
		for _, pid := range pids {
			foSignal(t, pid, syscall.SIGSTOP)
		}
		resumed := false
		resume := func() {
			if !resumed {
				resumed = true
				for _, pid := range pids {
					_ = syscall.Kill(pid, syscall.SIGCONT)
				}
			}
		}
		defer resume()
		killed, err := foDo(p, "CLIENT", "KILL", "TYPE", "replica").AsInt64()
		require.NoError(t, err)
		require.EqualValues(t, 2, killed)
		h, err := first.NewMutex(name).Lock(bg) // (the hold context derives from the one given)
		require.NoError(t, err)
		watch := redistest.WatchCtx(h)
		targets := map[string]*foTarget{"first": foWatchTarget(t, firstRC, p.Addr), "second": foWatchTarget(t, secondRC, p.Addr)}

		start := time.Now()
		require.NoError(t, foDo(s.sentinels[0], "SENTINEL", "FAILOVER", s.master).Error())
		_, sent := events.waitFor("+failover-state-wait-promotion", s.addrs[0], start, 5*time.Second)
		time.Sleep(20 * time.Millisecond)
		resume()
		require.True(t, sent, "the sentinel did not send the promotion within 5s")

		// The second client tries until it has the lock and the first knows it lost it.
		var hs context.Context
		var secondAt time.Duration = -1
		var secondErr error
		double := false
		var demoted time.Duration = -1
		deadline := start.Add(lease + 25*time.Second)
		for time.Now().Before(deadline) {
			if demoted < 0 && foRole(p) == "slave" {
				demoted = time.Since(start)
			}
			if hs == nil {
				ctx, cancel := context.WithTimeout(bg, 2*time.Second)
				hs, err = second.NewMutex(name).TryLock(ctx, 0)
				cancel()
				if err == nil {
					at := time.Now()
					secondAt = at.Sub(start)
					lostAt, lost := watch.Ended()
					double = !lost || lostAt.After(at)
				} else {
					hs, secondErr = nil, err
				}
			}
			if _, lost := watch.Ended(); lost && hs != nil && demoted >= 0 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		var lossAt time.Duration = -1
		if at, lost := watch.Ended(); lost {
			lossAt = at.Sub(start)
			losses = append(losses, lossAt)
		}
		if secondAt >= 0 {
			seconds = append(seconds, secondAt)
		}
		if double {
			doubles++
		}
		newP, _ := s.roles(t)
		t.Logf("trial %d (%s -> %s): +switch-master %s; old primary a replica %s; first client moved %s, second %s; "+
			"second acquired %s (last error before: %v); first told of the loss %s (%v); double grant: %v",
			i, p.Addr, newP.Addr, events.switches(start), foDur(demoted), foDur(targets["first"].since(start)),
			foDur(targets["second"].since(start)), foDur(secondAt), secondErr, foDur(lossAt), context.Cause(h), double)
		t.Logf("trial %d logs: first: %s; second: %s", i, firstLog.since(start), secondLog.since(start))
		if lossAt >= 0 {
			require.ErrorIs(t, context.Cause(h), rlock.ErrLockLost)
		}
		unlockErr := first.NewMutex(name).Unlock(h)
		t.Logf("trial %d: the first holder's Unlock: %v", i, unlockErr)
		if hs != nil {
			require.NoError(t, second.NewMutex(name).Unlock(hs))
		}
		for _, w := range targets {
			w.close()
		}
	}
	t.Logf("WatchdogTimeout %v, %d trials: double grants %d of %d; second acquired after the failover: %s; "+
		"first told of the loss: %s", lease, trials, doubles, trials, redistest.DurationStats(seconds), redistest.DurationStats(losses))
	redistest.WaitHealthy(t, "the Sentinel deployment", 60*time.Second, s.unhealthy)
}
