package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/rlock-go/rlock"
)

// execFlags are the flags of "rlock exec".
type execFlags struct {
	redisFlags
	wait       time.Duration
	lease      time.Duration
	owner      string
	label      string
	lostExit   int64
	killAfter  time.Duration
	foreground bool
	quiet      bool
	read       bool
	write      bool
	semaphore  int64
	set        map[string]bool // the flags given on the command line
}

// register defines the flags on fs.
func (f *execFlags) register(fs *flag.FlagSet) {
	f.redisFlags.register(fs)
	durationVar(fs, &f.wait, "wait", 0, "give up after this long")
	durationVar(fs, &f.lease, "lease", 0, "fixed lease instead of the watchdog")
	fs.StringVar(&f.owner, "owner", "", "owner id")
	fs.StringVar(&f.label, "label", "", "label of the hold and the wait")
	intVar(fs, &f.lostExit, "lost-exit", exitLost, "exit status when the lock is lost")
	durationVar(fs, &f.killAfter, "kill-after", 10*time.Second, "SIGKILL this long after SIGTERM")
	fs.BoolVar(&f.foreground, "foreground", false, "keep CMD in rlock's process group")
	fs.BoolVar(&f.quiet, "quiet", false, "no line on stderr when the lock is not obtained")
	fs.BoolVar(&f.read, "read", false, "read hold of a read-write lock")
	fs.BoolVar(&f.write, "write", false, "write hold of a read-write lock")
	intVar(fs, &f.semaphore, "semaphore", 0, "one of N permits of a semaphore")
}

// labelFor is the label of the holds and waits: --label, or "HOST pid PID" without it.
func (f *execFlags) labelFor() string {
	if f.set["label"] {
		return f.label
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "?"
	}
	return fmt.Sprintf("%s pid %d", host, os.Getpid())
}

// waitFor is the wait of the acquisition: --wait, or -1 (until interrupted) without it.
func (f *execFlags) waitFor() time.Duration {
	if f.set["wait"] {
		return f.wait
	}
	return -1
}

// check validates the flags that need no Redis.
func (f *execFlags) check(fs *flag.FlagSet) error {
	if err := nonNegative(fs, map[string]time.Duration{"wait": f.wait, "lease": f.lease, "kill-after": f.killAfter}); err != nil {
		return err
	}
	if f.lostExit < 0 || f.lostExit > 255 {
		return usagef("exec: --lost-exit %d is not an exit status (0-255)", f.lostExit)
	}
	return nil
}

// lost is the exit status for a lock lost while CMD ran (or before it started): --lost-exit.
func (f *execFlags) lost() int { return int(f.lostExit) }

// runExec is "rlock exec": it runs CMD while holding the lock NAME and returns the exit status.
func runExec(args []string, env []string, stdout, stderr io.Writer) int {
	f := execFlags{}
	fs := newFlagSet("exec")
	f.register(fs)
	pos, argv, err := execArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		helpFor(stdout, "exec")
		return 0
	}
	if err != nil {
		return usageFailed(stderr, err)
	}
	f.set = given(fs)
	kind, err := kindOf(&f)
	if err == nil {
		err = f.check(fs)
	}
	switch {
	case err != nil:
	case len(pos) == 0:
		err = usagef("exec: missing NAME")
	case len(argv) == 0:
		err = usagef("exec: missing CMD after NAME %q", pos[len(pos)-1])
	case len(pos) > 1 && kind != kindMutex:
		err = usagef("exec: several NAMEs are mutexes (plain or --fair): no --read, --write or --semaphore")
	}
	if err != nil {
		return usageFailed(stderr, err)
	}
	opt, err := f.clientOption(fs, env)
	if err != nil {
		return usageFailed(stderr, err)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		fmt.Fprintf(stderr, "rlock: %s\n", errorText(err))
		return startStatus(err)
	}

	sigs := catchSignals()
	defer signal.Stop(sigs)

	s, code := open(opt, &f.redisFlags, stderr, exitUnavailable)
	if s == nil {
		return code
	}
	defer s.close()
	var opts []rlock.MutexOption
	if f.set["lease"] {
		opts = append(opts, rlock.WithLease(f.lease))
	}
	for _, name := range pos {
		if err := checkKind(s, &f.redisFlags, kind, name); err != nil {
			return usageFailed(stderr, err)
		}
	}
	lk := newLocker(s, &f, kind, pos[0], opts...)
	if len(pos) > 1 {
		lk = newMultiLocker(s, &f, pos, opts...)
	}
	x := &execution{
		f:      &f,
		name:   strings.Join(pos, " "),
		lk:     lk,
		sigs:   sigs,
		stderr: stderr,
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0] // as given, not as found on PATH
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.Env = env
	setProcessGroup(cmd, f.foreground)
	return x.run(cmd)
}

// execArgs parses the flags of exec in args and returns its NAMEs and CMD: the words before
// the first "--" are NAMEs when there are several (flags may come between them); with one
// NAME, the "--" after it may be left out, and CMD is the rest.
func execArgs(fs *flag.FlagSet, args []string) (names, cmd []string, err error) {
	names, rest, err := parseArgs(fs, args, 1)
	if err != nil || len(names) == 0 {
		return names, rest, err
	}
	if i := len(args) - len(rest); i > 0 && args[i-1] == "--" {
		return names, rest, nil // NAME -- CMD
	}
	dd := slices.Index(rest, "--")
	if dd < 0 {
		return names, rest, nil // NAME CMD
	}
	// NAME NAME... -- CMD (flags are parsed before the "--" only: the flag package would take
	// it for the end of the flags)
	for words := rest[:dd]; len(words) > 0; words = fs.Args() {
		names = append(names, words[0])
		if err := parseFlags(fs, words[1:]); err != nil {
			return nil, nil, err
		}
	}
	return names, rest[dd+1:], nil
}

// catchSignals makes SIGINT, SIGTERM and SIGHUP rlock's to handle from now on, and returns
// the channel they arrive on: while waiting they end the wait, while CMD runs they are passed
// on to it. A signal that rlock was started with ignored (nohup, a background job of a
// script) stays ignored, by rlock and by CMD.
func catchSignals() chan os.Signal {
	sigs := make(chan os.Signal, 8)
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP} {
		if !signal.Ignored(sig) {
			signal.Notify(sigs, sig)
		}
	}
	return sigs
}

// execution is one "rlock exec" once its flags are checked and Redis is connected.
type execution struct {
	f      *execFlags
	name   string
	lk     locker
	sigs   <-chan os.Signal // SIGINT, SIGTERM and SIGHUP that rlock received
	stderr io.Writer
}

// run takes the lock, runs cmd under it, releases it, and returns the exit status.
func (x *execution) run(cmd *exec.Cmd) int {
	base := context.Background()
	if x.f.set["owner"] {
		base = rlock.WithOwner(base, x.f.owner)
	}
	base = rlock.WithLabel(base, x.f.labelFor())
	// The hold context derives from waitCtx: it is cancelled only to abandon a wait, and at
	// the very end, once the hold is released.
	waitCtx, stopWaiting := context.WithCancel(base)
	defer stopWaiting()
	held, code := x.lock(waitCtx, stopWaiting)
	if held == nil {
		return code
	}
	if held.Err() != nil { // lost already, before CMD could start
		x.report("%s lost before CMD started: %s", x.lk.what(), errorText(context.Cause(held)))
		_ = x.lk.release(held)
		return x.f.lost()
	}
	// A semaphore's hold has no owner (every acquisition is a hold of its own): RLOCK_OWNER is
	// then empty, not an owner inherited from an outer rlock exec.
	owner, _ := rlock.Owner(held)
	cmd.Env = append(slices.Clip(cmd.Env), "RLOCK_NAME="+x.name, "RLOCK_OWNER="+owner)
	if err := cmd.Start(); err != nil {
		x.report("%s", errorText(err))
		x.finish(held, 1)
		return startStatus(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // its outcome is cmd.ProcessState, read once exited is closed
		close(exited)
	}()
	for {
		select {
		case <-exited:
			return x.finish(held, exitStatus(cmd.ProcessState))
		case sig := <-x.sigs:
			x.forward(cmd, sig)
		case <-held.Done():
			return x.stop(cmd, held, exited)
		}
	}
}

// lock acquires the lock under ctx as --wait says. A signal while waiting abandons the wait
// (cancel ends ctx). It returns the hold context, or nil and the exit status to end with.
func (x *execution) lock(ctx context.Context, cancel context.CancelFunc) (context.Context, int) {
	type result struct {
		held context.Context
		err  error
	}
	done := make(chan result, 1)
	go func() {
		held, err := x.lk.acquire(ctx, x.f.waitFor())
		done <- result{held, err}
	}()
	var r result
	select {
	case r = <-done:
	case sig := <-x.sigs:
		cancel()
		if r = <-done; r.err == nil { // acquired just as the signal came: give it back
			_ = x.lk.release(r.held)
		}
		x.report("%v while waiting for %s; CMD not run", sig, x.lk.what())
		return nil, signalStatus(sig)
	}
	switch err := lockErr(r.err); {
	case err == nil:
		return r.held, 0
	case isUsage(err):
		return nil, usageFailed(x.stderr, err)
	case errors.Is(err, rlock.ErrNotObtained) && !wrapsOther(err, rlock.ErrNotObtained):
		if x.f.quiet {
			return nil, exitTempFail
		}
		if wait := x.f.waitFor(); wait > 0 {
			x.report("%s %s; gave up after %v", x.lk.what(), x.lk.busy(), wait)
		} else {
			x.report("%s %s", x.lk.what(), x.lk.busy())
		}
		return nil, exitTempFail
	}
	// An error of Redis, or an attempt that could not reach it (ErrNotObtained that wraps the
	// transport error too): not the lock's being taken.
	x.report("%s", x.about(r.err))
	return nil, exitUnavailable
}

// wrapsOther reports whether err's tree holds an error besides target and the errors that
// wrap it: the library wraps the transport error of an attempt that could not reach Redis
// together with ErrNotObtained.
func wrapsOther(err, target error) bool {
	switch e := err.(type) {
	case nil:
		return false
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if wrapsOther(inner, target) {
				return true
			}
		}
		return false
	case interface{ Unwrap() error }:
		if inner := e.Unwrap(); inner != nil {
			return wrapsOther(inner, target)
		}
	}
	return err != target
}

// forward passes a signal that rlock received on to the running cmd: to its process group,
// or, with --foreground, SIGTERM alone to cmd alone (the terminal sends SIGINT and SIGHUP to
// the whole foreground group, CMD included, by itself).
func (x *execution) forward(cmd *exec.Cmd, sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok || (x.f.foreground && s != syscall.SIGTERM) {
		return
	}
	x.signal(cmd, s, !x.f.foreground)
}

// stop ends cmd after the hold ended while it ran: SIGTERM, then SIGKILL after --kill-after.
// Once cmd has exited, what is left of its process group gets SIGKILL too: nothing it started
// may go on without the lock. It returns the exit status: --lost-exit.
func (x *execution) stop(cmd *exec.Cmd, held context.Context, exited <-chan struct{}) int {
	group := !x.f.foreground
	what, cause := "lost", context.Cause(held)
	if !rlock.Lost(held) {
		what = "hold ended"
	}
	why := ""
	if cause != rlock.ErrLockLost { // the bare sentinel adds nothing; a lease end says more
		why = " (" + errorText(cause) + ")"
	}
	x.report("%s %s while CMD ran%s: stopping CMD (SIGTERM, SIGKILL after %v)", x.lk.what(), what, why, x.f.killAfter)
	x.signal(cmd, syscall.SIGTERM, group)
	kill := time.NewTimer(x.f.killAfter)
	defer kill.Stop()
	for {
		select {
		case <-exited:
			if group {
				x.signal(cmd, syscall.SIGKILL, true)
			}
			_ = x.lk.release(held) // reports the loss; Redis is not touched for a lost hold
			return x.f.lost()
		case <-kill.C:
			x.report("CMD still runs %v after SIGTERM: sending SIGKILL", x.f.killAfter)
			x.signal(cmd, syscall.SIGKILL, group)
		case sig := <-x.sigs:
			x.forward(cmd, sig)
		}
	}
}

// signal sends sig to cmd (or its group), reporting failures other than "already gone".
func (x *execution) signal(cmd *exec.Cmd, sig syscall.Signal, group bool) {
	err := signalCmd(cmd, sig, group)
	if err != nil && !errors.Is(err, os.ErrProcessDone) && !errors.Is(err, syscall.ESRCH) {
		x.report("sending CMD %v: %s", sig, errorText(err))
	}
}

// finish releases the hold after cmd exited with status code and returns rlock's exit
// status: code, or --lost-exit if the release found the lock lost after a successful CMD
// (its run may have overlapped another holder's).
func (x *execution) finish(held context.Context, code int) int {
	err := x.lk.release(held)
	switch {
	case err == nil:
		return code
	case errors.Is(err, rlock.ErrLockLost) && code == 0:
		x.report("%s was lost before CMD ended: its run may have overlapped another holder's", x.lk.what())
		return x.f.lost()
	case errors.Is(err, rlock.ErrLockLost):
		x.report("%s was lost before CMD ended; exiting with CMD's status %d", x.lk.what(), code)
		return code
	}
	x.report("releasing: %s (it expires by itself within its lease)", x.about(err))
	return code
}

// about is the message of err, an error of the library about the lock, naming the lock once:
// the library's errors about a lock start with its kind and name.
func (x *execution) about(err error) string {
	msg := errorText(err)
	if strings.HasPrefix(msg, x.lk.what()) {
		return msg
	}
	return x.lk.what() + ": " + msg
}

// report writes one line about what rlock did to stderr.
func (x *execution) report(format string, args ...any) {
	fmt.Fprintf(x.stderr, "rlock: "+format+"\n", args...)
}

// startStatus is the exit status for a CMD that could not be started: 127 if it was not
// found, 126 otherwise (as in the shell).
func startStatus(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return exitNotFound
	}
	return exitCannotExec
}

// signalStatus is the exit status for rlock stopped by sig: 128 plus its number.
func signalStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return exitSignalBase + int(s)
	}
	return exitSignalBase
}
