//go:build unix

package main

import (
	"context"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/rlock-go/rlock/internal/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUsageErrors: mistakes on the command line, and flags that do not go together, exit 64
// with a message.
func TestUsageErrors(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"exec", "--read", "--write", "n", "--", "true"}, "--read and --write exclude each other"},
		{[]string{"exec", "--semaphore", "3", "--read", "n", "--", "true"}, "--semaphore excludes --read and --write"},
		{[]string{"exec", "--semaphore", "0", "n", "--", "true"}, "--semaphore 0: a semaphore needs at least 1 permit"},
		{[]string{"exec", "--semaphore", "-2", "n", "--", "true"}, "--semaphore -2: a semaphore needs at least 1 permit"},
		{[]string{"exec", "--semaphore", "x", "n", "--", "true"}, "exec: --semaphore x: not a whole number"},
		{[]string{"exec", "--semaphore", "3", "--fair", "n", "--", "true"}, "--fair does not apply to --semaphore"},
		{[]string{"exec", "--semaphore", "3", "--owner", "o", "n", "--", "true"}, "--owner does not apply to --semaphore"},
		{[]string{"exec", "--read", "--owner", "", "n", "--", "true"}, "empty owner id"},
		{[]string{"exec"}, "exec: missing NAME"},
		{[]string{"exec", "n"}, `exec: missing CMD after NAME "n"`},
		{[]string{"exec", "--bogus", "n", "--", "true"}, "exec: unknown flag --bogus"},
		{[]string{"exec", "--wait", "-1s", "n", "--", "true"}, "--wait -1s is negative"},
		{[]string{"exec", "--lost-exit", "300", "n", "--", "true"}, "--lost-exit 300 is not an exit status"},
		{[]string{"exec", "--owner", "", "n", "--", "true"}, "empty owner id"},
		{[]string{"exec", "--watchdog", "1ms", "n", "--", "true"}, "WatchdogTimeout 1ms is below 3ms"},
		{[]string{"status"}, "status: missing NAME"},
		{[]string{"status", "a", "b"}, `unexpected arguments after NAME "a"`},
		{[]string{"status", "}x"}, "starts with '}'"},
		{[]string{"status", ""}, "status: NAME: empty lock name"},
		{[]string{"unlock", "n"}, "unlock: needs --force"},
		{[]string{"frobnicate", "n"}, `unknown subcommand "frobnicate"`},
	} {
		argv := tc.args
		if len(argv) > 1 {
			argv = e.argv(argv[0], argv[1:]...)
		}
		code, _, stderr := e.runArgs(nil, argv)
		assert.Equal(t, exitUsage, code, "%q: stderr: %s", argv, stderr)
		assert.Contains(t, stderr, tc.msg, "%q", argv)
	}

	code, _, stderr := e.runArgs(nil, nil)
	assert.Equal(t, exitUsage, code)
	assert.True(t, strings.HasPrefix(stderr, "rlock: the flock of a fleet"), "no arguments: usage on stderr")

	code, _, stderr = e.runArgs(envWithout("REDIS_URL"), []string{"status", "n"})
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "no Redis: give --redis URL or set REDIS_URL")
}

// TestHelp: rlock help and -h print the usage, with the cron example, on stdout and exit 0.
func TestHelp(t *testing.T) {
	e := newEnv(t)
	for _, argv := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		code, out, _ := e.runArgs(nil, argv)
		assert.Equal(t, 0, code)
		assert.Contains(t, out, "*/10 * * * * rlock exec --wait 0 --quiet sync-invoices -- /usr/local/bin/sync-invoices")
		assert.Contains(t, out, "Exit status:")
	}
	code, out, _ := e.runArgs(nil, []string{"exec", "-h"})
	assert.Equal(t, 0, code)
	assert.True(t, strings.HasPrefix(out, "Usage: rlock exec [flags] NAME... [--] CMD [ARG...]\n"), "%s", out)
}

// TestRedisUnreachable: exec exits 69 and status and unlock exit 2 when Redis cannot be
// reached.
func TestRedisUnreachable(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		argv []string
		want int
	}{
		{[]string{"exec", "--redis", "redis://127.0.0.1:1", "n", "--", "true"}, exitUnavailable},
		{[]string{"status", "--redis", "redis://127.0.0.1:1", "n"}, exitError},
		{[]string{"unlock", "--force", "--redis", "redis://127.0.0.1:1", "n"}, exitError},
	} {
		code, _, stderr := e.runArgs(nil, tc.argv)
		assert.Equal(t, tc.want, code, "%q: stderr: %s", tc.argv, stderr)
		assert.Contains(t, stderr, "rlock: cannot connect to Redis at 127.0.0.1:1")
	}
}

// TestFlagErrors: a flag's parse error spells the flag as the help does (--wait, not -wait)
// and says what is wrong with its value.
func TestFlagErrors(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"exec", "--wait", "5", "n", "--", "true"}, "exec: --wait 5: missing unit, e.g. 5s"},
		{[]string{"exec", "-wait", "0.5", "n", "--", "true"}, "exec: --wait 0.5: missing unit, e.g. 0.5s"},
		{[]string{"exec", "--wait", "soon", "n", "--", "true"}, "exec: --wait soon: not a duration, e.g. 500ms, 10s, 5m, 1h"},
		{[]string{"exec", "--wait=5", "n", "--", "true"}, "exec: --wait 5: missing unit, e.g. 5s"},
		{[]string{"status", "--watchdog", "30", "n"}, "status: --watchdog 30: missing unit, e.g. 30s"},
		{[]string{"exec", "--timeout", "5s", "n", "--", "true"}, "exec: unknown flag --timeout"},
		{[]string{"exec", "-timeout", "5s", "n", "--", "true"}, "exec: unknown flag --timeout"},
		{[]string{"status", "n", "--fair-wait"}, "status: --fair-wait needs a value"},
		{[]string{"exec", "--fair=maybe", "n", "--", "true"}, "exec: --fair=maybe: not true or false"},
		{[]string{"exec", "--lost-exit", "x", "n", "--", "true"}, "exec: --lost-exit x: not a whole number"},
		{[]string{"exec", "--semaphore", "99999999999999999999", "n", "--", "true"}, "exec: --semaphore 99999999999999999999: out of range"},
	} {
		argv := e.argv(tc.args[0], tc.args[1:]...)
		code, _, stderr := e.runArgs(nil, argv)
		assert.Equal(t, exitUsage, code, "%q: stderr: %s", argv, stderr)
		assert.Equal(t, "rlock: "+tc.msg+"\nRun 'rlock help' for usage.\n", stderr, "%q", argv)
	}
}

// TestErrorPrefix: every message starts with "rlock: " once: the library's errors, which start
// with it too (and wrap errors that do), are printed without theirs; kinds are spelled as
// rlock.State.Kind spells them.
func TestErrorPrefix(t *testing.T) {
	e := newEnv(t)
	str := wire.LockKey(e.prefix, "str")
	require.NoError(t, e.admin.Do(context.Background(), e.admin.B().Set().Key(str).Value("x").Build()).Error())
	t.Cleanup(func() { e.admin.Do(context.Background(), e.admin.B().Del().Key(str).Build()) })
	for _, tc := range []struct {
		args []string
		code int
		msg  string // the first line
	}{
		{[]string{"exec", "", "--", "true"}, exitUsage, `rlock: mutex "": invalid argument: empty lock name`},
		{[]string{"exec", "--fair", "", "--", "true"}, exitUsage, `rlock: fair_mutex "": invalid argument: empty lock name`},
		{[]string{"exec", "--read", "--owner", "", "n", "--", "true"}, exitUsage, `rlock: rw_mutex "n": invalid argument: empty owner id`},
		{[]string{"exec", "--write", "--fair", "--owner", "", "n", "--", "true"}, exitUsage,
			`rlock: fair_rw_mutex "n": invalid argument: empty owner id`},
		{[]string{"exec", "--semaphore", "2", "", "--", "true"}, exitUsage, `rlock: semaphore "": invalid argument: empty lock name`},
		{[]string{"exec", "--watchdog", "1ms", "n", "--", "true"}, exitUsage, `rlock: invalid argument: WatchdogTimeout 1ms is below 3ms`},
		{[]string{"exec", "--wait", "0", "str", "--", "true"}, exitUsage, `rlock: mutex "str": invalid argument: a key of this lock`},
		{[]string{"status", "str"}, exitError, `rlock: status: `},
		{[]string{"unlock", "--force", "str"}, exitError, `rlock: unlock --force "str": `},
		{[]string{"exec", "n", "--", "/nonexistent/cmd"}, exitNotFound, `rlock: exec: "/nonexistent/cmd": stat /nonexistent/cmd`},
	} {
		argv := e.argv(tc.args[0], tc.args[1:]...)
		code, _, stderr := e.runArgs(nil, argv)
		assert.Equal(t, tc.code, code, "%q: stderr: %s", argv, stderr)
		assert.True(t, strings.HasPrefix(stderr, tc.msg), "%q: stderr:\n%s", argv, stderr)
		for _, l := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
			assert.NotRegexp(t, `rlock: .*rlock: `, l, "%q: a doubled prefix", argv)
			assert.NotContains(t, l, "rwmutex", "%q", argv)
		}
	}
}

// TestVersion: rlock version and --version print the module's version ("(devel)" for a build
// from the clone) and the Go release that built it, and exit 0.
func TestVersion(t *testing.T) {
	e := newEnv(t)
	for _, argv := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		code, out, stderr := e.runArgs(nil, argv)
		assert.Equal(t, 0, code, "%q: stderr: %s", argv, stderr)
		assert.Regexp(t, `^rlock version \S+, built with `+regexp.QuoteMeta(runtime.Version())+"\n$", out, "%q", argv)
		assert.Empty(t, stderr)
	}
}

// TestRedisAddress: --redis and REDIS_URL take a plain host:port as redis://host:port (as the
// library's examples take REDIS_ADDR); a value that is no URL gets a suggestion, without its
// password.
func TestRedisAddress(t *testing.T) {
	e := newEnv(t)
	argv := []string{"status", "--prefix", e.prefix, "--redis", redisAddr, "n"}
	code, out, stderr := e.runArgs(nil, argv)
	assert.Equal(t, exitFree, code, "stderr: %s", stderr)
	assert.Equal(t, "n: free (key "+wire.LockKey(e.prefix, "n")+")\n", out)

	env := append(envWithout("REDIS_URL"), "REDIS_URL="+redisAddr)
	code, out, stderr = e.runArgs(env, []string{"exec", "--prefix", e.prefix, "n", "--", "echo", "ran"})
	assert.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Equal(t, "ran\n", out)

	for _, tc := range []struct{ value, msg string }{
		{"localhost:x", "--redis is not a Redis URL (it has no scheme://): did you mean redis://localhost:x?"},
		{"user:secret@127.0.0.1:6379", "--redis is not a Redis URL (it has no scheme://): did you mean redis://user:xxxxx@127.0.0.1:6379?"},
		{"/run/redis.sock", "--redis is not a Redis URL (it has no scheme://): did you mean unix:///run/redis.sock?"},
		{"http://127.0.0.1:6379", "--redis http://127.0.0.1:6379: "},
	} {
		code, _, stderr := e.runArgs(nil, []string{"status", "--redis", tc.value, "n"})
		assert.Equal(t, exitUsage, code, "%s: stderr: %s", tc.value, stderr)
		assert.True(t, strings.HasPrefix(stderr, "rlock: status: "+tc.msg), "%s: stderr: %s", tc.value, stderr)
		assert.NotContains(t, stderr, "secret")
	}
	env = append(envWithout("REDIS_URL"), "REDIS_URL=localhost:x")
	code, _, stderr = e.runArgs(env, []string{"status", "n"})
	assert.Equal(t, exitUsage, code, "stderr: %s", stderr)
	assert.Contains(t, stderr, "rlock: status: $REDIS_URL is not a Redis URL (it has no scheme://): did you mean redis://localhost:x?")
}

// TestREADMEUsage: the README's copy of "rlock help" is the help.
func TestREADMEUsage(t *testing.T) {
	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, after, ok := strings.Cut(string(b), "`rlock help` prints this:\n\n```text\n")
	require.True(t, ok, "README.md has no copy of the help")
	text, _, ok := strings.Cut(after, "```\n")
	require.True(t, ok)
	assert.Equal(t, usage, text, "README.md's copy of the help differs from the help")
}
