package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// statusScript reads everything status shows in one step, so the parts agree: the lock hash,
// its lease, the fair queue, the waiters' deadlines, and the server's clock (deadlines are
// server time). The library has no API for listing holders; this reads the keys that the
// README's "Keys" section documents.
// KEYS[1] lock hash, KEYS[2] fair queue, KEYS[3] fair deadlines.
// Returns {HGETALL, PTTL, LRANGE queue, ZRANGE deadlines WITHSCORES, TIME}.
const statusScript = `
return {
  redis.call('hgetall', KEYS[1]),
  redis.call('pttl', KEYS[1]),
  redis.call('lrange', KEYS[2], 0, -1),
  redis.call('zrange', KEYS[3], 0, -1, 'withscores'),
  redis.call('time'),
}`

// lockState is what status reads about one lock.
type lockState struct {
	holders []holder      // owners holding it, in the order Redis lists them
	pttl    time.Duration // lease left; -1: the key has no expiry; -2: no key
	queue   []waiter      // fair waiters in arrival order
}

// holder is an owner of the lock and its hold count.
type holder struct {
	owner string
	count int64
}

// waiter is a queued fair waiter and the time left until its deadline (server time); ok is
// false for an entry without a deadline, which the next acquisition purges.
type waiter struct {
	owner string
	left  time.Duration
	ok    bool
}

// runStatus is "rlock status": it prints who holds the lock NAME and returns 0 if it is held,
// 1 if it is free, 2 on errors.
func runStatus(args []string, env []string, stdout, stderr io.Writer) int {
	var f redisFlags
	fs := newFlagSet("status")
	f.register(fs)
	pos, rest, err := parseArgs(fs, args, 1)
	if errors.Is(err, flag.ErrHelp) {
		helpFor(stdout, "status")
		return 0
	}
	if err == nil {
		err = oneName(fs, pos, rest)
	}
	var opt rueidis.ClientOption
	if err == nil {
		opt, err = f.clientOption(fs, env)
	}
	if err != nil {
		return usageFailed(stderr, err)
	}
	name := pos[0]
	s, code := open(opt, &f, stderr, exitError)
	if s == nil {
		return code
	}
	defer s.close()
	st, err := readState(s.rc, f.keyPrefix(), name)
	if err != nil {
		fmt.Fprintf(stderr, "rlock: status of lock %q: %v\n", name, err)
		return exitError
	}
	st.print(stdout, name, lockKey(f.keyPrefix(), name), f.fair)
	if len(st.holders) > 0 {
		return exitHeld
	}
	return exitFree
}

// oneName checks that the command line gave exactly one NAME, and that the library would
// accept it as a lock name.
func oneName(fs *flag.FlagSet, pos, rest []string) error {
	switch {
	case len(pos) == 0:
		return usagef("%s: missing NAME", fs.Name())
	case len(rest) > 0:
		return usagef("%s: unexpected arguments after NAME %q: %q", fs.Name(), pos[0], rest)
	case pos[0] == "":
		return usagef("%s: empty NAME", fs.Name())
	case strings.HasPrefix(pos[0], "}"): // the library's rule: P:{}...} would have no hash tag
		return usagef("%s: NAME %q starts with '}'", fs.Name(), pos[0])
	}
	return nil
}

// lockKey is the Redis key of the lock hash of name, as the library names it.
func lockKey(prefix, name string) string {
	return prefix + ":{" + name + "}"
}

// readState reads the state of the lock name under prefix.
func readState(rc rueidis.Client, prefix, name string) (lockState, error) {
	key := lockKey(prefix, name)
	reply, err := rueidis.NewLuaScriptReadOnly(statusScript).
		Exec(context.Background(), rc, []string{key, key + ":queue", key + ":deadlines"}, nil).ToArray()
	if err != nil {
		if strings.Contains(err.Error(), "WRONGTYPE") {
			return lockState{}, fmt.Errorf("a key of this lock (%s*) holds a value that is not a lock of rlock", key)
		}
		return lockState{}, err
	}
	if len(reply) != 5 {
		return lockState{}, fmt.Errorf("unexpected reply of %d elements", len(reply))
	}
	hash, err1 := reply[0].AsStrSlice()
	pttl, err2 := reply[1].AsInt64()
	queue, err3 := reply[2].AsStrSlice()
	deadlines, err4 := reply[3].AsStrSlice()
	now, err5 := reply[4].AsStrSlice()
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
		return lockState{}, fmt.Errorf("unexpected reply: %w", err)
	}
	st := lockState{pttl: time.Duration(pttl) * time.Millisecond}
	if pttl < 0 {
		st.pttl = time.Duration(pttl)
	}
	for i := 0; i+1 < len(hash); i += 2 {
		owner, count := hash[i], hash[i+1]
		if strings.HasPrefix(owner, "\x00") {
			continue // the library's record of a request, not an owner
		}
		n, err := strconv.ParseInt(count, 10, 64)
		if err != nil {
			return lockState{}, fmt.Errorf("hold count %q of owner %q is not a number", count, owner)
		}
		st.holders = append(st.holders, holder{owner, n})
	}
	nowMs, err := serverMillis(now)
	if err != nil {
		return lockState{}, err
	}
	deadline := make(map[string]int64, len(deadlines)/2)
	for i := 0; i+1 < len(deadlines); i += 2 {
		ms, err := strconv.ParseFloat(deadlines[i+1], 64)
		if err != nil {
			return lockState{}, fmt.Errorf("deadline %q of waiter %q is not a number", deadlines[i+1], deadlines[i])
		}
		deadline[deadlines[i]] = int64(ms)
	}
	for _, owner := range queue {
		d, ok := deadline[owner]
		st.queue = append(st.queue, waiter{owner: owner, left: time.Duration(d-nowMs) * time.Millisecond, ok: ok})
	}
	return st, nil
}

// serverMillis converts the reply of TIME (seconds, microseconds) to milliseconds.
func serverMillis(t []string) (int64, error) {
	if len(t) != 2 {
		return 0, fmt.Errorf("unexpected TIME reply %q", t)
	}
	sec, err1 := strconv.ParseInt(t[0], 10, 64)
	usec, err2 := strconv.ParseInt(t[1], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("unexpected TIME reply %q", t)
	}
	return sec*1000 + usec/1000, nil
}

// print writes st for the lock name (Redis key key); fair adds the queue.
//
//	nightly: held (key rlock:{nightly}), lease 29.874s left
//	holder 3kq8f0b2c1d9e1: 1 hold
//	queue: 1 waiting
//	  1. owner-b, deadline in 4.985s
func (st lockState) print(w io.Writer, name, key string, fair bool) {
	switch {
	case len(st.holders) == 0:
		fmt.Fprintf(w, "%s: free (key %s)\n", name, key)
	case st.pttl == -1:
		fmt.Fprintf(w, "%s: held (key %s), no lease: the key has no expiry\n", name, key)
	default:
		fmt.Fprintf(w, "%s: held (key %s), lease %v left\n", name, key, max(st.pttl, 0))
	}
	for _, h := range st.holders {
		holds := "holds"
		if h.count == 1 {
			holds = "hold"
		}
		fmt.Fprintf(w, "holder %s: %d %s\n", h.owner, h.count, holds)
	}
	if !fair {
		return
	}
	if len(st.queue) == 0 {
		fmt.Fprintln(w, "queue: empty")
		return
	}
	fmt.Fprintf(w, "queue: %d waiting\n", len(st.queue))
	for i, q := range st.queue {
		switch {
		case !q.ok:
			fmt.Fprintf(w, "  %d. %s, no deadline (dead: purged by the next attempt)\n", i+1, q.owner)
		case q.left < 0:
			fmt.Fprintf(w, "  %d. %s, deadline passed %v ago (dead: purged by the next attempt)\n", i+1, q.owner, -q.left)
		default:
			fmt.Fprintf(w, "  %d. %s, deadline in %v\n", i+1, q.owner, q.left)
		}
	}
}
