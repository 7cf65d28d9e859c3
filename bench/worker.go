package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// workerEnv names the environment variable that turns this binary into a
// worker process of a multi-process scenario; its value is a workerJob.
const workerEnv = "RLOCK_BENCH_WORKER"

// workerJob is what one worker process runs.
type workerJob struct {
	Contender  string        `json:"contender"`
	Addrs      []string      `json:"addrs"`
	Cluster    bool          `json:"cluster,omitempty"`
	KeyPrefix  string        `json:"key_prefix"`
	Key        string        `json:"key"`
	Proc       int           `json:"proc"`
	Goroutines int           `json:"goroutines"`
	Hold       time.Duration `json:"hold"`
	// Mode is what each goroutine does: "" takes the mutex Key, modeReadHeavy takes the
	// read-write lock Key for reading (ReadPct percent of the time, at random) or writing,
	// modeSemaphore takes one of Permits permits of the semaphore Key, modeTransfer holds two
	// accounts (Key is not used).
	Mode    string `json:"mode,omitempty"`
	ReadPct int    `json:"read_pct,omitempty"`
	Permits int64  `json:"permits,omitempty"`
	// Profile, if set, is where the worker writes Go profiles of its timed run:
	// Profile+"-cpu.out" and Profile+"-mutex.out" (-workerprofiles).
	Profile string `json:"profile,omitempty"`
}

// Worker modes (workerJob.Mode).
const (
	modeMutex     = ""
	modeReadHeavy = "readheavy"
	modeSemaphore = "semaphore"
	modeTransfer  = "transfer" // a transfer between two random accounts (scenario_transfer.go)
)

// The protocol, one JSON value per message:
//
//	worker -> parent (stdout): workerMsg{Ready: true} once connected
//	parent -> worker (stdin):  startMsg with the wall-clock start and end
//	worker -> parent (stdout): workerMsg{Acqs: ...} when the run is over
//	parent -> worker (stdin):  end of input: close the clients and exit
type startMsg struct {
	Start int64 `json:"start"` // Unix ns
	End   int64 `json:"end"`
}

type workerMsg struct {
	Ready    bool          `json:"ready,omitempty"`
	Acqs     []acquisition `json:"acqs,omitempty"`
	Pending  []acquisition `json:"pending,omitempty"` // Locks still waiting at the end (Got and Freed 0)
	Errors   int           `json:"errors,omitempty"`
	FirstErr string        `json:"first_err,omitempty"`
	Fatal    string        `json:"fatal,omitempty"`
}

// workerMain is the whole life of a worker process.
func workerMain(jobJSON string) int {
	out := json.NewEncoder(os.Stdout)
	fail := func(err error) int {
		_ = out.Encode(workerMsg{Fatal: err.Error()})
		return 1
	}
	var job workerJob
	if err := json.Unmarshal([]byte(jobJSON), &job); err != nil {
		return fail(fmt.Errorf("bad job: %w", err))
	}
	newOp, closeClient, err := openWorker(job)
	if err != nil {
		return fail(err)
	}
	defer closeClient()
	if err := warmUp(job, newOp); err != nil {
		return fail(fmt.Errorf("warm-up: %w", err))
	}
	if err := out.Encode(workerMsg{Ready: true}); err != nil {
		return 1
	}
	in := json.NewDecoder(os.Stdin)
	var sm startMsg
	if err := in.Decode(&sm); err != nil {
		return fail(fmt.Errorf("no start message: %w", err))
	}
	stop := func() error { return nil }
	if job.Profile != "" {
		if stop, err = startProfiles(job.Profile+"-cpu.out", job.Profile+"-mutex.out"); err != nil {
			return fail(err)
		}
	}
	res := runWorkerLoop(job, newOp, time.Unix(0, sm.Start), time.Unix(0, sm.End))
	if err := stop(); err != nil {
		return fail(err)
	}
	if err := out.Encode(res); err != nil {
		return 1
	}
	// Stay connected until the parent has taken its closing counts.
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// A lockOp takes one hold; write reports whether it asked for the write hold of a
// read-write lock (read-heavy mode only), also when it failed.
type lockOp func(ctx context.Context) (h Hold, write bool, err error)

// openWorker connects the job's contender and returns how to make each goroutine's lockOp on
// a key (goroutine g of the job), and how to close the contender.
func openWorker(job workerJob) (newOp func(key string, g int) lockOp, closeClient func(), err error) {
	spec, err := specByID(job.Mode, job.Contender)
	if err != nil {
		return nil, nil, err
	}
	cfg := contenderConfig{Addrs: job.Addrs, Cluster: job.Cluster, KeyPrefix: job.KeyPrefix}
	switch job.Mode {
	case modeMutex:
		c, err := spec.New(cfg)
		if err != nil {
			return nil, nil, err
		}
		return func(key string, _ int) lockOp {
			m := c.Mutex(key)
			return func(ctx context.Context) (Hold, bool, error) {
				h, err := m.Lock(ctx)
				return h, false, err // exclusive, but not a write hold of a read-write lock
			}
		}, c.Close, nil
	case modeReadHeavy:
		c, err := spec.NewRW(cfg)
		if err != nil {
			return nil, nil, err
		}
		return func(key string, g int) lockOp {
			m := c.RWMutex(key)
			// Each goroutine draws its own sequence; the seed differs per process and goroutine.
			rng := rand.New(rand.NewPCG(uint64(job.Proc), uint64(g)))
			return func(ctx context.Context) (Hold, bool, error) {
				if rng.IntN(100) < job.ReadPct {
					h, err := m.RLock(ctx)
					return h, false, err
				}
				h, err := m.Lock(ctx)
				return h, true, err
			}
		}, c.Close, nil
	case modeSemaphore:
		c, err := spec.NewSem(cfg)
		if err != nil {
			return nil, nil, err
		}
		return func(key string, _ int) lockOp {
			s := c.Semaphore(key, job.Permits)
			return func(ctx context.Context) (Hold, bool, error) {
				h, err := s.Acquire(ctx)
				return h, false, err
			}
		}, c.Close, nil
	case modeTransfer:
		return openTransfer(job)
	}
	return nil, nil, fmt.Errorf("unknown worker mode %q", job.Mode)
}

// warmUp has every goroutine take and release a key of its own once, at
// the same time, so that connection pools have grown and scripts are
// loaded before the parent starts counting commands. In the read-heavy
// mode each goroutine takes its key until it has had a read and a write
// hold, so both scripts are loaded.
func warmUp(job workerJob, newOp func(key string, g int) lockOp) error {
	errs := make([]error, job.Goroutines)
	var wg sync.WaitGroup
	for g := range job.Goroutines {
		wg.Go(func() {
			op := newOp(fmt.Sprintf("warm-%d-%d", job.Proc, g), g)
			var reads, writes int
			warm := func() bool {
				if job.Mode == modeReadHeavy {
					return reads > 0 && writes > 0
				}
				return reads > 0
			}
			for try := 0; try < 200 && !warm(); try++ {
				ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
				h, write, err := op(ctx)
				if err == nil {
					err = h.Release(ctx)
				}
				cancel()
				if err != nil {
					errs[g] = err
					return
				}
				if write {
					writes++
				} else {
					reads++
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// runWorkerLoop runs job.Goroutines goroutines from start to end, each
// taking a hold with its lockOp, holding it for job.Hold, releasing it and
// asking again at once. A Lock still waiting at end is abandoned by its context.
func runWorkerLoop(job workerJob, newOp func(key string, g int) lockOp, start, end time.Time) workerMsg {
	var (
		mu  sync.Mutex
		res workerMsg
		wg  sync.WaitGroup
	)
	// ctx ends the run. It is cancelled at the end rather than given a deadline
	// (rueidislock cuts a lock's validity to its context's deadline), and each Lock gets a
	// context of its own that the end of the run cancels only while the Lock still waits:
	// rueidislock releases a lock when the context it was taken with ends, so a hold in
	// progress must not see the end of the run, or its release would come early and the next
	// holder would seem to overlap it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopTimer := time.AfterFunc(time.Until(end), cancel)
	defer stopTimer.Stop()
	time.Sleep(time.Until(start))
	for g := range job.Goroutines {
		op := newOp(job.Key, g)
		wg.Go(func() {
			var acqs, pending []acquisition
			var errs int
			var first error
			for ctx.Err() == nil {
				asked := time.Now()
				lctx, lcancel := context.WithCancel(context.Background())
				detach := context.AfterFunc(ctx, lcancel)
				h, write, err := op(lctx)
				if err == nil && !detach() {
					// The run ended as the lock was taken, and lctx is cancelled: give it back
					// uncounted.
					_ = h.Release(context.Background())
					lcancel()
					pending = append(pending, acquisition{Proc: job.Proc, Worker: g, Asked: asked.UnixNano(), Write: write})
					break
				}
				if err != nil {
					detach()
					lcancel()
					if ctx.Err() != nil {
						pending = append(pending, acquisition{Proc: job.Proc, Worker: g, Asked: asked.UnixNano(), Write: write})
						break
					}
					errs++
					first = cmpOr(first, err)
					sleepCtx(ctx, 10*time.Millisecond) // no hot loop on a failing library
					continue
				}
				got := time.Now()
				time.Sleep(job.Hold)
				freed := time.Now()
				rctx, rcancel := context.WithTimeout(context.Background(), opTimeout)
				err = h.Release(rctx)
				rcancel()
				lcancel()
				if err != nil {
					errs++
					first = cmpOr(first, fmt.Errorf("release: %w", err))
				}
				acqs = append(acqs, acquisition{Proc: job.Proc, Worker: g,
					Asked: asked.UnixNano(), Got: got.UnixNano(), Freed: freed.UnixNano(), Write: write,
					Accts: h.Accounts, Retries: h.Retries})
			}
			mu.Lock()
			defer mu.Unlock()
			res.Acqs = append(res.Acqs, acqs...)
			res.Pending = append(res.Pending, pending...)
			res.Errors += errs
			if first != nil && res.FirstErr == "" {
				res.FirstErr = first.Error()
			}
		})
	}
	wg.Wait()
	return res
}

// workerProc is the parent's handle on one worker process.
type workerProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	msgs   chan workerMsg // closed when stdout ends
	stderr syncBuffer
}

// startWorker starts this binary as a worker running job.
func startWorker(ctx context.Context, job workerJob) (*workerProc, error) {
	w := &workerProc{msgs: make(chan workerMsg, 4)}
	var stdout io.Reader
	var err error
	if w.cmd, w.stdin, stdout, err = startSelf(ctx, workerEnv, job, &w.stderr); err != nil {
		return nil, err
	}
	go func() {
		defer close(w.msgs)
		dec := json.NewDecoder(stdout)
		for {
			var m workerMsg
			if err := dec.Decode(&m); err != nil {
				return
			}
			w.msgs <- m
		}
	}()
	return w, nil
}

// stop closes the worker's input, which tells it to close its clients and
// exit, and kills it (by its PID) if it has not exited within limit.
func (w *workerProc) stop(limit time.Duration) {
	_ = w.stdin.Close()
	done := make(chan struct{})
	go func() {
		for range w.msgs { // drain stdout first: Wait closes the pipe
		}
		_ = w.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(limit):
		_ = w.cmd.Process.Kill()
		<-done
	}
}

// syncBuffer is a bytes.Buffer safe to read while a process writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// lastLine returns the last non-empty line of s, cut to 300 bytes.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	l := lines[len(lines)-1]
	if len(l) > 300 {
		l = l[:300] + "..."
	}
	if l == "" {
		return "no output on stderr"
	}
	return l
}

// next returns the worker's next message, or an error when it exits, says
// it failed, or is silent for limit.
func (w *workerProc) next(ctx context.Context, limit time.Duration) (workerMsg, error) {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case m, ok := <-w.msgs:
		if !ok {
			return m, fmt.Errorf("worker %d exited early: %s", w.cmd.Process.Pid, lastLine(w.stderr.String()))
		}
		if m.Fatal != "" {
			return m, errors.New(m.Fatal)
		}
		return m, nil
	case <-t.C:
		return workerMsg{}, fmt.Errorf("worker %d silent for %v", w.cmd.Process.Pid, limit)
	case <-ctx.Done():
		return workerMsg{}, ctx.Err()
	}
}

// startSelf starts this binary with job, as JSON, in the environment variable env, and its
// stderr to stderr; it returns the running command and its stdin and stdout.
func startSelf(ctx context.Context, env string, job any, stderr io.Writer) (*exec.Cmd, io.WriteCloser, io.Reader, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, nil, err
	}
	b, err := json.Marshal(job)
	if err != nil {
		return nil, nil, nil, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), env+"="+string(b))
	cmd.Stderr = stderr
	cmd.SysProcAttr = childProcAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, nil, err
	}
	return cmd, stdin, stdout, nil
}
