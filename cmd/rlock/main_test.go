//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/rlock-go/rlock/internal/wire"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

// The tests drive the built rlock binary against the Redis server at REDIS_ADDR (as
// scripts/with-redis.sh sets it), each in a key prefix of its own.
var (
	rlockBin  string // the binary TestMain built
	redisAddr string // REDIS_ADDR; empty: every test skips
)

// TestMain builds the rlock binary (with -race if the tests have it) and runs the tests.
func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Short() { // -short: only the tests that need no Redis
		redisAddr = os.Getenv("REDIS_ADDR")
	}
	if redisAddr == "" {
		fmt.Fprintln(os.Stderr, "cmd/rlock: REDIS_ADDR is empty, so every test skips; "+
			"run them with: scripts/with-redis.sh go test ./cmd/rlock/")
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "rlock-cmd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rlockBin = filepath.Join(dir, "rlock")
	args := []string{"build", "-o", rlockBin}
	if raceEnabled {
		args = append(args, "-race") // the test was built with -race: so is the binary
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building rlock:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var prefixSeq atomic.Int64

// testEnv is one test's namespace: a key prefix of its own on the test server, whose keys are
// checked to be gone and deleted when the test ends, and a temporary directory.
type testEnv struct {
	t      *testing.T
	prefix string
	dir    string
	admin  rueidis.Client
}

// newEnv skips t without a Redis server, marks it parallel, and returns its namespace.
func newEnv(t *testing.T) *testEnv {
	t.Helper()
	if redisAddr == "" {
		t.Skip("REDIS_ADDR is empty: these tests need a Redis server (scripts/with-redis.sh sets one up)")
	}
	t.Parallel()
	admin, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}, DisableCache: true})
	require.NoError(t, err)
	e := &testEnv{t: t, prefix: fmt.Sprintf("rlcmd%d-%d", os.Getpid(), prefixSeq.Add(1)), dir: t.TempDir(), admin: admin}
	t.Cleanup(func() {
		defer admin.Close()
		if !t.Failed() {
			// Every rlock has exited or been killed by now (cleanups run last-in first-out):
			// what it held is released, or expires within its --watchdog.
			// A fencing counter (an election's terms) outlives every hold by design.
			left := func() []string {
				return slices.DeleteFunc(e.keys(), func(k string) bool { return strings.HasSuffix(k, ":fence") })
			}
			deadline := time.Now().Add(3 * time.Second)
			for len(left()) > 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if keys := left(); len(keys) > 0 {
				t.Errorf("keys left behind: %q", keys)
			}
		}
		for _, k := range e.keys() {
			admin.Do(context.Background(), admin.B().Del().Key(k).Build())
		}
	})
	return e
}

// keys lists the keys of the test's prefix.
func (e *testEnv) keys() []string {
	keys, err := e.admin.Do(context.Background(), e.admin.B().Keys().Pattern(e.prefix+":*").Build()).AsStrSlice()
	require.NoError(e.t, err)
	return keys
}

// argv is the command line of rlock sub with this test's server and prefix, then args.
func (e *testEnv) argv(sub string, args ...string) []string {
	return append([]string{sub, "--redis", "redis://" + redisAddr, "--prefix", e.prefix}, args...)
}

// proc is a started rlock process in a process group of its own.
type proc struct {
	cmd    *exec.Cmd
	lines  chan line // its stdout, line by line
	stderr *syncBuffer
	done   chan struct{} // closed when it has exited
	err    error         // of Wait, once done is closed
}

// line is a line of output and when the test read it.
type line struct {
	text string
	at   time.Time
}

// start starts rlock sub with this test's server and prefix; it is killed (its process group)
// when the test ends, if it still runs.
func (e *testEnv) start(sub string, args ...string) *proc {
	e.t.Helper()
	return e.startArgs(os.Environ(), e.argv(sub, args...))
}

// startArgs starts rlock with the command line argv (no program name) and environment env
// (nil: the test's).
func (e *testEnv) startArgs(env, argv []string) *proc {
	e.t.Helper()
	return e.startProgram(env, rlockBin, argv...)
}

// startProgram starts program (rlock, or a wrapper that runs it) as startArgs does rlock.
func (e *testEnv) startProgram(env []string, program string, argv ...string) *proc {
	e.t.Helper()
	// More lines than the usage has: a test that fails before it reads never blocks Wait.
	p := &proc{lines: make(chan line, 1000), stderr: new(syncBuffer), done: make(chan struct{})}
	p.cmd = exec.Command(program, argv...)
	if env == nil {
		env = os.Environ()
	}
	p.cmd.Env = env
	if raceEnabled && lookupEnv(env, "GORACE") == "" {
		// The race runtime sleeps 1s at exit by default; a race still fails the run (exit 66).
		p.cmd.Env = append(p.cmd.Env[:len(p.cmd.Env):len(p.cmd.Env)], "GORACE=atexit_sleep_ms=0")
	}
	p.cmd.Stdout = &lineWriter{ch: p.lines}
	p.cmd.Stderr = p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.cmd.WaitDelay = 2 * time.Second // a CMD's child that keeps stdout open does not hold Wait
	require.NoError(e.t, p.cmd.Start())
	go func() {
		p.err = p.cmd.Wait()
		close(p.lines)
		close(p.done)
	}()
	e.t.Cleanup(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		if e.t.Failed() {
			e.t.Logf("rlock %q stderr:\n%s", argv, p.stderr)
		}
	})
	return p
}

// run runs rlock sub with this test's server and prefix to its end (at most 10s) and returns
// its exit status and output.
func (e *testEnv) run(sub string, args ...string) (code int, stdout, stderr string) {
	e.t.Helper()
	return e.runArgs(os.Environ(), e.argv(sub, args...))
}

// runArgs runs rlock with the command line argv and environment env to its end (at most 10s)
// and returns its exit status and output.
func (e *testEnv) runArgs(env, argv []string) (code int, stdout, stderr string) {
	e.t.Helper()
	p := e.startArgs(env, argv)
	code = p.wait(e.t, 10*time.Second)
	var out []string
	for l := range p.lines {
		out = append(out, l.text+"\n")
	}
	return code, strings.Join(out, ""), p.stderr.String()
}

// next returns p's next line of output, failing t if none comes within d.
func (p *proc) next(t *testing.T, d time.Duration) line {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		require.True(t, ok, "rlock exited without the output expected; stderr:\n%s", p.stderr)
		return l
	case <-time.After(d):
		require.FailNow(t, "no output in time", "after %v; stderr so far:\n%s", d, p.stderr)
	}
	return line{}
}

// expect requires p's next line of output, within d, to be want, and returns when it came.
func (p *proc) expect(t *testing.T, want string, d time.Duration) time.Time {
	t.Helper()
	l := p.next(t, d)
	require.Equal(t, want, l.text, "stderr:\n%s", p.stderr)
	return l.at
}

// quiet requires p to print nothing and keep running for d.
func (p *proc) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		require.False(t, ok, "unexpected output %q", l.text)
		require.FailNow(t, "rlock exited", "stderr:\n%s", p.stderr)
	case <-time.After(d):
	}
}

// signal sends sig to the rlock process alone (not its group, nor its CMD).
func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig))
}

// wait waits up to d for p to exit and returns its exit status (-1: killed by a signal).
func (p *proc) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		require.FailNow(t, "rlock did not exit in time", "after %v; stderr:\n%s", d, p.stderr)
	}
	var exit *exec.ExitError
	if p.err != nil && !errors.As(p.err, &exit) {
		require.NoError(t, p.err)
	}
	return p.cmd.ProcessState.ExitCode()
}

// lineWriter sends what is written to it to ch, a line at a time, stamped with the time.
type lineWriter struct {
	ch      chan<- line
	partial []byte
}

// Write sends every complete line of what was written so far.
func (w *lineWriter) Write(b []byte) (int, error) {
	now := time.Now()
	w.partial = append(w.partial, b...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		w.ch <- line{string(w.partial[:i]), now}
		w.partial = w.partial[i+1:]
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// envWithout returns the environment of the test without the variables named.
func envWithout(names ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			drop = drop || k == n
		}
		if !drop {
			env = append(env, kv)
		}
	}
	return env
}

// waiting waits up to 10s until n clients are subscribed to the channel of the lock called
// name (a plain Mutex's waiters are nowhere else in Redis): a process that has subscribed has
// long installed its signal handlers and is waiting. A slow machine can take far more than a
// fixed pause to start a race-enabled binary.
func (e *testEnv) waiting(t *testing.T, name string, n int64) {
	t.Helper()
	ch := wire.NewKeys(e.prefix, name).Channel
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := e.admin.Do(context.Background(), e.admin.B().PubsubNumsub().Channel(ch).Build()).AsIntMap()
		require.NoError(t, err)
		if got[ch] >= n {
			return
		}
		require.True(t, time.Now().Before(deadline), "%d of %d waiters subscribed to %s", got[ch], n, ch)
		time.Sleep(10 * time.Millisecond)
	}
}
