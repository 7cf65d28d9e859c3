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
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// ServerOptions says how StartServer starts redis-server.
type ServerOptions struct {
	// Port is the port to listen on; "" for a free one.
	Port string
	// Args are redis-server arguments after the port, bind, persistence and directory ones;
	// nil is TestArgs.
	Args []string
	// Output receives the server's stdout and stderr (its log unless Args name a logfile).
	Output io.Writer
	// SysProcAttr, if set, is the process's attributes (bench starts it in a group of its own).
	SysProcAttr *syscall.SysProcAttr
}

// TestArgs are the arguments the tests' servers get: DEBUG allowed, the log in the server's
// directory.
func TestArgs(dir string) []string {
	return []string{"--enable-debug-command", "yes", "--logfile", filepath.Join(dir, "redis.log")}
}

// Server is a redis-server process this program started, on 127.0.0.1, persisting nothing.
type Server struct {
	Addr string // 127.0.0.1:Port
	Port string
	Dir  string // its working directory, removed by Stop

	opts ServerOptions
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited and been reaped
}

// StartServer starts redis-server (the first on PATH; scripts/with-redis.sh puts RLOCK_SERVER's
// build there) and waits up to 10s until it accepts connections. A failure leaves no process
// and no directory behind.
func StartServer(o ServerOptions) (*Server, error) {
	if o.Port == "" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		o.Port = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
		l.Close()
	}
	dir, err := os.MkdirTemp("", "rlock-redis")
	if err != nil {
		return nil, err
	}
	if o.Args == nil {
		o.Args = TestArgs(dir)
	}
	s := &Server{Addr: "127.0.0.1:" + o.Port, Port: o.Port, Dir: dir, opts: o}
	if err := s.Start(); err != nil {
		os.RemoveAll(dir)
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
	args := append([]string{"--port", s.Port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.Dir}, s.opts.Args...)
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
		if c, err := net.Dial("tcp", s.Addr); err == nil {
			c.Close()
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
// by SIGSTOP), waits for it, and removes its directory.
func (s *Server) Stop() {
	s.Kill()
	os.RemoveAll(s.Dir)
}
