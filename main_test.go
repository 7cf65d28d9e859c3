package rlock_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// helperEnv names the helper a re-executed test binary runs instead of the tests.
const helperEnv = "RLOCK_TEST_HELPER"

// redisAddr is a standalone server: REDIS_ADDR, or one TestMain starts. The suite runs on it
// unless rlock.TopologyEnv names a cluster or a Sentinel deployment (see suite).
var redisAddr string

// suite is the deployment the tests run on (rlock.TopologyEnv; see deploy_test.go).
var suite *deployment

// throwawayEnv, set to 1 (as the scripts/with-*.sh do), says the deployment the tests run on is
// a throwaway one that tests may disturb for every client (DEBUG SLEEP, SCRIPT FLUSH, CLIENT
// KILL, restarts); a server TestMain starts is one too.
const throwawayEnv = "RLOCK_TEST_THROWAWAY"

// throwaway reports whether tests may disturb the whole deployment (see throwawayEnv).
var throwaway bool

// needsThrowaway skips t unless the deployment is a throwaway one: t disturbs every client of it.
func needsThrowaway(t testing.TB) {
	t.Helper()
	needsRedis(t)
	if !throwaway {
		t.Skipf("disturbs every client of the deployment (DEBUG SLEEP, SCRIPT FLUSH, CLIENT KILL or a restart); "+
			"%s is not known to be a throwaway one: set %s=1 if it is, or unset REDIS_ADDR "+
			"to let the tests start a server (redis-server on PATH)", suite.Addrs, throwawayEnv)
	}
}

// needsRedis skips t under -short: go test -short runs only the tests that need no Redis.
func needsRedis(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Redis (-short runs only the tests that need none)")
	}
}

func TestMain(m *testing.M) {
	if name := os.Getenv(helperEnv); name != "" {
		os.Exit(runHelper(name))
	}
	flag.Parse()
	if testing.Short() {
		// No server: the tests that need one skip (needsRedis), and so do the examples, which
		// cannot skip themselves.
		if flag.Lookup("test.skip").Value.String() == "" {
			_ = flag.Set("test.skip", "^Example")
		}
		code := m.Run()
		if code == 0 {
			if err := goleak.Find(); err != nil {
				fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
				code = 1
			}
		}
		os.Exit(code)
	}
	redisAddr = os.Getenv("REDIS_ADDR")
	throwaway = redisAddr == "" || os.Getenv(throwawayEnv) == "1"
	stop := func() {}
	if redisAddr == "" {
		srv, err := startRedis("")
		if err != nil {
			fmt.Fprintln(os.Stderr, "rlock tests need Redis: set REDIS_ADDR or put redis-server on PATH (make test does both):", err)
			os.Exit(1)
		}
		redisAddr, stop = srv.addr, srv.stop
		os.Setenv("REDIS_ADDR", redisAddr) // for the package's internal tests and child processes
		os.Setenv(throwawayEnv, "1")
	}
	d, err := rlock.DeploymentFromEnv()
	if err == nil {
		suite, err = openDeployment(d)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rlock tests:", err)
		stop()
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		// Tests outside an env too: every key prefix of these tests starts with "rl".
		if left := suite.channelsLeft("rl*"); left != "" {
			fmt.Fprintln(os.Stderr, "channels left subscribed after the tests:", left)
			code = 1
		}
	}
	suite.close()
	if code == 0 {
		// Every client the tests made is closed by now: nothing of ours may still run.
		if err := goleak.Find(ignoreRueidisRefresh, ignoreRueidisReplaced); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
			code = 1
		}
	}
	stop()
	os.Exit(code)
}

// ignoreRueidisRefresh spares the goroutines of rueidis' cluster client (v1.0.79) that can
// outlive its Close: the slot map refresh it schedules, up to a second ahead, when a connection
// fails or a command is redirected, and the closing of connections a refresh replaced, 5s
// after it. Both end by themselves.
var ignoreRueidisRefresh = goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1")

var ignoreRueidisReplaced = goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2")

// redisServer is a throwaway redis-server process.
type redisServer struct {
	addr string
	port string
	dir  string
	cmd  *exec.Cmd
}

// startRedis starts redis-server on port ("" for a free one) and waits until it answers.
func startRedis(port string) (*redisServer, error) {
	if port == "" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		port = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
		l.Close()
	}
	dir, err := os.MkdirTemp("", "rlock-redis")
	if err != nil {
		return nil, err
	}
	s := &redisServer{addr: "127.0.0.1:" + port, port: port, dir: dir}
	return s, s.start()
}

func (s *redisServer) start() error {
	s.cmd = exec.Command("redis-server", "--port", s.port, "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--enable-debug-command", "yes", "--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log"))
	if err := s.cmd.Start(); err != nil {
		return err
	}
	for range 200 {
		if c, err := net.Dial("tcp", s.addr); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on %s did not start", s.addr)
}

// kill stops the server process by PID (SIGKILL) and waits for it.
func (s *redisServer) kill() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

func (s *redisServer) stop() {
	s.kill()
	os.RemoveAll(s.dir)
}

// newRueidis returns a rueidis client of the standalone server at addr, closed when the test
// ends.
func newRueidis(t testing.TB, addr string) rueidis.Client {
	needsRedis(t)
	t.Helper()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	return rc
}

// node is one data node of a deployment, reached directly (not through cluster routing).
type node struct {
	addr string
	rc   rueidis.Client
}

// openNode returns a direct client of the server at addr.
func openNode(addr string) (node, error) {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true,
		ForceSingleClient: true})
	return node{addr: addr, rc: rc}, err
}

// newNode returns a direct client of the server at addr, closed when the test ends.
func newNode(t testing.TB, addr string) node {
	t.Helper()
	n, err := openNode(addr)
	require.NoError(t, err)
	t.Cleanup(n.rc.Close)
	return n
}

// do runs a command on n, giving up after 5s (a stopped server must not hang a test).
func (n node) do(t testing.TB, args ...string) rueidis.RedisResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return n.rc.Do(ctx, n.rc.B().Arbitrary(args...).Build())
}

// info returns the fields of an INFO section of n.
func (n node) info(section string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := n.rc.Do(ctx, n.rc.B().Info().Section(section).Build()).ToString()
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, l := range strings.Split(s, "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}

// role is "master" or "slave", as INFO replication says now.
func (n node) role(t testing.TB) string {
	t.Helper()
	info, err := n.info("replication")
	require.NoError(t, err)
	return info["role"]
}

// channels lists the classic and the sharded channels matching pattern subscribed on n.
func (n node) channels(t testing.TB, pattern string) (classic, sharded []string) {
	t.Helper()
	classic, err := n.do(t, "PUBSUB", "CHANNELS", pattern).AsStrSlice()
	require.NoError(t, err)
	sharded, err = n.do(t, "PUBSUB", "SHARDCHANNELS", pattern).AsStrSlice()
	require.NoError(t, err)
	return classic, sharded
}

// pid is the process id of the server n.
func (n node) pid(t testing.TB) int {
	t.Helper()
	info, err := n.info("server")
	require.NoError(t, err)
	pid, err := strconv.Atoi(info["process_id"])
	require.NoError(t, err)
	return pid
}

// deployment is a rlock.Deployment with an admin client of it and direct clients of its data
// nodes, as the nodes' roles were when it was opened (the suite's do not change).
type deployment struct {
	rlock.Deployment
	admin    rueidis.Client    // routes keyed commands as the library's clients do
	nodes    []node            // every data node
	masters  []node            // the cluster's masters, or the primary
	replicas map[string][]node // each master's, by its address
	slots    []slotRange       // cluster: which master serves which slots
}

type slotRange struct {
	lo, hi uint16
	master string
}

// clusterSlots reads a CLUSTER SLOTS reply: each slot range and its master's address.
func clusterSlots(res rueidis.RedisResult) ([]slotRange, error) {
	shards, err := res.ToArray()
	if err != nil {
		return nil, err
	}
	var slots []slotRange
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
		slots = append(slots, slotRange{uint16(lo), uint16(hi), net.JoinHostPort(host, strconv.FormatInt(port, 10))})
	}
	return slots, nil
}

// openDeployment connects to d's nodes and finds their roles.
func openDeployment(d rlock.Deployment) (_ *deployment, err error) {
	dep := &deployment{Deployment: d, replicas: map[string][]node{}}
	defer func() {
		if err != nil {
			dep.close()
		}
	}()
	if dep.admin, err = d.NewClient(); err != nil {
		return nil, fmt.Errorf("%s deployment at %v: %w", d.Topology, d.Addrs, err)
	}
	for _, a := range d.Data {
		n, err := openNode(a)
		if err != nil {
			return nil, err
		}
		dep.nodes = append(dep.nodes, n)
	}
	for _, n := range dep.nodes {
		info, err := n.info("replication")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.addr, err)
		}
		switch info["role"] {
		case "master":
			dep.masters = append(dep.masters, n)
		case "slave":
			m := net.JoinHostPort(info["master_host"], info["master_port"])
			dep.replicas[m] = append(dep.replicas[m], n)
		}
	}
	if len(dep.masters) == 0 || (d.Topology != "cluster" && len(dep.masters) != 1) {
		return nil, fmt.Errorf("%s deployment: masters %d", d.Topology, len(dep.masters))
	}
	if d.Topology == "cluster" {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m := dep.masters[0]
		if dep.slots, err = clusterSlots(m.rc.Do(ctx, m.rc.B().ClusterSlots().Build())); err != nil {
			return nil, err
		}
	}
	return dep, nil
}

func (d *deployment) close() {
	if d.admin != nil {
		d.admin.Close()
	}
	for _, n := range d.nodes {
		n.rc.Close()
	}
}

// channelsLeft waits up to 3s for no channel matching pattern, classic or sharded, to be
// subscribed on any data node, and describes those that still are.
func (d *deployment) channelsLeft(pattern string) string {
	deadline := time.Now().Add(3 * time.Second)
	for {
		var b strings.Builder
		for _, n := range d.nodes {
			for _, cmd := range []string{"CHANNELS", "SHARDCHANNELS"} {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				chs, err := n.rc.Do(ctx, n.rc.B().Arbitrary("PUBSUB", cmd, pattern).Build()).AsStrSlice()
				cancel()
				if err != nil || len(chs) > 0 {
					fmt.Fprintf(&b, " %s %s: %v %v;", n.addr, cmd, chs, err)
				}
			}
		}
		if b.Len() == 0 || time.Now().After(deadline) {
			return b.String()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// masterOf is the master that serves key.
func (d *deployment) masterOf(key string) node {
	if d.Topology != "cluster" {
		return d.masters[0]
	}
	s := rlock.Slot(key)
	for _, r := range d.slots {
		if s >= r.lo && s <= r.hi {
			for _, m := range d.masters {
				if m.addr == r.master {
					return m
				}
			}
		}
	}
	panic(fmt.Sprintf("no master serves slot %d of %s", s, key))
}

var prefixSeq atomic.Int64

// env is one test's namespace on the deployment: a key prefix of its own, and a check when
// the test ends that no keys (but fencing counters) and no channels remain on any node.
type env struct {
	t      testing.TB
	dep    *deployment
	proxy  *faultProxy // if set, the clients reach the data nodes through it (see through)
	prefix string
	dirty  bool // the test leaves keys behind on purpose (they expire)
}

// newEnv returns an env on the suite's deployment.
func newEnv(t testing.TB) *env {
	return newEnvOn(t, suite)
}

// newEnvAt returns an env on the standalone server at addr (one the test started).
func newEnvAt(t testing.TB, addr string) *env {
	t.Helper()
	needsRedis(t)
	dep, err := openDeployment(rlock.Deployment{Topology: "standalone", Addrs: []string{addr}, Data: []string{addr}})
	require.NoError(t, err)
	t.Cleanup(dep.close)
	return newEnvOn(t, dep)
}

func newEnvOn(t testing.TB, dep *deployment) *env {
	t.Helper()
	needsRedis(t)
	e := &env{t: t, dep: dep, prefix: fmt.Sprintf("rlt%d-%d", os.Getpid(), prefixSeq.Add(1))}
	t.Cleanup(e.checkClean) // runs after the clients' Close (cleanups run last-in first-out)
	return e
}

// admin is a client of e's deployment for tests' own commands.
func (e *env) admin() rueidis.Client { return e.dep.admin }

// rueidis returns a new rueidis client of e's deployment (through e's proxy, if any), closed
// when the test ends.
func (e *env) rueidis() rueidis.Client {
	e.t.Helper()
	o := e.dep.ClientOption()
	if e.proxy != nil {
		o.DialCtxFn = e.proxy.dial
	}
	rc, err := rueidis.NewClient(o)
	require.NoError(e.t, err)
	e.t.Cleanup(rc.Close)
	return rc
}

// newProxy returns a fault proxy in front of every data node of e's deployment (see through).
// It loads every script on every master first: a fault armed on a script must meet the call
// that runs it, not a NOSCRIPT reply (an earlier test may have flushed the scripts).
func (e *env) newProxy() *faultProxy {
	e.t.Helper()
	for _, m := range e.dep.masters {
		var load rueidis.Commands
		for _, f := range rlock.ScriptFiles() {
			for _, src := range []string{rlock.ScriptSource(f), rlock.ShardedScriptSource(f)} {
				load = append(load, m.rc.B().ScriptLoad().Script(src).Build())
			}
		}
		for _, r := range m.rc.DoMulti(context.Background(), load...) {
			require.NoError(e.t, r.Error())
		}
	}
	return newFaultProxy(e.t, e.dep.Data...)
}

// through returns an env whose clients reach the data nodes through p; keys are checked by e.
func (e *env) through(p *faultProxy) *env {
	c := *e
	c.proxy = p
	return &c
}

// client returns an rlock client with this env's prefix on its own rueidis client; it is
// closed when the test ends.
func (e *env) client(opts rlock.Options) *rlock.Client {
	e.t.Helper()
	opts.KeyPrefix = e.prefix
	c, err := rlock.New(e.rueidis(), opts)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { require.NoError(e.t, c.Close()) })
	return c
}

// master is the node that serves the lock called name in e.
func (e *env) master(name string) node { return e.dep.masterOf(e.lockKey(name)) }

// replicas are the replicas of the master m.
func (e *env) replicas(m node) []node { return e.dep.replicas[m.addr] }

// keys lists this env's keys, on every master.
func (e *env) keys() []string {
	var keys []string
	for _, n := range e.dep.masters {
		k, err := n.do(e.t, "KEYS", e.prefix+":*").AsStrSlice()
		require.NoError(e.t, err)
		keys = append(keys, k...)
	}
	return keys
}

// channels lists this env's subscribed channels, classic and sharded, on every data node
// (replicas included): a channel subscribed on two nodes is listed twice.
func (e *env) channels() []string {
	classic, sharded := e.channelsByKind()
	return append(classic, sharded...)
}

// channelsByKind is channels split into classic and sharded ones.
func (e *env) channelsByKind() (classic, sharded []string) {
	for _, n := range e.dep.nodes {
		c, s := n.channels(e.t, e.prefix+":*")
		classic, sharded = append(classic, c...), append(sharded, s...)
	}
	return classic, sharded
}

// leftOn describes, per node, the channels of e still subscribed there.
func (e *env) leftOn() string {
	var b strings.Builder
	for _, n := range e.dep.nodes {
		c, s := n.channels(e.t, e.prefix+":*")
		if len(c)+len(s) > 0 {
			fmt.Fprintf(&b, " %s: %v %v", n.addr, c, s)
		}
	}
	return b.String()
}

func (e *env) checkClean() {
	if e.dirty || e.t.Failed() {
		return
	}
	require.Eventually(e.t, func() bool {
		for _, k := range e.keys() {
			if !strings.HasSuffix(k, ":fence") {
				return false
			}
		}
		return len(e.channels()) == 0
	}, 3*time.Second, 10*time.Millisecond, "keys or channels left behind: %v;%s", e.keys(), e.leftOn())
}

// keyedCommands are the commands on keys that tests send with do: how many of the arguments
// are keys (-1: all of them).
var keyedCommands = map[string]int{
	"GET": 1, "SET": 1, "DEL": -1, "EXISTS": -1, "TYPE": 1, "PTTL": 1, "PEXPIRE": 1,
	"HGET": 1, "HGETALL": 1, "HKEYS": 1, "LLEN": 1, "LRANGE": 1, "RPUSH": 1, "ZCARD": 1, "ZRANGE": 1,
	"ZSCORE": 1,
	"KEYS":   1, // a pattern with a lock's hash tag: the node of that lock
}

// do runs a raw command on e's deployment: a command on keys (keyedCommands) on the master
// that serves them, TIME on any node. Anything else must name its node (see node, master).
func (e *env) do(args ...string) rueidis.RedisResult {
	e.t.Helper()
	name := strings.ToUpper(args[0])
	b := e.dep.admin.B().Arbitrary(args[0])
	n, keyed := keyedCommands[name]
	switch {
	case keyed && (n < 0 || n > len(args)-1):
		n = len(args) - 1
	case keyed:
	case name == "TIME", e.dep.Topology != "cluster":
	default:
		e.t.Fatalf("do %v: say which node runs it", args)
	}
	return e.dep.admin.Do(context.Background(), b.Keys(args[1:1+n]...).Args(args[1+n:]...).Build())
}

// onMasters runs a command on every master and returns the first error.
func (e *env) onMasters(args ...string) error {
	e.t.Helper()
	var errs []error
	for _, n := range e.dep.masters {
		errs = append(errs, n.do(e.t, args...).Error())
	}
	return errors.Join(errs...)
}

// killClients kills the clients of type typ (CLIENT KILL TYPE) on every data node and returns
// how many.
func (e *env) killClients(typ string) int64 {
	e.t.Helper()
	var killed int64
	for _, n := range e.dep.nodes {
		k, err := n.do(e.t, "CLIENT", "KILL", "TYPE", typ).AsInt64()
		require.NoError(e.t, err)
		killed += k
	}
	return killed
}

// numsub is how many subscriptions channel has, classic and sharded, over every data node.
func (e *env) numsub(channel string) int64 {
	e.t.Helper()
	var total int64
	for _, n := range e.dep.nodes {
		for _, cmd := range []string{"NUMSUB", "SHARDNUMSUB"} {
			v, err := n.do(e.t, "PUBSUB", cmd, channel).ToArray()
			require.NoError(e.t, err)
			k, err := v[1].AsInt64()
			require.NoError(e.t, err)
			total += k
		}
	}
	return total
}

// lockKey is the Redis key of the lock called name in e.
func (e *env) lockKey(name string) string { return e.prefix + ":{" + name + "}" }

// crash kills the server n (SIGKILL) and returns a function that starts it again as it was,
// without its data (the tests' servers persist nothing); its replicas then sync from it (see
// waitSteady). It needs the command line that scripts/with-*.sh record in the server's
// directory (see run_server there), and skips t without it; the script stops the new process
// by its pidfile, so the test binary does not wait for it.
func crash(t *testing.T, n node) (restart func()) {
	t.Helper()
	get := func(name string) string {
		kv, err := n.do(t, "CONFIG", "GET", name).AsStrMap()
		require.NoError(t, err)
		return kv[name]
	}
	raw, err := os.ReadFile(filepath.Join(get("dir"), "args"))
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("restarts %s, whose command line is unknown: start it with scripts/with-*.sh", n.addr)
	}
	require.NoError(t, err)
	args := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	// Settings the scripts change once the deployment is up.
	later := []string{"repl-ping-replica-period", get("repl-ping-replica-period")}
	if info, err := n.info("cluster"); err == nil && info["cluster_enabled"] == "1" {
		later = append(later, "cluster-node-timeout", get("cluster-node-timeout"))
	}
	pid := n.pid(t)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	require.Eventually(t, func() bool { return syscall.Kill(pid, 0) != nil || zombie(pid) }, 5*time.Second, time.Millisecond)
	var once bool
	return func() {
		t.Helper()
		if once {
			return
		}
		once = true
		require.NoError(t, exec.Command(args[0], args[1:]...).Start())
		require.Eventually(t, func() bool { return n.do(t, "PING").Error() == nil }, 10*time.Second, 10*time.Millisecond,
			"%s did not start again", n.addr)
		require.NoError(t, n.do(t, append([]string{"CONFIG", "SET"}, later...)...).Error())
	}
}

// zombie reports whether process pid has exited but is not reaped yet.
func zombie(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return strings.HasPrefix(rest, "Z")
}

// waitSteady waits until every node answers, every master has its replicas online and every
// replica its link up and synced, and (cluster) every node says cluster_state:ok.
func (d *deployment) waitSteady(t testing.TB, within time.Duration) {
	t.Helper()
	why := "?"
	steady := func() bool {
		for _, n := range d.nodes {
			info, err := n.info("replication")
			if err != nil {
				why = n.addr + ": " + err.Error()
				return false
			}
			switch info["role"] {
			case "master":
				want := len(d.replicas[n.addr])
				if info["connected_slaves"] != strconv.Itoa(want) {
					why = n.addr + ": connected_slaves " + info["connected_slaves"]
					return false
				}
				for i := range want {
					if !strings.Contains(info[fmt.Sprintf("slave%d", i)], "state=online") {
						why = n.addr + ": a replica is not online"
						return false
					}
				}
				// Online is not enough: a replica fresh from a full sync may not answer WAIT's
				// GETACK until its first periodic ACK, up to a second later.
				if want > 0 {
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					r := n.rc.DoMulti(ctx, n.rc.B().Set().Key(d.probeKey(n)).Value("1").Px(time.Second).Build(),
						n.rc.B().Wait().Numreplicas(int64(want)).Timeout(100).Build())
					cancel()
					if acked, err := r[1].AsInt64(); err != nil || acked < int64(want) {
						why = fmt.Sprintf("%s: %d of %d replicas acknowledge writes (%v)", n.addr, acked, want, err)
						return false
					}
				}
			default:
				if info["master_link_status"] != "up" || info["master_sync_in_progress"] != "0" {
					why = n.addr + ": replica link down or syncing"
					return false
				}
			}
			if d.Topology == "cluster" {
				ci, err := n.do(t, "CLUSTER", "INFO").ToString()
				if err != nil || !strings.Contains(ci, "cluster_state:ok") {
					why = n.addr + ": cluster_state not ok"
					return false
				}
			}
		}
		return true
	}
	deadline := time.Now().Add(within)
	for !steady() {
		if time.Now().After(deadline) {
			t.Fatalf("the %s deployment is not steady after %v: %s", d.Topology, within, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// probeKey is a key that the master m serves, for waitSteady's writes (it expires at once).
func (d *deployment) probeKey(m node) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("rltest-probe-%d", i)
		if d.masterOf(k).addr == m.addr {
			return k
		}
	}
}

// strategies are the wait strategies every waiting behaviour is tested under.
var strategies = []struct {
	name string
	wait rlock.WaitStrategy
}{
	{"pubsub", rlock.PubSub()},
	{"spin", rlock.Spin(5 * time.Millisecond)},
}

// eachStrategy runs f as a subtest per wait strategy.
func eachStrategy(t *testing.T, f func(t *testing.T, wait rlock.WaitStrategy)) {
	for _, s := range strategies {
		t.Run(s.name, func(t *testing.T) { f(t, s.wait) })
	}
}

// mutexMaker makes a mutex of one kind: (*rlock.Client).NewMutex or NewFairMutex.
type mutexMaker = func(c *rlock.Client, name string, opts ...rlock.MutexOption) *rlock.Mutex

// kinds are the two mutex constructors; the plain mutex's behaviour tests run for both.
var kinds = []struct {
	name string
	new  mutexMaker
}{
	{"plain", (*rlock.Client).NewMutex},
	{"fair", (*rlock.Client).NewFairMutex},
}

// eachKind runs f as a subtest per mutex kind.
func eachKind(t *testing.T, f func(t *testing.T, newMutex mutexMaker)) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) { f(t, k.new) })
	}
}

// eachKindAndStrategy runs f as a subtest per mutex kind and wait strategy.
func eachKindAndStrategy(t *testing.T, f func(t *testing.T, newMutex mutexMaker, wait rlock.WaitStrategy)) {
	eachKind(t, func(t *testing.T, newMutex mutexMaker) {
		eachStrategy(t, func(t *testing.T, wait rlock.WaitStrategy) { f(t, newMutex, wait) })
	})
}

// expired requires the deadline of ctx (a hold context with a fixed lease) to have passed, and
// waits for ctx to end: the library guarantees the deadline, but its timer fires when the
// scheduler gets to it, which under load can be after another owner got the lock.
func expired(t *testing.T, ctx context.Context) {
	t.Helper()
	dl, ok := ctx.Deadline()
	require.True(t, ok, "the context has a deadline")
	require.False(t, dl.After(time.Now()), "its deadline has passed")
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
		t.Fatal("the context did not end within 1s of its deadline")
	}
}

// causeOf waits up to d for ctx to end and returns its cause, or nil if it did not end.
func causeOf(ctx context.Context, d time.Duration) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(d):
		return nil
	}
}
