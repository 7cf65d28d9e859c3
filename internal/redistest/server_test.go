package redistest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestServer starts a server, kills it, starts it again on the same port and stops it; the
// command line it records starts the same server.
func TestServer(t *testing.T) {
	NeedsRedis(t)
	s, err := StartServer(ServerOptions{})
	require.NoError(t, err)
	n := NewNode(t, s.Addr)
	require.NoError(t, n.Do(t, "PING").Error())
	require.Equal(t, s.PID(), n.PID(t))
	args, err := os.ReadFile(filepath.Join(s.Dir, "args"))
	require.NoError(t, err)
	require.Contains(t, string(args), "\n--port\n"+s.Port+"\n")
	pid, err := os.ReadFile(filepath.Join(s.Dir, "redis.pid"))
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(s.PID()), strings.TrimSpace(string(pid)))

	s.Kill()
	_, err = net.DialTimeout("tcp", s.Addr, time.Second)
	require.Error(t, err, "killed")
	require.NoError(t, s.Start())
	require.Eventually(t, func() bool { return n.Do(t, "PING").Error() == nil }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, s.PID(), n.PID(t))

	s.Stop()
	select {
	case <-s.Exited():
	default:
		t.Fatal("Stop returned before the process exited")
	}
	_, err = os.Stat(s.Dir)
	require.ErrorIs(t, err, os.ErrNotExist, "its temporary directory is gone")
}

// TestServer_portTaken: a server asked for a port that is taken fails at once and leaves
// nothing behind; one left to choose its port gets a free one.
func TestServer_portTaken(t *testing.T) {
	NeedsRedis(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	dir := t.TempDir()
	_, err = StartServer(ServerOptions{Port: port, Dir: dir})
	require.Error(t, err)
	_, err = os.Stat(dir)
	require.NoError(t, err, "a directory the caller gave stays")

	s, err := StartServer(ServerOptions{})
	require.NoError(t, err)
	defer s.Stop()
	require.NotEqual(t, port, s.Port)
	rc := NewRueidis(t, s.Addr)
	require.NoError(t, rc.Do(context.Background(), rc.B().Ping().Build()).Error())
}
