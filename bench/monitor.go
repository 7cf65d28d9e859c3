package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// A monitor counts the commands Redis executes between two marker ECHOs,
// split into commands sent by clients and commands run inside scripts.
// INFO commandstats cannot tell these apart (a script's redis.call counts as
// a call of that command), MONITOR can: it tags script calls "[db lua]".
type monitor struct {
	conn   net.Conn
	marker string
	done   chan struct{}

	mu     sync.Mutex
	counts monitorCounts
	err    error
}

// monitorCounts is what a monitor saw between its markers.
type monitorCounts struct {
	Client map[string]int64 // sent by clients, per command
	Script map[string]int64 // run inside scripts, per command
}

func (m monitorCounts) clientTotal() int64 {
	var n int64
	for _, v := range m.Client {
		n += v
	}
	return n
}

// startMonitor opens a MONITOR connection to the node at addr. Counting starts at the first
// ECHO of marker and ends at the second.
func startMonitor(ctx context.Context, addr, marker string) (*monitor, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	m := &monitor{conn: conn, marker: marker, done: make(chan struct{}),
		counts: monitorCounts{Client: map[string]int64{}, Script: map[string]int64{}}}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		conn.Close()
		return nil, err
	}
	r := bufio.NewReaderSize(conn, 1<<16)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "+OK") {
		conn.Close()
		return nil, fmt.Errorf("MONITOR refused: %q %v", strings.TrimSpace(line), err)
	}
	_ = conn.SetReadDeadline(time.Time{})
	go m.read(r)
	return m, nil
}

// read counts the MONITOR feed between the two markers.
func (m *monitor) read(r *bufio.Reader) {
	defer close(m.done)
	marks := 0
	for {
		line, err := r.ReadSlice('\n')
		long := err == bufio.ErrBufferFull
		// Parse before reading on: ReadSlice reuses its buffer.
		name, script, ok := parseMonitorLine(line)
		marker := !long && ok && name == "echo" && bytes.Contains(line, []byte(m.marker))
		for err == bufio.ErrBufferFull {
			// A very long command: its start names it, the rest is arguments.
			_, err = r.ReadSlice('\n')
		}
		if err != nil {
			m.mu.Lock()
			if marks < 2 {
				m.err = fmt.Errorf("monitor: %w", err)
			}
			m.mu.Unlock()
			return
		}
		if !ok {
			continue
		}
		if marker {
			if marks++; marks == 2 {
				return
			}
			continue
		}
		if marks != 1 {
			continue
		}
		m.mu.Lock()
		if script {
			m.counts.Script[name]++
		} else {
			m.counts.Client[name]++
		}
		m.mu.Unlock()
	}
}

// parseMonitorLine reads the command name of a MONITOR line, and whether
// a script ran it. Lines look like
//
//	+1700000000.123456 [0 127.0.0.1:50000] "evalsha" "ab12..." "1" "key"
//	+1700000000.123500 [0 lua] "set" "key" ...
func parseMonitorLine(line []byte) (name string, script, ok bool) {
	open := bytes.IndexByte(line, '[')
	closing := bytes.Index(line, []byte("] \""))
	if open < 0 || closing < open {
		return "", false, false
	}
	rest := line[closing+3:]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return "", false, false
	}
	return strings.ToLower(string(rest[:end])), bytes.HasSuffix(line[open+1:closing], []byte(" lua")), true
}

// finish waits for the second marker and returns the counts.
func (m *monitor) finish(ctx context.Context) (monitorCounts, error) {
	defer m.conn.Close()
	select {
	case <-m.done:
	case <-ctx.Done():
		return monitorCounts{}, ctx.Err()
	case <-time.After(30 * time.Second):
		return monitorCounts{}, errors.New("monitor: second marker not seen within 30s")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts, m.err
}

// close drops the monitor without waiting.
func (m *monitor) close() { m.conn.Close() }

// commandCounts is what countCommands measured.
type commandCounts struct {
	Stats      commandStats  // INFO commandstats delta: client and script calls mixed
	Monitor    monitorCounts // MONITOR: client-sent and script calls apart
	MonitorErr error         // why Monitor is missing, if it is
}

// countCommands counts the commands Redis runs while during runs, with
// INFO commandstats and, when useMonitor and e.monitor are set, MONITOR,
// on every measured node (the masters of a cluster), and sums them.
// MONITOR makes Redis format every command it runs, which costs it about
// a tenth of its speed here, so timed runs leave it off.
//
// Both windows are the same on each node: each end is one MULTI/EXEC
// transaction of INFO commandstats and the marker ECHO on that node, so no
// other client's command runs between the snapshot and the marker. The
// transactions' own MULTI and EXEC fall inside the window (one each per
// node) and are subtracted.
func countCommands(ctx context.Context, e *env, useMonitor bool, during func() error) (commandCounts, error) {
	var cc commandCounts
	marker := "rlock-bench-mark-" + randomID()
	var mons []*monitor
	defer func() {
		for _, m := range mons {
			m.close()
		}
	}()
	switch {
	case !useMonitor:
		cc.MonitorErr = errors.New("not counted in this pass")
	case e.monitor:
		for _, n := range e.nodes {
			m, err := startMonitor(ctx, n.addr, marker)
			if err != nil {
				cc.MonitorErr = err
				break
			}
			mons = append(mons, m)
		}
	default:
		cc.MonitorErr = errors.New("-monitor=false")
	}
	if cc.MonitorErr != nil {
		for _, m := range mons {
			m.close()
		}
		mons = nil
	}
	before := make([]commandStats, len(e.nodes))
	for i, n := range e.nodes {
		var err error
		if before[i], err = markedStats(ctx, n.c, marker, false); err != nil {
			return cc, err
		}
	}
	derr := during()
	cc.Stats = commandStats{}
	for i, n := range e.nodes {
		after, err := markedStats(ctx, n.c, marker, true)
		if err != nil {
			return cc, err
		}
		d := after.delta(before[i])
		d.sub("multi", 1)
		d.sub("exec", 1)
		cc.Stats = cc.Stats.plus(d)
	}
	if mons != nil {
		cc.Monitor = monitorCounts{Client: map[string]int64{}, Script: map[string]int64{}}
		for _, m := range mons {
			counts, err := m.finish(ctx)
			if err != nil {
				cc.Monitor, cc.MonitorErr = monitorCounts{}, err
				break
			}
			commandStats(counts.Client).sub("multi", 1)
			commandStats(counts.Client).sub("exec", 1)
			cc.Monitor = cc.Monitor.plus(counts)
		}
	}
	return cc, derr
}

// markedStats reads INFO commandstats and sends the marker ECHO in one
// transaction: the ECHO after the snapshot at the start of a window
// (markFirst false), before it at the end.
func markedStats(ctx context.Context, c rueidis.Client, marker string, markFirst bool) (commandStats, error) {
	info := c.B().Info().Section("commandstats").Build()
	echo := c.B().Echo().Message(marker).Build()
	mid := []rueidis.Completed{info, echo}
	infoAt := 0
	if markFirst {
		mid = []rueidis.Completed{echo, info}
		infoAt = 1
	}
	cmds := append(append([]rueidis.Completed{c.B().Multi().Build()}, mid...), c.B().Exec().Build())
	resps := c.DoMulti(ctx, cmds...)
	for _, r := range resps {
		if err := r.Error(); err != nil {
			return nil, err
		}
	}
	arr, err := resps[len(resps)-1].ToArray()
	if err != nil {
		return nil, err
	}
	if len(arr) != 2 {
		return nil, fmt.Errorf("EXEC returned %d replies, want 2", len(arr))
	}
	text, err := arr[infoAt].ToString()
	if err != nil {
		return nil, err
	}
	return parseCommandStats(text), nil
}

// sub lowers a count by n, not below zero.
func (st commandStats) sub(name string, n int64) {
	if v := st[name] - n; v > 0 {
		st[name] = v
	} else {
		delete(st, name)
	}
}
