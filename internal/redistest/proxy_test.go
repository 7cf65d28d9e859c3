package redistest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var bg = context.Background()

// command returns a matcher for commands named name (case-insensitive) whose arguments include
// arg.
func command(name, arg string) func(cmd []string) bool {
	return func(cmd []string) bool {
		return len(cmd) > 0 && strings.EqualFold(cmd[0], name) && slices.Contains(cmd[1:], arg)
	}
}

// TestProxy checks the proxy's forwarding and each fault it injects, against Redis.
func TestProxy(t *testing.T) {
	// setup returns an env, a proxy to its server, a rueidis client through the proxy, and
	// key(name), a key under the env's prefix that is deleted when the test ends.
	setup := func(t *testing.T) (*Env, *Proxy, rueidis.Client, func(string) string) {
		e := NewEnv(t)
		p := NewProxy(t, e.Dep.Data...)
		rc := e.Through(p).Rueidis()
		var keys []string
		t.Cleanup(func() {
			if len(keys) > 0 {
				require.NoError(t, e.Do(append([]string{"DEL"}, keys...)...).Error())
			}
		})
		return e, p, rc, func(name string) string {
			k := e.Prefix + ":{proxy}:" + name // one slot: a pipeline stays on one connection
			keys = append(keys, k)
			return k
		}
	}
	set := func(rc rueidis.Client, key, value string) error {
		return rc.Do(bg, rc.B().Set().Key(key).Value(value).Build()).Error()
	}
	get := func(e *Env, key string) (string, error) { // directly, not through the proxy
		return e.Do("GET", key).ToString()
	}

	t.Run("forwarding", func(t *testing.T) {
		e, p, rc, key := setup(t)
		k := key("plain")
		require.NoError(t, set(rc, k, "v1"))
		v, err := rc.Do(bg, rc.B().Get().Key(k).Build()).ToString()
		require.NoError(t, err)
		assert.Equal(t, "v1", v)

		// A pipeline with a large argument in it.
		big := strings.Repeat("x", 3<<20)
		kb := key("big")
		cmds := rueidis.Commands{rc.B().Set().Key(kb).Value(big).Build()}
		var ks []string
		for i := range 100 {
			ks = append(ks, key(fmt.Sprintf("pipe%d", i)))
			cmds = append(cmds, rc.B().Set().Key(ks[i]).Value(strconv.Itoa(i)).Build())
		}
		for _, r := range rc.DoMulti(bg, cmds...) {
			require.NoError(t, r.Error())
		}
		v, err = get(e, kb)
		require.NoError(t, err)
		assert.Equal(t, len(big), len(v))
		v, err = get(e, ks[99])
		require.NoError(t, err)
		assert.Equal(t, "99", v)

		// Raw clients: a request split across writes, an inline command, a pipelined pair.
		conn, err := net.Dial("tcp", p.Addr())
		require.NoError(t, err)
		defer conn.Close()
		br := bufio.NewReader(conn)
		reply := func() string {
			require.NoError(t, conn.SetReadDeadline(time.Now().Add(time.Second)))
			line, err := br.ReadString('\n')
			require.NoError(t, err)
			return line
		}
		_, err = conn.Write([]byte("*2\r\n$4\r\nECHO\r\n$5\r\nhe"))
		require.NoError(t, err)
		time.Sleep(20 * time.Millisecond)
		_, err = conn.Write([]byte("llo\r\n"))
		require.NoError(t, err)
		assert.Equal(t, "$5\r\n", reply())
		assert.Equal(t, "hello\r\n", reply())
		_, err = conn.Write([]byte("PING\r\n*1\r\n$4\r\nPING\r\nPING x\r\n"))
		require.NoError(t, err)
		assert.Equal(t, "+PONG\r\n", reply())
		assert.Equal(t, "+PONG\r\n", reply())
		assert.Equal(t, "$1\r\n", reply())
		assert.Equal(t, "x\r\n", reply())
		assert.EqualValues(t, 0, p.Fired())
	})

	t.Run("DropRequest", func(t *testing.T) {
		e, p, rc, key := setup(t)
		k, other := key("dropped"), key("other")
		p.DropRequest(command("SET", k))
		assert.True(t, p.Armed())
		require.NoError(t, set(rc, other, "v"), "a request that does not match goes through")
		assert.True(t, p.Armed())
		require.Error(t, set(rc, k, "v"))
		assert.EqualValues(t, 1, p.Fired())
		assert.False(t, p.Armed())
		n, err := e.Do("EXISTS", k).AsInt64()
		require.NoError(t, err)
		assert.Zero(t, n, "the server never ran the dropped request")

		require.NoError(t, set(rc, k, "v2"), "the client reconnects; fired faults do not fire again")
		v, err := get(e, k)
		require.NoError(t, err)
		assert.Equal(t, "v2", v)

		p.DropRequest(command("SET", k))
		p.Disarm()
		assert.False(t, p.Armed())
		require.NoError(t, set(rc, k, "v3"))
		assert.EqualValues(t, 1, p.Fired())
	})

	t.Run("DropReply", func(t *testing.T) {
		e, p, rc, key := setup(t)
		k := key("lost-reply")
		p.DropReply(command("set", k))
		start := time.Now()
		require.Error(t, set(rc, k, "v"))
		assert.Less(t, time.Since(start), ProxyNonceWait, "the nonce came back")
		assert.EqualValues(t, 1, p.Fired())
		assert.False(t, p.Armed())
		v, err := get(e, k)
		require.NoError(t, err, "the server ran the request whose reply was lost")
		assert.Equal(t, "v", v)
		require.NoError(t, set(rc, k, "v2"))
	})

	t.Run("HoldRequest", func(t *testing.T) {
		e, p, rc, key := setup(t)
		k := key("held-request")
		release := p.HoldRequest(command("SET", k))
		done := make(chan error, 1)
		go func() { done <- set(rc, k, "v") }()
		require.Eventually(t, func() bool { return p.Fired() == 1 }, time.Second, time.Millisecond)
		time.Sleep(50 * time.Millisecond)
		n, err := e.Do("EXISTS", k).AsInt64()
		require.NoError(t, err)
		assert.Zero(t, n, "the held request has not reached the server")
		other := e.Through(p).Rueidis()
		require.NoError(t, set(other, key("other"), "v"), "another connection flows")
		release()
		require.NoError(t, <-done)
		v, err := get(e, k)
		require.NoError(t, err)
		assert.Equal(t, "v", v)
		release() // again: nothing
	})

	t.Run("HoldReply", func(t *testing.T) {
		e, p, rc, key := setup(t)
		k := key("held-reply")
		release := p.HoldReply(command("SET", k))
		done := make(chan error, 1)
		go func() { done <- set(rc, k, "v") }()
		require.Eventually(t, func() bool {
			v, err := get(e, k)
			return err == nil && v == "v"
		}, time.Second, time.Millisecond, "the server ran the request")
		time.Sleep(50 * time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("the reply was not held: %v", err)
		default:
		}
		other := e.Through(p).Rueidis()
		require.NoError(t, set(other, key("other"), "v"), "another connection flows")
		release()
		require.NoError(t, <-done)
		assert.EqualValues(t, 1, p.Fired())
	})

	t.Run("DropReplyThenOutage", func(t *testing.T) {
		e, p, rc, key := setup(t)
		k := key("lost-reply-outage")
		const d = 300 * time.Millisecond
		p.DropReplyThenOutage(command("SET", k), d)
		start := time.Now()
		require.Error(t, set(rc, k, "v"))
		v, err := get(e, k)
		require.NoError(t, err, "the server ran the request whose reply was lost")
		assert.Equal(t, "v", v)
		require.Error(t, set(rc, k, "v2"), "the outage began before the client learned of the loss")
		for set(rc, k, "v3") != nil {
			require.Less(t, time.Since(start), d+2*time.Second, "commands work again after the outage")
			time.Sleep(20 * time.Millisecond)
		}
		assert.GreaterOrEqual(t, time.Since(start), d)
		assert.EqualValues(t, 1, p.Fired())
	})

	t.Run("pipelined", func(t *testing.T) {
		e, p, rc, key := setup(t)
		exists := func(k string) bool {
			n, err := e.Do("EXISTS", k).AsInt64()
			require.NoError(t, err)
			return n == 1
		}
		pipeline := func(ks ...string) {
			var cmds rueidis.Commands
			for _, k := range ks {
				cmds = append(cmds, rc.B().Set().Key(k).Value("v").Build())
			}
			rs := rc.DoMulti(bg, cmds...)
			require.Error(t, rs[1].Error())
			require.Error(t, rs[2].Error())
		}

		before, k, after := key("req-before"), key("req-dropped"), key("req-after")
		p.DropRequest(command("SET", k))
		pipeline(before, k, after)
		assert.True(t, exists(before), "the request before the dropped one was forwarded")
		assert.False(t, exists(k))
		assert.False(t, exists(after))

		before, k, after = key("reply-before"), key("reply-dropped"), key("reply-after")
		p.DropReply(command("SET", k))
		pipeline(before, k, after)
		assert.True(t, exists(before))
		assert.True(t, exists(k))
		assert.False(t, exists(after), "nothing after the request whose reply is lost is forwarded")
		assert.EqualValues(t, 2, p.Fired())
	})

	t.Run("one connection claims a fault", func(t *testing.T) {
		e, p, _, key := setup(t)
		k := key("claimed")
		clients := make([]rueidis.Client, 4)
		for i := range clients {
			clients[i] = e.Through(p).Rueidis()
			require.NoError(t, clients[i].Do(bg, clients[i].B().Ping().Build()).Error())
		}
		p.DropReply(command("SET", k))
		errs := make(chan error, len(clients))
		var wg sync.WaitGroup
		for _, rc := range clients {
			wg.Go(func() { errs <- set(rc, k, "v") })
		}
		wg.Wait()
		close(errs)
		failed := 0
		for err := range errs {
			if err != nil {
				failed++
			}
		}
		assert.Equal(t, 1, failed)
		assert.EqualValues(t, 1, p.Fired())
	})

	t.Run("Outage", func(t *testing.T) {
		_, p, rc, key := setup(t)
		k := key("outage")
		require.NoError(t, set(rc, k, "v"))
		const d = 300 * time.Millisecond
		start := time.Now()
		p.Outage(d)
		require.Error(t, set(rc, k, "v"), "the open connection was cut")
		require.Error(t, set(rc, k, "v"), "new connections are refused")
		deadline := start.Add(d + 2*time.Second)
		for set(rc, k, "v") != nil {
			require.True(t, time.Now().Before(deadline), "commands work again after the outage")
			time.Sleep(20 * time.Millisecond)
		}
		assert.GreaterOrEqual(t, time.Since(start), d)
		assert.EqualValues(t, 0, p.Fired())
	})

	t.Run("CutAll", func(t *testing.T) {
		_, p, rc, key := setup(t)
		k := key("cut")
		require.NoError(t, set(rc, k, "v"))
		conn, err := net.Dial("tcp", p.Addr())
		require.NoError(t, err)
		defer conn.Close()
		_, err = conn.Write([]byte("PING\r\n"))
		require.NoError(t, err)
		br := bufio.NewReader(conn)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(time.Second)))
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "+PONG\r\n", line)

		p.CutAll()
		_, err = br.ReadString('\n')
		require.ErrorIs(t, err, io.EOF, "the connection was closed")
		// rueidis notices the cut on its own or on its next write; either way it reconnects.
		deadline := time.Now().Add(2 * time.Second)
		for set(rc, k, "v2") != nil {
			require.True(t, time.Now().Before(deadline), "the client reconnects")
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// TestProxy_dropPush: DropPush loses the first matching message on its channel and nothing else
// (other channels, other payloads, the replies around it), then lets everything through.
func TestProxy_dropPush(t *testing.T) {
	e := NewEnv(t)
	p := NewProxy(t, e.Dep.Data...)
	rc := e.Through(p).Rueidis()
	ch, other := e.Prefix+":{push}:ch", e.Prefix+":{push}:other"
	got := make(chan string, 16)
	ctx, cancel := context.WithCancel(bg)
	t.Cleanup(cancel)
	sub := func(c string) rueidis.Completed {
		if e.Dep.Topology == "cluster" {
			return rc.B().Ssubscribe().Channel(c).Build()
		}
		return rc.B().Subscribe().Channel(c).Build()
	}
	for _, c := range []string{ch, other} {
		go func() {
			_ = rc.Receive(ctx, sub(c), func(m rueidis.PubSubMessage) { got <- m.Channel + " " + m.Message })
		}()
	}
	publish := func(c, msg string) {
		if e.Dep.Topology == "cluster" {
			require.NoError(t, e.Do("SPUBLISH", c, msg).Error())
		} else {
			require.NoError(t, e.Do("PUBLISH", c, msg).Error())
		}
	}
	require.Eventually(t, func() bool { return len(e.Channels()) == 2 }, 5*time.Second, 5*time.Millisecond)
	p.DropPush(ch, "@")
	for _, m := range [][2]string{{other, "@1"}, {ch, "x2"}, {ch, "@3"}, {ch, "@4"}} {
		publish(m[0], m[1])
	}
	var all []string
	for range 3 {
		select {
		case m := <-got:
			all = append(all, m)
		case <-time.After(5 * time.Second):
			t.Fatalf("got %q only", all)
		}
	}
	slices.Sort(all)
	assert.Equal(t, []string{ch + " @4", ch + " x2", other + " @1"}, all, "@3 lost, nothing else")
	assert.Equal(t, int64(1), p.Fired())
	require.NoError(t, rc.Do(bg, rc.B().Ping().Build()).Error(), "the connection still serves")
	cancel()
	for _, c := range []string{ch, other} {
		if e.Dep.Topology == "cluster" {
			require.NoError(t, rc.Do(bg, rc.B().Sunsubscribe().Channel(c).Build()).Error())
		} else {
			require.NoError(t, rc.Do(bg, rc.B().Unsubscribe().Channel(c).Build()).Error())
		}
	}
}
