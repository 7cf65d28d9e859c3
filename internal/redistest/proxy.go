package redistest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
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

	"github.com/stretchr/testify/require"
)

// ProxyNonceWait bounds how long DropReply waits for its ECHO nonce before cutting anyway.
const ProxyNonceWait = 2 * time.Second

// faultKind says what an armed fault does to the request it matches.
type faultKind int

const (
	faultDropRequest faultKind = iota // cut before forwarding the request
	faultDropReply                    // forward the request, lose its reply, then cut
	faultHoldRequest                  // forward the request, and what follows it, once released
	faultHoldReply                    // forward the request; its reply, and what follows, once released
)

// armedFault is one armed DropRequest or DropReply; a connection claims it by swapping it out.
type armedFault struct {
	kind   faultKind
	match  func(cmd []string) bool
	outage time.Duration // DropReplyThenOutage: the outage that starts as the reply is lost
	hold   chan struct{} // HoldRequest, HoldReply: closed by the release function
}

// Proxy is a TCP proxy in front of Redis servers (one listener per server) that injects
// real network faults; its faults apply to the connections of all of them.
type Proxy struct {
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

	push atomic.Pointer[pushDrop] // DropPush: the message to lose, until one is lost
}

// pushDrop is an armed DropPush.
type pushDrop struct{ channel, prefix string }

// NewProxy starts a proxy to each of targets on 127.0.0.1:0; when the test ends it
// closes the listeners and every connection and waits for all its goroutines.
func NewProxy(t testing.TB, targets ...string) *Proxy {
	t.Helper()
	p := &Proxy{route: map[string]string{}, done: make(chan struct{}), conns: map[*proxyConn]struct{}{}}
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
func (p *Proxy) Addr() string { return p.lns[0].Addr().String() }

// Routes returns "target=listener" for each target, comma-separated: what another process
// needs to dial through the proxy (see DialRoutes).
func (p *Proxy) Routes() string {
	var parts []string
	for target, l := range p.route {
		parts = append(parts, target+"="+l)
	}
	return strings.Join(parts, ",")
}

// DialRoutes is a rueidis DialCtxFn that dials through a proxy of another process, whose
// Routes are routes: a target's listener instead of the target, any other address directly.
func DialRoutes(routes string) func(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
	m := make(map[string]string)
	for _, kv := range strings.Split(routes, ",") {
		if target, l, ok := strings.Cut(kv, "="); ok {
			m[target] = l
		}
	}
	return func(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
		if l, ok := m[addr]; ok {
			addr = l
		}
		return d.DialContext(ctx, "tcp", addr)
	}
}

// Dial is a rueidis DialCtxFn: it connects to a target's listener instead of the target, and
// to any other address (a sentinel) directly.
func (p *Proxy) Dial(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
	if l, ok := p.route[addr]; ok {
		addr = l
	}
	return d.DialContext(ctx, "tcp", addr)
}

// DropRequest arms the proxy: the next request that match accepts is not forwarded, and its
// connection is cut at once (both sides); earlier requests on it were forwarded normally.
func (p *Proxy) DropRequest(match func(cmd []string) bool) {
	p.fault.Store(&armedFault{kind: faultDropRequest, match: match})
}

// DropReply arms the proxy: the next request that match accepts is forwarded, nothing more
// reaches that client, and once the server has run it (an injected ECHO of a nonce comes
// back, or ProxyNonceWait passes) the connection is cut (both sides).
func (p *Proxy) DropReply(match func(cmd []string) bool) {
	p.fault.Store(&armedFault{kind: faultDropReply, match: match})
}

// DropReplyThenOutage is DropReply, and an Outage of d that starts once the server has run
// the request, before its connection is cut: the client's first retry finds no server.
func (p *Proxy) DropReplyThenOutage(match func(cmd []string) bool, d time.Duration) {
	p.fault.Store(&armedFault{kind: faultDropReply, match: match, outage: d})
}

// HoldRequest arms the proxy: the next request that match accepts, and every later one on its
// connection, reaches the server only once release is called (a request slow on its way);
// other connections flow. Calling release more than once, or before the fault fired, is fine.
func (p *Proxy) HoldRequest(match func(cmd []string) bool) (release func()) {
	return p.armHold(faultHoldRequest, match)
}

// HoldReply arms the proxy: the next request that match accepts is forwarded, but the server's
// bytes on its connection from then on (its reply, and what follows) reach the client only
// once release is called (a reply slow on its way); other connections flow.
func (p *Proxy) HoldReply(match func(cmd []string) bool) (release func()) {
	return p.armHold(faultHoldReply, match)
}

// armHold arms a fault of kind (HoldRequest or HoldReply) and returns its release function.
func (p *Proxy) armHold(kind faultKind, match func(cmd []string) bool) func() {
	f := &armedFault{kind: kind, match: match, hold: make(chan struct{})}
	p.fault.Store(f)
	var once sync.Once
	return func() { once.Do(func() { close(f.hold) }) }
}

// DropPush arms the proxy: the next pub/sub message (message or smessage) on channel whose
// payload starts with prefix is lost on its way to the client; the connection and everything
// else on it flow. A message split across two reads of the server's bytes is not dropped (the
// fault stays armed); Fired counts the one dropped.
func (p *Proxy) DropPush(channel, prefix string) {
	p.push.Store(&pushDrop{channel: channel, prefix: prefix})
}

// dropPush returns b without the message DropPush is armed for, if b holds all of it.
func (p *Proxy) dropPush(b []byte) []byte {
	d := p.push.Load()
	if d == nil {
		return b
	}
	marker := []byte("\r\n" + d.channel + "\r\n")
	for from := 0; ; {
		i := bytes.Index(b[from:], marker)
		if i < 0 {
			return b
		}
		at := from + i
		from = at + 1
		start, end, parts, ok := frameAround(b, at)
		if ok && (parts[0] == "message" || parts[0] == "smessage") && parts[1] == d.channel &&
			strings.HasPrefix(parts[2], d.prefix) && p.push.CompareAndSwap(d, nil) {
			p.fired.Add(1)
			return append(b[:start:start], b[end:]...)
		}
	}
}

// frameAround finds the array or push of 3 bulk strings in b that holds the byte at at: its
// start and end, and its strings.
func frameAround(b []byte, at int) (start, end int, parts []string, ok bool) {
	for start = at; start >= 0; start-- {
		if b[start] != '>' && b[start] != '*' || start > 0 && (start < 2 || b[start-2] != '\r' || b[start-1] != '\n') {
			continue
		}
		r := bufio.NewReader(bytes.NewReader(b[start:]))
		line, raw, err := readLine(r, nil)
		if err != nil || string(line[1:]) != "3" {
			continue
		}
		if parts, raw, err = readBulks(r, 3, raw); err == nil && start+len(raw) > at {
			return start, start + len(raw), parts, true
		}
	}
	return 0, 0, nil, false
}

// Outage cuts every open connection now and, for d, closes each new connection (with a
// reset) right after accepting it. It does not block.
func (p *Proxy) Outage(d time.Duration) {
	p.mu.Lock()
	p.outageUntil = time.Now().Add(d)
	p.mu.Unlock()
	p.CutAll()
}

// HoldReplies holds back the server's bytes to every client (replies and pub/sub messages, in
// their order per connection) until the returned function is called; requests still reach the
// server. It stands for a slow receive path: a GC pause, a congested link.
func (p *Proxy) HoldReplies() (flow func()) {
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
func (p *Proxy) holding() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// CutAll closes every open connection now (both sides).
func (p *Proxy) CutAll() {
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
func (p *Proxy) Fired() int64 { return p.fired.Load() }

// Armed reports whether a DropRequest or DropReply is armed and has not fired yet.
func (p *Proxy) Armed() bool { return p.fault.Load() != nil }

// ThenCall returns match that also calls f, synchronously, whenever it matches: before the
// proxy forwards or drops the request, so before the client can learn of the fault.
func ThenCall(match func(cmd []string) bool, f func()) func(cmd []string) bool {
	return func(cmd []string) bool {
		if !match(cmd) {
			return false
		}
		f()
		return true
	}
}

// Disarm clears any armed fault.
func (p *Proxy) Disarm() { p.fault.Store(nil) }

// claim returns the armed fault if cmd matches it and this call is the one that takes it.
func (p *Proxy) claim(cmd []string) *armedFault {
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
func (p *Proxy) accept(ln net.Listener, target string) {
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
	p              *Proxy
	client, server net.Conn
	closeOnce      sync.Once

	nonce      []byte                        // set before dropping becomes true
	dropping   atomic.Bool                   // DropReply fired: server bytes are no longer forwarded
	replyHold  atomic.Pointer[chan struct{}] // HoldReply fired: server bytes wait for it to close
	found      chan struct{}                 // closed when the nonce came back from the server
	serverDone chan struct{}                 // closed when serverToClient returns
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
		switch f.kind {
		case faultDropRequest:
			_ = w.Flush() // the requests before it go through
			c.close()
			return
		case faultHoldRequest:
			if w.Flush() != nil { // the requests before it go through
				c.close()
				return
			}
			select {
			case <-f.hold:
			case <-c.p.done:
				return
			case <-c.serverDone:
				return
			}
		case faultHoldReply:
			c.replyHold.Store(&f.hold)
		case faultDropReply:
			c.dropReply(w, raw, f.outage)
			return
		}
		if _, err := w.Write(raw); err != nil {
			c.close()
			return
		}
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
		timer := time.NewTimer(ProxyNonceWait)
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
				if held := c.replyHold.Load(); held != nil {
					select {
					case <-*held:
					case <-c.p.done:
						return
					}
				}
				if _, werr := c.client.Write(c.p.dropPush(buf[:n])); werr != nil {
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
var errBadRequest = errors.New("redistest.Proxy: malformed request")

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
	return readBulks(r, n, raw)
}

// readBulks reads n bulk strings from r, appending their bytes to raw (see readRequest).
func readBulks(r *bufio.Reader, n int, raw []byte) (parts []string, rawOut []byte, err error) {
	parts = make([]string, 0, min(max(n, 0), 1024))
	for range n {
		var line []byte
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
		parts = append(parts, string(raw[start:start+size]))
	}
	return parts, raw, nil
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
