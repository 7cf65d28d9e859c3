package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Crash kills the server n (SIGKILL) and returns a function that starts it again as it was,
// without its data (the tests' servers persist nothing); its replicas then sync from it (see
// Deployed.WaitSteady). It needs the command line that StartServer records in the server's
// directory (the scripts/with-*.sh start their data nodes with it, through cmd/redis-start),
// and skips t without it; the script stops the new process by its pidfile, so the test binary
// does not wait for it. A server this process started has Kill and Start instead.
func Crash(t *testing.T, n Node) (restart func()) {
	t.Helper()
	return PrepareCrash(t, n)()
}

// PrepareCrash reads what Crash needs to know of n (its command line, settings and PID) and
// returns the kill that Crash does, which then sends SIGKILL at once: a test can kill the
// server within microseconds of a call of its own.
func PrepareCrash(t *testing.T, n Node) (kill func() (restart func())) {
	t.Helper()
	get := func(name string) string {
		kv, err := n.Do(t, "CONFIG", "GET", name).AsStrMap()
		require.NoError(t, err)
		return kv[name]
	}
	raw, err := os.ReadFile(filepath.Join(get("dir"), "args"))
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("restarts %s, whose command line is unknown: start it with scripts/with-*.sh", n.Addr)
	}
	require.NoError(t, err)
	args := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	// Settings the scripts change once the deployment is up.
	later := []string{"repl-ping-replica-period", get("repl-ping-replica-period")}
	if info, err := n.Info("cluster"); err == nil && info["cluster_enabled"] == "1" {
		later = append(later, "cluster-node-timeout", get("cluster-node-timeout"))
	}
	pid := n.PID(t)
	return func() func() {
		t.Helper()
		return crash(t, n, pid, args, later)
	}
}

// crash kills n, whose process is pid, and returns the function that starts it again with
// args, setting later.
func crash(t *testing.T, n Node, pid int, args, later []string) (restart func()) {
	t.Helper()
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
		require.Eventually(t, func() bool { return n.Do(t, "PING").Error() == nil }, 10*time.Second, 10*time.Millisecond,
			"%s did not start again", n.Addr)
		require.NoError(t, n.Do(t, append([]string{"CONFIG", "SET"}, later...)...).Error())
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

// Crashable returns an Env whose lock called name lives on a server that kill stops (SIGKILL)
// and start starts again without its data. Standalone, that is a server of the test's own; on
// a cluster or Sentinel it is the lock's master (the deployment must be a throwaway one),
// started again with its command line (see Crash) and at the latest when the test ends, so that
// the deployment stays as it was.
func Crashable(t *testing.T, name string) (e *Env, kill, start func()) {
	NeedsRedis(t)
	if Suite().Topology == "standalone" {
		srv, err := StartServer(ServerOptions{})
		require.NoError(t, err)
		t.Cleanup(srv.Stop)
		return NewEnvAt(t, srv.Addr), srv.Kill, func() { require.NoError(t, srv.Start()) }
	}
	NeedsThrowaway(t)
	e = NewEnv(t)
	n := e.Master(name)
	// What the kill needs is read beforehand, so that kill sends the signal at once.
	prepared := PrepareCrash(t, n)
	var restart func()
	crashed := false
	t.Cleanup(func() {
		if restart != nil {
			restart()
		}
		if crashed {
			e.Dep.WaitSteady(t, 20*time.Second)
		}
	})
	kill = func() {
		if prepared == nil {
			prepared = PrepareCrash(t, n)
		}
		restart, prepared, crashed = prepared(), nil, true
	}
	start = func() {
		restart()
		restart, prepared = nil, PrepareCrash(t, n)
	}
	return e, kill, start
}

// Answering waits until n serves the slot of key again (EXISTS key gets a reply) and returns
// that moment, polling every 5ms for up to 30s.
func (n Node) Answering(t *testing.T, key string) time.Time {
	t.Helper()
	give := time.Now().Add(30 * time.Second)
	for time.Now().Before(give) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := n.RC.Do(ctx, n.RC.B().Exists().Key(key).Build()).Error()
		cancel()
		if err == nil {
			return time.Now()
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s did not serve %s again within 30s", n.Addr, key)
	return time.Time{}
}
