//go:build unix

package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
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
		{[]string{"exec", "--semaphore", "x", "n", "--", "true"}, `invalid value "x" for flag -semaphore`},
		{[]string{"exec", "--semaphore", "3", "--fair", "n", "--", "true"}, "--fair does not apply to --semaphore"},
		{[]string{"exec", "--semaphore", "3", "--owner", "o", "n", "--", "true"}, "--owner does not apply to --semaphore"},
		{[]string{"exec", "--read", "--owner", "", "n", "--", "true"}, "empty owner id"},
		{[]string{"exec"}, "exec: missing NAME"},
		{[]string{"exec", "n"}, `exec: missing CMD after NAME "n"`},
		{[]string{"exec", "--bogus", "n", "--", "true"}, "flag provided but not defined: -bogus"},
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
		assert.Contains(t, out, "*/10 * * * * rlock exec --wait 0 sync-invoices -- /usr/local/bin/sync-invoices")
		assert.Contains(t, out, "Exit status:")
	}
	code, out, _ := e.runArgs(nil, []string{"exec", "-h"})
	assert.Equal(t, 0, code)
	assert.True(t, strings.HasPrefix(out, "Usage: rlock exec [flags] NAME [--] CMD [ARG...]\n"), "%s", out)
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
