package rlock_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// helperEnv names the helper a re-executed test binary runs instead of the tests.
const helperEnv = "RLOCK_TEST_HELPER"

// redisAddr is the server every test uses: REDIS_ADDR, or one TestMain starts.
var redisAddr string

// throwawayEnv, set to 1 (as scripts/with-redis.sh does), says the server at REDIS_ADDR is a
// throwaway one that tests may disturb for every client (DEBUG SLEEP, SCRIPT FLUSH, CLIENT
// KILL); a server TestMain starts is one too.
const throwawayEnv = "RLOCK_TEST_THROWAWAY"

// throwaway reports whether tests may disturb the whole server (see throwawayEnv).
var throwaway bool

// needsThrowaway skips t unless the server is a throwaway one: t disturbs every client of it.
func needsThrowaway(t testing.TB) {
	t.Helper()
	if !throwaway {
		t.Skipf("disturbs every client of the server (DEBUG SLEEP, SCRIPT FLUSH or CLIENT KILL); "+
			"REDIS_ADDR=%s is not known to be a throwaway server: set %s=1 if it is, or unset REDIS_ADDR "+
			"to let the tests start one (redis-server on PATH)", redisAddr, throwawayEnv)
	}
}

func TestMain(m *testing.M) {
	if name := os.Getenv(helperEnv); name != "" {
		os.Exit(runHelper(name))
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
	code := m.Run()
	if code == 0 {
		// Every client the tests made is closed by now: nothing of ours may still run.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
			code = 1
		}
	}
	stop()
	os.Exit(code)
}

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

// newRueidis returns a rueidis client of addr, closed when the test ends.
func newRueidis(t testing.TB, addr string) rueidis.Client {
	t.Helper()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	return rc
}

var prefixSeq atomic.Int64

// env is one test's namespace on the shared server: a key prefix of its own, an admin client,
// and a check when the test ends that no keys (but fencing counters) and no channels remain.
type env struct {
	t      testing.TB
	addr   string
	admin  rueidis.Client
	prefix string
	dirty  bool // the test leaves keys behind on purpose (they expire)
}

func newEnv(t testing.TB) *env {
	return newEnvAt(t, redisAddr)
}

func newEnvAt(t testing.TB, addr string) *env {
	t.Helper()
	e := &env{t: t, addr: addr, prefix: fmt.Sprintf("rlt%d-%d", os.Getpid(), prefixSeq.Add(1))}
	e.admin = newRueidis(t, addr)
	t.Cleanup(e.checkClean) // runs after the clients' Close (cleanups run last-in first-out)
	return e
}

// client returns an rlock client with this env's prefix on its own rueidis connection; it is
// closed when the test ends.
func (e *env) client(opts rlock.Options) *rlock.Client {
	e.t.Helper()
	opts.KeyPrefix = e.prefix
	c, err := rlock.New(newRueidis(e.t, e.addr), opts)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { require.NoError(e.t, c.Close()) })
	return c
}

// keys lists this env's keys.
func (e *env) keys() []string {
	keys, err := e.admin.Do(context.Background(), e.admin.B().Keys().Pattern(e.prefix+":*").Build()).AsStrSlice()
	require.NoError(e.t, err)
	return keys
}

// channels lists this env's subscribed channels on the server, classic and sharded.
func (e *env) channels() []string {
	chs, err := e.admin.Do(context.Background(), e.admin.B().PubsubChannels().Pattern(e.prefix+":*").Build()).AsStrSlice()
	require.NoError(e.t, err)
	sharded, err := e.admin.Do(context.Background(), e.admin.B().PubsubShardchannels().Pattern(e.prefix+":*").Build()).AsStrSlice()
	require.NoError(e.t, err)
	return append(chs, sharded...)
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
	}, 3*time.Second, 10*time.Millisecond, "keys or channels left behind: %v %v", e.keys(), e.channels())
}

// do runs a raw command on the admin client.
func (e *env) do(args ...string) rueidis.RedisResult {
	return e.admin.Do(context.Background(), e.admin.B().Arbitrary(args...).Build())
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
