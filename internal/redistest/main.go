package redistest

import (
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// ThrowawayEnv, set to 1 (as the scripts/with-*.sh do), says the deployment the tests run on is
// a throwaway one that tests may disturb for every client (DEBUG SLEEP, SCRIPT FLUSH, CLIENT
// KILL, restarts); a server Main starts is one too.
const ThrowawayEnv = "RLOCK_TEST_THROWAWAY"

// What Main found or started, for the tests of this process; set once, before the tests run.
var (
	redisAddr string    // the standalone server: REDIS_ADDR, or the one Main started
	suite     *Deployed // the deployment the tests run on (TopologyEnv)
	throwaway bool      // whether tests may disturb the whole deployment (ThrowawayEnv)
)

// Suite is the deployment the tests run on (TopologyEnv); nil under -short.
func Suite() *Deployed { return suite }

// RedisAddr is the standalone server: REDIS_ADDR, or the one Main started; "" under -short.
func RedisAddr() string { return redisAddr }

// NeedsRedis skips t under -short: go test -short runs only the tests that need no Redis.
func NeedsRedis(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Redis (-short runs only the tests that need none)")
	}
}

// NeedsThrowaway skips t unless the deployment is a throwaway one: t disturbs every client of
// it.
func NeedsThrowaway(t testing.TB) {
	t.Helper()
	NeedsRedis(t)
	if !throwaway {
		t.Skipf("disturbs every client of the deployment (DEBUG SLEEP, SCRIPT FLUSH, CLIENT KILL or a restart); "+
			"%s is not known to be a throwaway one: set %s=1 if it is, or unset REDIS_ADDR "+
			"to let the tests start a server (redis-server on PATH)", suite.Addrs, ThrowawayEnv)
	}
}

// IgnoreRueidisRefresh spares the goroutines of rueidis' cluster client (v1.0.79) that can
// outlive its Close: the slot map refresh it schedules, up to a second ahead, when a connection
// fails or a command is redirected, and the closing of connections a refresh replaced, 5s
// after it. Both end by themselves.
var IgnoreRueidisRefresh = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"),
	goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
}

// Main is the TestMain of a test package. In a process started by StartChild it runs helper
// with the name HelperEnv gives and exits with the status helper returns. Under -short it runs
// only the tests that need no Redis (the others skip with NeedsRedis; examples are skipped).
// Otherwise it opens the deployment TopologyEnv names, starting a throwaway redis-server first
// when REDIS_ADDR is unset, runs the tests, and fails them if a channel matching "rl*" is left
// subscribed on any node or a goroutine is left running. It does not return.
func Main(m *testing.M, helper func(name string) int) {
	if name := os.Getenv(HelperEnv); name != "" {
		if helper == nil {
			fmt.Fprintln(os.Stderr, "no test helper called", name)
			os.Exit(2)
		}
		os.Exit(helper(name))
	}
	flag.Parse()
	if testing.Short() {
		// No server: the tests that need one skip (NeedsRedis), and so do the examples, which
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
	throwaway = redisAddr == "" || os.Getenv(ThrowawayEnv) == "1"
	stop := func() {}
	if redisAddr == "" {
		srv, err := StartServer(ServerOptions{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "rlock tests need Redis: set REDIS_ADDR or put redis-server on PATH (make test does both):", err)
			os.Exit(1)
		}
		redisAddr, stop = srv.Addr, srv.Stop
		os.Setenv("REDIS_ADDR", redisAddr) // for the package's internal tests and child processes
		os.Setenv(ThrowawayEnv, "1")
	}
	d, err := DeploymentFromEnv()
	if err == nil {
		suite, err = Open(d)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rlock tests:", err)
		stop()
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		// Tests outside an env too: every key prefix of these tests starts with "rl".
		if left := suite.ChannelsLeft("rl*"); left != "" {
			fmt.Fprintln(os.Stderr, "channels left subscribed after the tests:", left)
			code = 1
		}
	}
	suite.Close()
	stop() // before the goroutine check: a started server's process has a goroutine waiting on it
	if code == 0 {
		// Every client the tests made is closed by now: nothing of ours may still run.
		if err := findLeaks(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// findLeaks is goleak.Find (sparing IgnoreRueidisRefresh), run again for up to 6s while it finds
// any: when a MOVED names the address a slot's connection already has (a slot that moved away
// and back), rueidis' cluster client (v1.0.79, redirectOrNew) replaces that connection and
// closes the old one 5s later, and the old one's goroutines end only then.
func findLeaks() error {
	end := time.Now().Add(6 * time.Second)
	for {
		err := goleak.Find(IgnoreRueidisRefresh...)
		if err == nil || time.Now().After(end) {
			return err
		}
		time.Sleep(250 * time.Millisecond)
	}
}
