package rlock_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// proxyNonceWait bounds how long DropReply waits for its ECHO nonce before cutting anyway.
const proxyNonceWait = 2 * time.Second

// faultKind says what an armed fault does to the request it matches.
type faultKind int

const (
	faultDropRequest faultKind = iota // cut before forwarding the request
	faultDropReply                    // forward the request, lose its reply, then cut
)

// armedFault is one armed DropRequest or DropReply; a connection claims it by swapping it out.
type armedFault struct {
	kind   faultKind
	match  func(cmd []string) bool
	outage time.Duration // DropReplyThenOutage: the outage that starts as the reply is lost
}

// faultProxy is a TCP proxy in front of Redis servers (one listener per server) that injects
// real network faults; its faults apply to the connections of all of them.
type faultProxy struct {
	lns   []net.Listener
	route map[string]string // server address -> the address of its listener
	wg    sync.WaitGroup
	done  chan struct{} // closed when the test ends

	fault atomic.Pointer[armedFault]
	fired atomic.Int64

	mu          sync.Mutex
	closed      bool
	conns       map[*proxyConn]struct{}
	outageUntil time.Time
	held        chan struct{} // HoldReplies: closed when the server's bytes may flow again
}

// newFaultProxy starts a proxy to each of targets on 127.0.0.1:0; when the test ends it
// closes the listeners and every connection and waits for all its goroutines.
func newFaultProxy(t testing.TB, targets ...string) *faultProxy {
	t.Helper()
	p := &faultProxy{route: map[string]string{}, done: make(chan struct{}), conns: map[*proxyConn]struct{}{}}
	t.Cleanup(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		close(p.done)
		for _, ln := range p.lns {
			ln.Close()
		}
		p.CutAll()
		p.wg.Wait()
	})
	for _, target := range targets {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		p.lns = append(p.lns, ln)
		p.route[target] = ln.Addr().String()
		p.wg.Add(1)
		go p.accept(ln, target)
	}
	return p
}

// Addr is the listening address of the proxy's first target.
func (p *faultProxy) Addr() string { return p.lns[0].Addr().String() }

// dial is a rueidis DialCtxFn: it connects to a target's listener instead of the target, and
// to any other address (a sentinel) directly.
func (p *faultProxy) dial(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
	if l, ok := p.route[addr]; ok {
		addr = l
	}
	return d.DialContext(ctx, "tcp", addr)
}

// DropRequest arms the proxy: the next request that match accepts is not forwarded, and its
// connection is cut at once (both sides); earlier requests on it were forwarded normally.
func (p *faultProxy) DropRequest(match func(cmd []string) bool) {
	p.fault.Store(&armedFault{kind: faultDropRequest, match: match})
}

// DropReply arms the proxy: the next request that match accepts is forwarded, nothing more
// reaches that client, and once the server has run it (an injected ECHO of a nonce comes
// back, or proxyNonceWait passes) the connection is cut (both sides).
func (p *faultProxy) DropReply(match func(cmd []string) bool) {
	p.fault.Store(&armedFault{kind: faultDropReply, match: match})
}

// DropReplyThenOutage is DropReply, and an Outage of d that starts once the server has run
// the request, before its connection is cut: the client's first retry finds no server.
func (p *faultProxy) DropReplyThenOutage(match func(cmd []string) bool, d time.Duration) {
	p.fault.Store(&armedFault{kind: faultDropReply, match: match, outage: d})
}

// Outage cuts every open connection now and, for d, closes each new connection (with a
// reset) right after accepting it. It does not block.
func (p *faultProxy) Outage(d time.Duration) {
	p.mu.Lock()
	p.outageUntil = time.Now().Add(d)
	p.mu.Unlock()
	p.CutAll()
}

// HoldReplies holds back the server's bytes to every client (replies and pub/sub messages, in
// their order per connection) until the returned function is called; requests still reach the
// server. It stands for a slow receive path: a GC pause, a congested link.
func (p *faultProxy) HoldReplies() (flow func()) {
	ch := make(chan struct{})
	p.mu.Lock()
	p.held = ch
	p.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			p.held = nil
			p.mu.Unlock()
			close(ch)
		})
	}
}

// holding returns the channel HoldReplies closes when bytes may flow, or nil.
func (p *faultProxy) holding() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// CutAll closes every open connection now (both sides).
func (p *faultProxy) CutAll() {
	p.mu.Lock()
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// Fired returns how many armed faults have fired so far.
func (p *faultProxy) Fired() int64 { return p.fired.Load() }

// Armed reports whether a DropRequest or DropReply is armed and has not fired yet.
func (p *faultProxy) Armed() bool { return p.fault.Load() != nil }

// thenCall returns match that also calls f, synchronously, whenever it matches: before the
// proxy forwards or drops the request, so before the client can learn of the fault.
func thenCall(match func(cmd []string) bool, f func()) func(cmd []string) bool {
	return func(cmd []string) bool {
		if !match(cmd) {
			return false
		}
		f()
		return true
	}
}

// Disarm clears any armed fault.
func (p *faultProxy) Disarm() { p.fault.Store(nil) }

// claim returns the armed fault if cmd matches it and this call is the one that takes it.
func (p *faultProxy) claim(cmd []string) *armedFault {
	for {
		f := p.fault.Load()
		if f == nil || !f.match(cmd) {
			return nil
		}
		if p.fault.CompareAndSwap(f, nil) {
			p.fired.Add(1)
			return f
		}
	}
}

// accept serves new connections to target until ln closes.
func (p *faultProxy) accept(ln net.Listener, target string) {
	defer p.wg.Done()
	for {
		client, err := ln.Accept()
		if err != nil {
			return
		}
		refuse := func() {
			if tc, ok := client.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // reset rather than a clean close
			}
			client.Close()
		}
		p.mu.Lock()
		refusing := p.closed || time.Now().Before(p.outageUntil)
		p.mu.Unlock()
		if refusing {
			refuse()
			continue
		}
		server, err := net.DialTimeout("tcp", target, time.Second)
		if err != nil {
			client.Close()
			continue
		}
		c := &proxyConn{p: p, client: client, server: server, found: make(chan struct{}), serverDone: make(chan struct{})}
		p.mu.Lock()
		// Again: an Outage that began while this connection was being set up has cut the
		// others already (a client that reconnects at once would otherwise slip through).
		if p.closed || time.Now().Before(p.outageUntil) {
			p.mu.Unlock()
			refuse()
			server.Close()
			continue
		}
		p.conns[c] = struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go c.clientToServer()
		go c.serverToClient()
	}
}

// proxyConn is one proxied client connection and its server connection.
type proxyConn struct {
	p              *faultProxy
	client, server net.Conn
	closeOnce      sync.Once

	nonce      []byte        // set before dropping becomes true
	dropping   atomic.Bool   // DropReply fired: server bytes are no longer forwarded
	found      chan struct{} // closed when the nonce came back from the server
	serverDone chan struct{} // closed when serverToClient returns
}

// close closes both sides and forgets the connection.
func (c *proxyConn) close() {
	c.closeOnce.Do(func() {
		c.client.Close()
		c.server.Close()
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
	})
}

// flushingReader reads from the client, first flushing the requests buffered for the server,
// so a request is never held back while the proxy waits for more bytes.
type flushingReader struct {
	conn net.Conn
	w    *bufio.Writer
}

// Read flushes the buffered requests, then reads from the client.
func (r *flushingReader) Read(b []byte) (int, error) {
	if r.w.Buffered() > 0 {
		if err := r.w.Flush(); err != nil {
			return 0, err
		}
	}
	return r.conn.Read(b)
}

// clientToServer forwards the client's requests one by one, applying an armed fault.
func (c *proxyConn) clientToServer() {
	defer c.p.wg.Done()
	w := bufio.NewWriterSize(c.server, 64<<10)
	r := bufio.NewReaderSize(&flushingReader{conn: c.client, w: w}, 64<<10)
	for {
		cmd, raw, err := readRequest(r)
		if err != nil {
			if errors.Is(err, errBadRequest) {
				// Not RESP we understand: pass the rest through untouched, and let Redis judge.
				if _, err := w.Write(raw); err == nil && w.Flush() == nil {
					_, _ = io.Copy(c.server, r)
				}
			} else if errors.Is(err, io.EOF) && len(raw) == 0 && w.Flush() == nil {
				// The client is done: let the server finish; serverToClient closes both.
				if tc, ok := c.server.(*net.TCPConn); ok && tc.CloseWrite() == nil {
					return
				}
			}
			c.close()
			return
		}
		var f *armedFault
		if len(cmd) > 0 {
			f = c.p.claim(cmd)
		}
		if f == nil {
			if _, err := w.Write(raw); err != nil {
				c.close()
				return
			}
			continue
		}
		if f.kind == faultDropRequest {
			_ = w.Flush() // the requests before it go through
			c.close()
			return
		}
		c.dropReply(w, raw, f.outage)
		return
	}
}

// dropReply forwards the matched request raw and an ECHO of a nonce after it, forwards nothing
// more to the client, waits for the nonce to come back (the server has run the request),
// starts an outage if one is asked for, and closes both sides.
func (c *proxyConn) dropReply(w *bufio.Writer, raw []byte, outage time.Duration) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	c.nonce = []byte("rlock-proxy-" + hex.EncodeToString(b[:]))
	c.dropping.Store(true)
	_, _ = w.Write(raw)
	_, _ = fmt.Fprintf(w, "*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n", len(c.nonce), c.nonce)
	if w.Flush() == nil {
		timer := time.NewTimer(proxyNonceWait)
		select {
		case <-c.found:
		case <-c.serverDone:
		case <-c.p.done:
		case <-timer.C:
		}
		timer.Stop()
	}
	if outage > 0 {
		c.p.Outage(outage)
	}
	c.close()
}

// serverToClient copies the server's bytes to the client until DropReply fires; then it
// discards them, watching for the nonce.
func (c *proxyConn) serverToClient() {
	defer c.p.wg.Done()
	defer close(c.serverDone)
	defer c.close()
	buf := make([]byte, 64<<10)
	var seen []byte // the tail of the dropped bytes, where a nonce split across reads starts
	for {
		n, err := c.server.Read(buf)
		if n > 0 {
			if c.dropping.Load() {
				seen = append(seen, buf[:n]...)
				if bytes.Contains(seen, c.nonce) {
					close(c.found)
					_, _ = io.Copy(io.Discard, c.server) // until dropReply closes both sides
					return
				}
				if keep := len(c.nonce) - 1; len(seen) > keep {
					seen = append(seen[:0], seen[len(seen)-keep:]...)
				}
			} else {
				if held := c.p.holding(); held != nil {
					select {
					case <-held:
					case <-c.p.done:
						return
					}
				}
				if _, werr := c.client.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// errBadRequest marks client bytes that are not a RESP request.
var errBadRequest = errors.New("faultProxy: malformed request")

// maxBulk bounds one request argument (Redis's default proto-max-bulk-len).
const maxBulk = 512 << 20

// readRequest reads one request: a RESP array of bulk strings, or an inline command (a line
// split on spaces). It returns its arguments and its raw bytes; on errBadRequest raw holds
// the bytes consumed. A blank inline line yields no arguments.
func readRequest(r *bufio.Reader) (cmd []string, raw []byte, err error) {
	line, raw, err := readLine(r, nil)
	if err != nil {
		return nil, raw, err
	}
	if len(line) == 0 || line[0] != '*' {
		return strings.Fields(string(line)), raw, nil
	}
	n, err := strconv.Atoi(string(line[1:]))
	if err != nil || n > 1<<30 {
		return nil, raw, errBadRequest
	}
	cmd = make([]string, 0, min(max(n, 0), 1024))
	for range n {
		line, raw, err = readLine(r, raw)
		if err != nil {
			return nil, raw, err
		}
		if len(line) == 0 || line[0] != '$' {
			return nil, raw, errBadRequest
		}
		size, err := strconv.Atoi(string(line[1:]))
		if err != nil || size < 0 || size > maxBulk {
			return nil, raw, errBadRequest
		}
		start := len(raw)
		raw = slices.Grow(raw, size+2)[:start+size+2]
		if _, err := io.ReadFull(r, raw[start:]); err != nil {
			return nil, raw[:start], unexpected(err)
		}
		if raw[len(raw)-2] != '\r' || raw[len(raw)-1] != '\n' {
			return nil, raw, errBadRequest
		}
		cmd = append(cmd, string(raw[start:start+size]))
	}
	return cmd, raw, nil
}

// readLine appends one \n-terminated line to raw and returns it without its \r\n.
func readLine(r *bufio.Reader, raw []byte) (line, rawOut []byte, err error) {
	start := len(raw)
	for {
		chunk, err := r.ReadSlice('\n')
		raw = append(raw, chunk...)
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if start > 0 || len(raw) > 0 {
				err = unexpected(err)
			}
			return nil, raw, err
		}
		if len(raw)-start > 1<<20 {
			return nil, raw, errBadRequest
		}
	}
	line = bytes.TrimSuffix(raw[start:len(raw)-1], []byte("\r"))
	return line, raw, nil
}

// unexpected turns an EOF inside a request into io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// scriptSource returns the source the library runs for lua/<file>, preludes included.
func scriptSource(file string) []byte {
	src := rlock.ScriptSource(file)
	if src == "" {
		panic("scriptSource: no script " + file)
	}
	return []byte(src)
}

// matchScript returns a matcher for EVALSHA, EVALSHA_RO, EVAL or EVAL_RO of the script in
// lua/<file> (as the library runs it, in either pub/sub variant: see scriptSource) whose KEYS
// include key ("" for any keys). It panics if the file cannot be read.
func matchScript(file, key string) func(cmd []string) bool {
	src := scriptSource(file)
	sums := [][20]byte{sha1.Sum(src), sha1.Sum([]byte(rlock.ShardedScriptSource(file)))}
	return func(cmd []string) bool {
		if len(cmd) < 3 {
			return false
		}
		var sum [20]byte
		switch strings.ToUpper(cmd[0]) {
		case "EVALSHA", "EVALSHA_RO":
			if _, err := hex.Decode(sum[:], []byte(cmd[1])); err != nil {
				return false
			}
		case "EVAL", "EVAL_RO":
			sum = sha1.Sum([]byte(cmd[1]))
		default:
			return false
		}
		if !slices.Contains(sums, sum) {
			return false
		}
		if key == "" {
			return true
		}
		n, err := strconv.Atoi(cmd[2])
		if err != nil || n < 0 || 3+n > len(cmd) {
			return false
		}
		return slices.Contains(cmd[3:3+n], key)
	}
}

// matchCommand returns a matcher for commands named name (case-insensitive) whose arguments
// include arg ("" for any).
func matchCommand(name, arg string) func(cmd []string) bool {
	return func(cmd []string) bool {
		return len(cmd) > 0 && strings.EqualFold(cmd[0], name) && (arg == "" || slices.Contains(cmd[1:], arg))
	}
}

// TestFaultProxy checks the proxy's forwarding and each fault it injects, against Redis.
func TestFaultProxy(t *testing.T) {
	// setup returns an env, a proxy to its server, a rueidis client through the proxy, and
	// key(name), a key under the env's prefix that is deleted when the test ends.
	setup := func(t *testing.T) (*env, *faultProxy, rueidis.Client, func(string) string) {
		e := newEnv(t)
		p := e.newProxy()
		rc := e.through(p).rueidis()
		var keys []string
		t.Cleanup(func() {
			if len(keys) > 0 {
				require.NoError(t, e.do(append([]string{"DEL"}, keys...)...).Error())
			}
		})
		return e, p, rc, func(name string) string {
			k := e.prefix + ":{proxy}:" + name // one slot: a pipeline stays on one connection
			keys = append(keys, k)
			return k
		}
	}
	set := func(rc rueidis.Client, key, value string) error {
		return rc.Do(bg, rc.B().Set().Key(key).Value(value).Build()).Error()
	}
	get := func(e *env, key string) (string, error) { // directly, not through the proxy
		return e.do("GET", key).ToString()
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
		p.DropRequest(matchCommand("SET", k))
		assert.True(t, p.Armed())
		require.NoError(t, set(rc, other, "v"), "a request that does not match goes through")
		assert.True(t, p.Armed())
		require.Error(t, set(rc, k, "v"))
		assert.EqualValues(t, 1, p.Fired())
		assert.False(t, p.Armed())
		n, err := e.do("EXISTS", k).AsInt64()
		require.NoError(t, err)
		assert.Zero(t, n, "the server never ran the dropped request")

		require.NoError(t, set(rc, k, "v2"), "the client reconnects; fired faults do not fire again")
		v, err := get(e, k)
		require.NoError(t, err)
		assert.Equal(t, "v2", v)

		p.DropRequest(matchCommand("SET", k))
		p.Disarm()
		assert.False(t, p.Armed())
		require.NoError(t, set(rc, k, "v3"))
		assert.EqualValues(t, 1, p.Fired())
	})

	t.Run("DropReply", func(t *testing.T) {
		e, p, rc, key := setup(t)
		k := key("lost-reply")
		p.DropReply(matchCommand("set", k))
		start := time.Now()
		require.Error(t, set(rc, k, "v"))
		assert.Less(t, time.Since(start), proxyNonceWait, "the nonce came back")
		assert.EqualValues(t, 1, p.Fired())
		assert.False(t, p.Armed())
		v, err := get(e, k)
		require.NoError(t, err, "the server ran the request whose reply was lost")
		assert.Equal(t, "v", v)
		require.NoError(t, set(rc, k, "v2"))
	})

	t.Run("DropReplyThenOutage", func(t *testing.T) {
		e, p, rc, key := setup(t)
		k := key("lost-reply-outage")
		const d = 300 * time.Millisecond
		p.DropReplyThenOutage(matchCommand("SET", k), d)
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
			n, err := e.do("EXISTS", k).AsInt64()
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
		p.DropRequest(matchCommand("SET", k))
		pipeline(before, k, after)
		assert.True(t, exists(before), "the request before the dropped one was forwarded")
		assert.False(t, exists(k))
		assert.False(t, exists(after))

		before, k, after = key("reply-before"), key("reply-dropped"), key("reply-after")
		p.DropReply(matchCommand("SET", k))
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
			clients[i] = e.through(p).rueidis()
			require.NoError(t, clients[i].Do(bg, clients[i].B().Ping().Build()).Error())
		}
		p.DropReply(matchCommand("SET", k))
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

	t.Run("matchScript", func(t *testing.T) {
		_, p, rc, key := setup(t)
		src := scriptSource("inspect.lua")
		script := rueidis.NewLuaScript(string(src))
		sum := sha1.Sum(src)
		sha := hex.EncodeToString(sum[:])
		k, other := key("script"), key("script-other")

		p.DropReply(matchScript("inspect.lua", k))
		res, err := script.Exec(bg, rc, []string{other}, []string{""}).ToArray()
		require.NoError(t, err, "other keys do not match")
		assert.Len(t, res, 3)
		assert.True(t, p.Armed())
		require.Error(t, script.Exec(bg, rc, []string{k}, []string{""}).Error())
		assert.EqualValues(t, 1, p.Fired())
		assert.False(t, p.Armed())

		m := matchScript("inspect.lua", k)
		assert.True(t, m([]string{"evalsha", strings.ToUpper(sha), "1", k, ""}))
		assert.True(t, m([]string{"EVALSHA_RO", sha, "2", other, k}))
		assert.True(t, m([]string{"EVAL", string(src), "1", k, ""}))
		assert.False(t, m([]string{"EVAL", string(src) + " ", "1", k, ""}))
		assert.False(t, m([]string{"EVALSHA", sha, "1", other, k}), "k is an argument, not a key")
		assert.False(t, m([]string{"EVALSHA", sha, "3", k}), "malformed")
		assert.False(t, m([]string{"GET", k}))
		assert.True(t, matchScript("inspect.lua", "")([]string{"EVALSHA", sha, "0"}))
		assert.False(t, matchScript("acquire.lua", "")([]string{"EVALSHA", sha, "0"}))

		c := matchCommand("set", "")
		assert.True(t, c([]string{"SET", "a", "b"}))
		assert.False(t, c([]string{"GET", "a"}))
		assert.False(t, c(nil))
		assert.False(t, matchCommand("SET", "b")([]string{"SET", "a"}))
		assert.True(t, matchCommand("SET", "b")([]string{"SET", "a", "b"}))
	})
}
