package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

// Node is one data node (or sentinel) of a deployment, reached directly (not through cluster
// routing).
type Node struct {
	Addr string
	RC   rueidis.Client
}

// OpenNode returns a direct client of the server at addr; the caller closes n.RC.
func OpenNode(addr string) (Node, error) {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true,
		ForceSingleClient: true})
	return Node{Addr: addr, RC: rc}, err
}

// NewNode returns a direct client of the server at addr, closed when the test ends.
func NewNode(t testing.TB, addr string) Node {
	t.Helper()
	n, err := OpenNode(addr)
	require.NoError(t, err)
	t.Cleanup(n.RC.Close)
	return n
}

// NewRueidis returns a rueidis client of the standalone server at addr, closed when the test
// ends; it skips t under -short.
func NewRueidis(t testing.TB, addr string) rueidis.Client {
	NeedsRedis(t)
	t.Helper()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	return rc
}

// Do runs a command on n, giving up after 5s (a stopped server must not hang a test).
func (n Node) Do(t testing.TB, args ...string) rueidis.RedisResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return n.RC.Do(ctx, n.RC.B().Arbitrary(args...).Build())
}

// Info returns the fields of an INFO section of n.
func (n Node) Info(section string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := n.RC.Do(ctx, n.RC.B().Info().Section(section).Build()).ToString()
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

// Role is "master" or "slave", as INFO replication says now.
func (n Node) Role(t testing.TB) string {
	t.Helper()
	info, err := n.Info("replication")
	require.NoError(t, err)
	return info["role"]
}

// Channels lists the classic and the sharded channels matching pattern subscribed on n.
func (n Node) Channels(t testing.TB, pattern string) (classic, sharded []string) {
	t.Helper()
	classic, err := n.Do(t, "PUBSUB", "CHANNELS", pattern).AsStrSlice()
	require.NoError(t, err)
	sharded, err = n.Do(t, "PUBSUB", "SHARDCHANNELS", pattern).AsStrSlice()
	require.NoError(t, err)
	return classic, sharded
}

// PID is the process id of the server n.
func (n Node) PID(t testing.TB) int {
	t.Helper()
	info, err := n.Info("server")
	require.NoError(t, err)
	pid, err := strconv.Atoi(info["process_id"])
	require.NoError(t, err)
	return pid
}
