// Package redistest is the tests' harness: throwaway redis-server processes, the deployments
// the tests run on (standalone, cluster, Sentinel) and direct clients of their nodes, a TCP
// fault proxy, a test namespace on a deployment (Env), re-executed test binaries (Child), and
// Main, the TestMain of every test package. The root package's tests, the chaos and failover
// programs (internal/chaos, internal/failover), bench/ and otel/ all use it. It knows Redis, not
// rlock: it does not import the library.
//
// server.go and deployment.go's Deployment do not need the testing package: bench/ starts its
// server with StartServer.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ServerOptions says how StartServer starts redis-server.
type ServerOptions struct {
	// Port is the port to listen on; "" for a free one (see FreePort), and another one if the
	// server cannot bind it.
	Port string
	// Dir is the server's working directory, made if missing and left in place by Stop; ""
	// for a new temporary one, which Stop removes.
	Dir string
	// Args are redis-server arguments after the port, bind, persistence, directory and pidfile
	// ones; nil is TestArgs.
	Args []string
	// Output receives the server's stdout and stderr (its log unless Args name a logfile).
	Output io.Writer
	// SysProcAttr, if set, is the process's attributes (bench starts it in a group of its own).
	SysProcAttr *syscall.SysProcAttr
	// ClusterBus gives the server a cluster bus port of its own (--cluster-port), free like
	// Port and chosen again with it, instead of Port+10000, which can fall in the ephemeral
	// range. For a cluster node: Args say --cluster-enabled yes.
	ClusterBus bool
}

// TestArgs are the arguments the tests' servers get: DEBUG allowed, the log in the server's
// directory.
func TestArgs(dir string) []string {
	return []string{"--enable-debug-command", "yes", "--logfile", filepath.Join(dir, "redis.log")}
}

// FreePort returns a loopback port that nothing listens on, below Linux's default ephemeral
// range (32768-60999), where other programs' outgoing connections could take it before the
// server binds it: from RLOCK_PORTS ("LOW-HIGH", default 20000-32767). Suites that run side by
// side get ranges of their own (see the Makefile), so that a server a test restarts on its
// port never finds another suite's server there.
func FreePort() (string, error) {
	lo, hi := 20000, 32767
	if r := os.Getenv("RLOCK_PORTS"); r != "" {
		a, b, ok := strings.Cut(r, "-")
		l, err1 := strconv.Atoi(a)
		h, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || l < 1024 || h < l || h > 65535 {
			return "", fmt.Errorf("RLOCK_PORTS=%q: want LOW-HIGH", r)
		}
		lo, hi = l, h
	}
	for range 200 {
		p := strconv.Itoa(lo + rand.IntN(hi-lo+1))
		l, err := net.Listen("tcp", "127.0.0.1:"+p)
		if err == nil {
			l.Close()
			return p, nil
		}
	}
	return "", errors.New("no free port found")
}

// Server is a redis-server process this program started, on 127.0.0.1, persisting nothing.
// Its directory holds its pidfile (redis.pid) and its command line (args: the server's path,
// then an argument a line), so that Crash can start it again.
type Server struct {
	Addr string // 127.0.0.1:Port
	Port string
	Dir  string // its working directory

	opts   ServerOptions
	tmpDir bool // Dir is StartServer's and goes with Stop
	cmd    *exec.Cmd
	done   chan struct{} // closed when the process has exited and been reaped
}

// StartServer starts redis-server (the first on PATH; scripts/with-redis.sh puts RLOCK_SERVER's
// build there) and waits up to 10s until it accepts connections; when it cannot bind a port it
// chose, it tries another, 5 times in all. A failure leaves no process and no temporary
// directory behind.
func StartServer(o ServerOptions) (*Server, error) {
	s := &Server{opts: o, Dir: o.Dir}
	if s.Dir == "" {
		dir, err := os.MkdirTemp("", "rlock-redis")
		if err != nil {
			return nil, err
		}
		s.Dir, s.tmpDir = dir, true
	} else if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, err
	}
	if s.opts.Args == nil {
		s.opts.Args = TestArgs(s.Dir)
	}
	args := s.opts.Args
	var err error
	for range 5 {
		s.Port = o.Port
		if s.Port == "" {
			if s.Port, err = FreePort(); err != nil {
				break
			}
		}
		if o.ClusterBus {
			var bus string
			for bus == "" || bus == s.Port {
				if bus, err = FreePort(); err != nil {
					break
				}
			}
			if err != nil {
				break
			}
			s.opts.Args = append(args[:len(args):len(args)], "--cluster-port", bus)
		}
		s.Addr = "127.0.0.1:" + s.Port
		if err = s.Start(); err == nil || o.Port != "" {
			break
		}
	}
	if err != nil {
		if s.tmpDir {
			os.RemoveAll(s.Dir)
		}
		return nil, err
	}
	return s, nil
}

// Start starts the server's process again, as StartServer did, without its data (after Kill),
// and waits until it accepts connections. On failure no process is left running.
func (s *Server) Start() error {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return fmt.Errorf("redis-server not on PATH (install it, or set REDIS_ADDR): %w", err)
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return err
	}
	args := append([]string{"--port", s.Port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.Dir, "--pidfile", filepath.Join(s.Dir, "redis.pid")}, s.opts.Args...)
	if err := os.WriteFile(filepath.Join(s.Dir, "args"), []byte(strings.Join(append([]string{bin}, args...), "\n")+"\n"), 0o644); err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = s.opts.Output, s.opts.Output
	cmd.SysProcAttr = s.opts.SysProcAttr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	deadline := time.Now().Add(10 * time.Second)
	for {
		if pong(s.Addr) {
			return nil
		}
		select {
		case <-done:
			return errors.New("redis-server on " + s.Addr + " exited at start")
		default:
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("redis-server on %s did not start", s.Addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pong reports whether the server at addr answers PING: a connection alone could be another
// program's listener on a port the server could not bind.
func pong(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "+PONG\r\n"
}

// PID is the server process's id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Exited is closed when the server's process has exited.
func (s *Server) Exited() <-chan struct{} { return s.done }

// Kill stops the server process by its PID (SIGKILL) and waits for it; Start starts it again.
func (s *Server) Kill() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// Stop stops the server process by its PID (SIGKILL: it persists nothing, and may be stopped
// by SIGSTOP), waits for it, and removes its directory if StartServer made it.
func (s *Server) Stop() {
	s.Kill()
	if s.tmpDir {
		os.RemoveAll(s.Dir)
	}
}
