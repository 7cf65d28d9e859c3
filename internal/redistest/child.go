package redistest

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// HelperEnv names the helper a re-executed test binary runs instead of the tests (see Main's
// helpers).
const HelperEnv = "RLOCK_TEST_HELPER"

// Child is a re-executed test binary running one helper.
type Child struct {
	Cmd *exec.Cmd
	Out *bufio.Scanner // its stdout, line by line
	In  io.WriteCloser // its stdin
}

// StartChild runs helper name in a new process of this test binary with env added; it
// inherits the parent's environment, and with it the deployment. The process is killed and
// reaped when the test ends; it skips t under -short.
func StartChild(t *testing.T, name string, env ...string) *Child {
	t.Helper()
	NeedsRedis(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// A race-enabled binary sleeps 1s before it exits unless told not to.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(os.Environ(), append([]string{HelperEnv + "=" + name, "REDIS_ADDR=" + redisAddr, "GORACE=" + gorace}, env...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return &Child{Cmd: cmd, Out: bufio.NewScanner(out), In: in}
}

// Expect reads the child's next output line and requires it to be want.
func (c *Child) Expect(t *testing.T, want string) {
	t.Helper()
	require.True(t, c.Out.Scan(), "child ended before printing %q: %v", want, c.Out.Err())
	require.Equal(t, want, c.Out.Text())
}

// Wait logs the child's remaining output and requires it to exit with status 0.
func (c *Child) Wait(t *testing.T) {
	t.Helper()
	for c.Out.Scan() {
		t.Logf("child: %s", c.Out.Text())
	}
	require.NoError(t, c.Cmd.Wait())
}
