package wire

// The package's harness for tests that run the scripts against Redis: TestMain
// (redistest.Main) and lab, a redistest.Env in which a test calls the scripts directly with
// made-up owners and request ids and reads their keys.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m, nil) }

// lab is one test's namespace on the suite's deployment, where it runs scripts directly.
type lab struct {
	*redistest.Env
	t       *testing.T
	rc      rueidis.Client
	sharded bool // the scripts publish with SPUBLISH (a cluster's variant)
}

func newLab(t *testing.T) *lab {
	e := redistest.NewEnv(t)
	return &lab{Env: e, t: t, rc: e.Rueidis(), sharded: e.Dep.Topology == "cluster"}
}

// keys returns the keys of the lock called name in l.
func (l *lab) keys(name string) Keys { return NewKeys(l.Prefix, name) }

// exec runs s with keys and args.
func (l *lab) exec(s Script, keys, args []string) rueidis.RedisResult {
	return s.For(l.sharded).Exec(context.Background(), l.rc, keys, args)
}

// ints runs s and returns its integer array reply.
func (l *lab) ints(s Script, keys, args []string) []int64 {
	l.t.Helper()
	r, err := s.Ints(l.exec(s, keys, args))
	require.NoError(l.t, err)
	return r
}

// calls runs s with its body in a function whose redis.call counts, and returns how many
// calls the run made (what the script costs Redis beyond its EVALSHA); the run's effects are
// the script's own.
func (l *lab) calls(s Script, keys, args []string) int64 {
	l.t.Helper()
	src := strings.ReplaceAll(s.For(l.sharded).Source(), "redis.call(", "counted(")
	src = "local calls = 0\nlocal function counted(...)\n  calls = calls + 1\n  return redis.call(...)\nend\n" +
		"local function body()\n" + src + "\nend\nbody()\nreturn calls\n"
	n, err := l.rc.Do(context.Background(), l.rc.B().Eval().Script(src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()).AsInt64()
	require.NoError(l.t, err)
	return n
}

// do runs a raw command on l's deployment (see redistest.Env.Do).
func (l *lab) do(args ...string) rueidis.RedisResult {
	l.t.Helper()
	return l.Do(args...)
}

// str returns a string reply of a raw command, "" for nil.
func (l *lab) str(args ...string) string {
	l.t.Helper()
	s, err := l.do(args...).ToString()
	if rueidis.IsRedisNil(err) {
		return ""
	}
	require.NoError(l.t, err)
	return s
}

// int returns an integer reply of a raw command.
func (l *lab) int(args ...string) int64 {
	l.t.Helper()
	n, err := l.do(args...).AsInt64()
	require.NoError(l.t, err)
	return n
}

// hash returns the fields of hash key.
func (l *lab) hash(key string) map[string]string {
	l.t.Helper()
	m, err := l.do("HGETALL", key).AsStrMap()
	require.NoError(l.t, err)
	return m
}

// list returns list key.
func (l *lab) list(key string) []string {
	l.t.Helper()
	v, err := l.do("LRANGE", key, "0", "-1").AsStrSlice()
	require.NoError(l.t, err)
	return v
}

// serverMs is the server's clock in milliseconds.
func (l *lab) serverMs() int64 {
	l.t.Helper()
	v, err := l.do("TIME").AsStrSlice()
	require.NoError(l.t, err)
	var sec, usec int64
	for _, c := range v[0] {
		sec = sec*10 + int64(c-'0')
	}
	for _, c := range v[1] {
		usec = usec*10 + int64(c-'0')
	}
	return sec*1000 + usec/1000
}

// listen subscribes to channels (SSUBSCRIBE on a cluster) and returns what arrives on them, as
// "<channel> <message>"; it unsubscribes when the test ends.
func (l *lab) listen(channels ...string) <-chan string {
	l.t.Helper()
	ch := make(chan string, 64)
	ready := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		confirmed := 0
		hook := rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
			if s.Kind == "subscribe" || s.Kind == "ssubscribe" {
				if confirmed++; confirmed == len(channels) {
					close(ready)
				}
			}
		})
		sub := l.rc.B().Subscribe().Channel(channels...).Build()
		if l.sharded {
			sub = l.rc.B().Ssubscribe().Channel(channels...).Build()
		}
		_ = l.rc.Receive(hook, sub, func(m rueidis.PubSubMessage) { ch <- m.Channel + " " + m.Message })
	}()
	l.t.Cleanup(func() {
		cancel()
		<-done
		unsub := l.rc.B().Unsubscribe().Channel(channels...).Build()
		if l.sharded {
			unsub = l.rc.B().Sunsubscribe().Channel(channels...).Build()
		}
		l.rc.Do(context.Background(), unsub)
	})
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		l.t.Fatal("no subscription confirmed")
	}
	return ch
}

// expect fails t unless the next message on ch is want.
func expect(t *testing.T, ch <-chan string, want string) {
	t.Helper()
	select {
	case got := <-ch:
		require.Equal(t, want, got)
	case <-time.After(2 * time.Second):
		t.Fatalf("no message %q", want)
	}
}

// quiet fails t if a message arrives on ch within a short while.
func quiet(t *testing.T, ch <-chan string) {
	t.Helper()
	select {
	case got := <-ch:
		t.Fatalf("unexpected message %q", got)
	case <-time.After(50 * time.Millisecond):
	}
}
