//go:build unix

package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExecArgs: the NAMEs and CMD of exec: several NAMEs end with "--" (flags may come
// between them); one NAME may leave it out.
func TestExecArgs(t *testing.T) {
	for _, tc := range []struct {
		args, names, cmd []string
	}{
		{[]string{"a", "--", "echo", "x"}, []string{"a"}, []string{"echo", "x"}},
		{[]string{"a", "echo", "x"}, []string{"a"}, []string{"echo", "x"}},
		{[]string{"a", "--", "sh", "-c", "x", "--", "y"}, []string{"a"}, []string{"sh", "-c", "x", "--", "y"}},
		{[]string{"a", "b", "c", "--", "echo"}, []string{"a", "b", "c"}, []string{"echo"}},
		{[]string{"--fair", "a", "--wait", "0", "b", "--quiet", "--", "echo", "--x"}, []string{"a", "b"}, []string{"echo", "--x"}},
		{[]string{"a", "b", "--fair", "--", "echo"}, []string{"a", "b"}, []string{"echo"}},
	} {
		f := execFlags{}
		fs := newFlagSet("exec")
		f.register(fs)
		names, cmd, err := execArgs(fs, tc.args)
		require.NoError(t, err, "%q", tc.args)
		assert.Equal(t, tc.names, names, "%q", tc.args)
		assert.Equal(t, tc.cmd, cmd, "%q", tc.args)
	}
	fs := newFlagSet("exec")
	(&execFlags{}).register(fs)
	_, _, err := execArgs(fs, []string{"a", "b", "--wait", "--", "echo"})
	assert.ErrorContains(t, err, "--wait needs a value")
	_, _, err = execArgs(fs, []string{"-h"})
	assert.ErrorIs(t, err, flag.ErrHelp)
}

// TestExec_severalNames: rlock exec a b -- CMD holds both mutexes: loops of "exec a b", "exec
// b a" (the other order) and "exec a" never run their CMDs at once; --wait 0 exits 75 while a
// member is held; several NAMEs take mutexes only; CMD finds them all in $RLOCK_NAME.
func TestExec_severalNames(t *testing.T) {
	e := newEnv(t)
	logFile := filepath.Join(e.dir, "log")
	script := `echo "start $$" >> "$1"; sleep 0.05; echo "end $$" >> "$1"`
	const rounds = 3
	var wg sync.WaitGroup
	for _, names := range [][]string{{"a", "b"}, {"b", "a"}, {"a"}, {"--fair", "fa", "fb"}, {"--fair", "fb", "fa"}} {
		wg.Go(func() {
			for range rounds {
				args := append(append([]string{"exec"}, names...), "--", "sh", "-c", script, "sh", logFile)
				if names[0] == "--fair" {
					args[len(args)-1] += ".fair"
				}
				code, _, stderr := e.run(args[0], args[1:]...)
				assert.Equal(t, 0, code, "%q: stderr: %s", names, stderr)
			}
		})
	}
	wg.Wait()
	for _, file := range []string{logFile, logFile + ".fair"} {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		for i := 0; i+1 < len(lines); i += 2 {
			start, end := lines[i], lines[i+1]
			require.True(t, strings.HasPrefix(start, "start "), "line %d is %q, not a start:\n%s", i+1, start, b)
			require.Equal(t, "end "+strings.TrimPrefix(start, "start "), end, "line %d: runs interleaved:\n%s", i+2, b)
		}
	}

	holder := e.start("exec", "b", "--", "sh", "-c", holdScript, "sh", "0")
	holder.expect(t, "ready", 5*time.Second)
	marker := filepath.Join(e.dir, "ran")
	code, _, stderr := e.run("exec", "--wait", "0", "a", "b", "c", "--", "touch", marker)
	assert.Equal(t, exitTempFail, code)
	assert.Equal(t, "rlock: multilock [\"a\" \"b\" \"c\"] has a member held by another owner\n", stderr)
	assert.NoFileExists(t, marker, "CMD ran without the locks")
	holder.signal(t, syscall.SIGTERM)
	holder.expect(t, "got-term", 2*time.Second)
	assert.Equal(t, 0, holder.wait(t, 5*time.Second))

	code, out, _ := e.run("exec", "c", "a", "b", "--", "sh", "-c", `echo "$RLOCK_NAME"`)
	assert.Equal(t, 0, code)
	assert.Equal(t, "c a b\n", out)

	code, _, stderr = e.run("exec", "--read", "a", "b", "--", "true")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "several NAMEs are mutexes")
}
