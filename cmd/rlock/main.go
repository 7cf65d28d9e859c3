// Command rlock is the flock of a fleet: it runs a command while holding a distributed lock
// on Redis, so that at most one copy of it runs at a time across many hosts, and shows or
// breaks such locks. See usage below, or run "rlock help".
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
)

// Exit statuses of rlock itself (exec also passes CMD's own status through).
const (
	exitUsage       = 64  // EX_USAGE: bad flags or arguments
	exitUnavailable = 69  // EX_UNAVAILABLE: exec could not use Redis (unreachable, error reply)
	exitTempFail    = 75  // EX_TEMPFAIL: exec did not get the lock in time (CMD did not run)
	exitLost        = 79  // exec: the lock was lost while CMD ran (default of --lost-exit)
	exitCannotExec  = 126 // CMD exists but could not be started
	exitNotFound    = 127 // CMD was not found
	exitSignalBase  = 128 // 128+n: CMD died of signal n, or rlock was stopped by it while waiting
	exitHeld        = 0   // status: the lock is held; unlock --force: it existed
	exitFree        = 1   // status: the lock is free; unlock --force: it did not exist
	exitError       = 2   // status and unlock: Redis unreachable or an error reply
)

// usage is the text of "rlock help".
const usage = `rlock: the flock of a fleet. Runs a command while holding a distributed lock on Redis,
so that at most one copy of it runs at a time across every host that uses the same Redis.

Usage:
  rlock exec [flags] NAME... [--] CMD [ARG...]   run CMD while holding the lock NAME (each NAME)
  rlock status [flags] NAME                       show who holds NAME, and who waits
  rlock leader [--watch] [flags] NAME             show who leads the election NAME
  rlock unlock --force [flags] NAME               delete the lock NAME, whoever holds it
  rlock version                                   rlock's version and Go's (also --version)
  rlock help                                      this text (also -h, --help)

Flags may come before or after NAME (exec: before CMD). Durations need a unit: 500ms, 10s,
5m, 1h.

Flags of every subcommand:
  --redis URL       the Redis to use; default $REDIS_URL; one of them is required.
                    host:port (as REDIS_ADDR) is redis://host:port;
                    redis://[user:password@]host[:port][/db], rediss://... for TLS,
                    unix://[user:password@]/path/to/redis.sock[?db=N]; more seed nodes with
                    ?addr=host2:port&addr=... (a Redis Cluster is detected by itself);
                    Sentinel: redis://sentinel1:26379?master_set=NAME&addr=sentinel2:26379
  --prefix P        key prefix (default "rlock"): the lock NAME is the Redis hash P:{NAME}
  --fair            a fair lock (mutex or, with --read/--write, read-write lock): waiters get
                    it in arrival order; everyone using NAME must agree. status --fair also
                    says "queue: empty"; unlock --force --fair wakes the queue's head (as it
                    does anyway when waiters queue)
  --watchdog D      lease of a hold, renewed every third of it while rlock runs (default 30s):
                    a holder that dies frees the lock within D, and a holder notices a forced
                    unlock within D/3
  --fair-wait D     how long a queued --fair waiter keeps its place without polling (default 5s)

Flags of leader:
  --watch           print the leadership, then every change (a new leader, a value it
                    proclaims, a vacancy), one line each, until SIGINT or SIGTERM

Flags of exec:
  --wait D          give up after D (exit 75); --wait 0: a single attempt, fail at once if the
                    lock is taken; default: wait as long as it takes (SIGINT, SIGTERM: exit
                    130, 143 without running CMD)
  --lease D         a fixed lease of D instead of the watchdog: when it ends, CMD is stopped as
                    for a lost lock
  --owner ID        hold the lock as owner ID (default: a fresh random one); a process with the
                    same ID re-enters the hold instead of waiting for it (cross-process
                    reentrancy). CMD finds the owner in $RLOCK_OWNER and NAME in $RLOCK_NAME
  --label L         label the hold and the wait L, which status shows (default: "HOST pid PID",
                    rlock's own process id); 1-256 bytes, no control characters
  --lost-exit N     exit status when the lock is lost while CMD runs (default 79)
  --kill-after D    when the lock is lost: SIGKILL CMD this long after SIGTERM (default 10s)
  --foreground      keep CMD in rlock's process group, for a CMD that reads from the terminal
                    (see Signals)
  --quiet           no line on stderr when the lock is not obtained (exit 75 all the same):
                    a skipped cron round mails nothing. Other messages are still printed
  --read, --write   a read or a write hold of the read-write lock NAME: any number of readers
                    at once, or one writer. A waiting writer holds back new readers (with
                    --fair: arrival order). An owner holding only read holds that asks to
                    write is refused (64)
  --semaphore N     one of the N permits of the semaphore NAME: at most N CMDs at once; served
                    in arrival order. Everyone using NAME must give the same N (else 64). No
                    --fair (it always is), no --owner (each run is a hold of its own;
                    $RLOCK_OWNER is empty)

exec takes the lock, runs CMD with rlock's stdin, stdout, stderr and environment, and
releases the lock when CMD exits. If the lock is lost while CMD runs (its lease ran out, or
"rlock unlock --force"), rlock sends CMD SIGTERM, then SIGKILL after --kill-after, and exits 79.

Several NAMEs: "rlock exec a b c -- CMD" holds the mutexes a, b and c (plain, or all --fair)
together: all or none, in one order that every rlock computes alike, so runs that name them in
any order never deadlock; --wait is for them all, losing any is losing the lock, $RLOCK_NAME is
"a b c". The first "--" ends the NAMEs: with one NAME and a CMD that has a "--" argument, write
"NAME -- CMD". --read, --write and --semaphore take one NAME.

Signals: SIGINT, SIGTERM and SIGHUP that rlock gets while CMD runs are passed on to CMD, and
rlock exits with CMD's status. CMD runs in a process group of its own, so that signals and a
lost lock reach everything CMD started; at a terminal such a CMD cannot read input (it would
stop): use --foreground. Then CMD shares rlock's process group and gets Ctrl-C and hangups from
the terminal itself; rlock passes on SIGTERM only, to CMD alone. Signals ignored when rlock
starts (nohup) stay ignored. On Linux, CMD gets SIGKILL if rlock dies (kill -9): nothing
renews the lock then.

Exit status:
  exec      CMD's status, 128+n if CMD died of signal n, or:
            64  usage error, or an argument the lock library refuses (NAME, --owner, a key of
                another type at NAME, another --semaphore N, an upgrade from --read to
                --write), or NAME is held in Redis as another kind of lock
            69  Redis unreachable, or an error from it
            75  the lock is taken and --wait ran out (or --wait 0): CMD did not run
            79  the lock was lost while CMD ran, or found lost on release after CMD
                succeeded: its run may have overlapped another's (--lost-exit N: N)
            126 CMD cannot be run; 127 CMD not found
            129, 130, 143: SIGHUP, SIGINT, SIGTERM while waiting for the lock
  status    0 held (a semaphore: any permit out), 1 free, 2 error, 64 usage error
  leader    0 somebody leads (--watch: interrupted), 1 nobody does, 2 error, 64 usage error
  unlock    0 the lock existed (deleted now), 1 it did not, 2 error, 64 usage error
  version   0

status and unlock --force tell the kind of NAME from its keys in Redis: mutex, rw_mutex
(--read, --write), semaphore; fair_mutex, fair_rw_mutex while waiters queue; election while
somebody leads it (status shows its leader, value, term and candidates in order; unlock
--force leaves an election alone). unlock --force ends every hold: each holder's CMD is
stopped within a third of its --watchdog.

Example: at most one copy of a job across the fleet; a host that finds it running skips this
round (exit 75; --quiet: silently, so cron mails nothing). In the crontab of every host:

  REDIS_URL=redis://locks.internal:6379/0
  */10 * * * * rlock exec --wait 0 --quiet sync-invoices -- /usr/local/bin/sync-invoices

  rlock status sync-invoices         # who runs it, and how long its lease has left
  rlock unlock --force sync-invoices # its CMD gets SIGTERM within --watchdog/3 (10s)
`

// main runs rlock with the process's arguments, environment and output, and exits with
// its status once every client is closed.
func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// run is rlock given its arguments (without the program name), environment, and output
// streams; it returns the exit status.
func run(args []string, env []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "exec":
		return runExec(args, env, stdout, stderr)
	case "status":
		return runStatus(args, env, stdout, stderr)
	case "unlock":
		return runUnlock(args, env, stdout, stderr)
	case "leader":
		return runLeader(args, env, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, version())
		return 0
	}
	return usageFailed(stderr, usagef("unknown subcommand %q", sub))
}

// version is the line of "rlock version": the module's version as the build recorded it
// ("(devel)" when it recorded none, as for a build from a clone) and the Go release that
// built it.
//
//	rlock version v1.2.0, built with go1.25.1
func version() string {
	v, goVersion := "", runtime.Version()
	if info, ok := debug.ReadBuildInfo(); ok {
		v = info.Main.Version
		if info.GoVersion != "" {
			goVersion = info.GoVersion
		}
	}
	if v == "" {
		v = "(devel)"
	}
	return fmt.Sprintf("rlock version %s, built with %s", v, goVersion)
}

// usageError is a mistake in the command line: rlock reports it and exits 64.
type usageError struct{ msg string }

// Error returns the message.
func (e *usageError) Error() string { return e.msg }

// usagef returns a usageError with a formatted message.
func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// isUsage reports whether err is a usageError.
func isUsage(err error) bool {
	var u *usageError
	return errors.As(err, &u)
}

// usageFailed reports a usage error on stderr, with a pointer to the help, and returns 64.
func usageFailed(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "rlock: %v\nRun 'rlock help' for usage.\n", err)
	return exitUsage
}

// subUsage returns the usage line of subcommand sub, printed by its -h.
func subUsage(sub string) string {
	switch sub {
	case "exec":
		return "rlock exec [flags] NAME... [--] CMD [ARG...]"
	case "status":
		return "rlock status [flags] NAME"
	case "unlock":
		return "rlock unlock --force [flags] NAME"
	case "leader":
		return "rlock leader [--watch] [flags] NAME"
	}
	return "rlock SUBCOMMAND [flags] NAME"
}

// helpFor prints the usage line of subcommand sub, then the full help, to stdout (for -h).
func helpFor(stdout io.Writer, sub string) {
	fmt.Fprintf(stdout, "Usage: %s\n\n%s", subUsage(sub), usage)
}
