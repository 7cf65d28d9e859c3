package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// statusScript reads everything status shows in one step, so the parts agree: the lock hash,
// its expiry, the queue and its deadlines (fair mutex, fair read-write mutex, semaphore), the
// leases of a read-write mutex's or a semaphore's holds, a read-write mutex's waiting
// writers, and the server's clock (leases and deadlines are server time). The library has no
// API for listing holders; this reads the keys that its README's "Keys" section documents.
// KEYS[1] lock hash, KEYS[2] queue, KEYS[3] deadlines, KEYS[4] leases, KEYS[5] writers.
// Returns {HGETALL, PTTL, LRANGE queue, ZRANGE deadlines WITHSCORES, TIME,
// ZRANGE leases WITHSCORES, ZRANGE writers WITHSCORES}.
const statusScript = `
return {
  redis.call('hgetall', KEYS[1]),
  redis.call('pttl', KEYS[1]),
  redis.call('lrange', KEYS[2], 0, -1),
  redis.call('zrange', KEYS[3], 0, -1, 'withscores'),
  redis.call('time'),
  redis.call('zrange', KEYS[4], 0, -1, 'withscores'),
  redis.call('zrange', KEYS[5], 0, -1, 'withscores'),
}`

// The kinds of lock that status, unlock and exec tell apart by their keys; lockNone when
// there are none (a free lock of any kind).
const (
	lockNone      = ""
	lockMutex     = "mutex"
	lockRW        = "read-write lock"
	lockSemaphore = "semaphore"
)

// lockState is what status reads about one lock.
type lockState struct {
	kind    string        // lockNone, lockMutex, lockRW or lockSemaphore, from the keys (detectKind)
	holders []holder      // holds, in the order Redis lists them
	pttl    time.Duration // expiry of the lock hash; -1: the key has no expiry; -2: no key
	queue   []waiter      // queued waiters in arrival order (fair kinds, semaphore)
	writers []waiter      // a read-write mutex's waiting writers (writer preference)
	permits int64         // semaphore: its permits; 0 when not stored
	inUse   int64         // semaphore: permits out
}

// holder is one hold of the lock: an owner of a mutex and its hold count, an owner's read
// or write holds of a read-write mutex, or a semaphore hold and its permits. A read-write
// mutex's and a semaphore's holds have a lease each (server time); a mutex's lease is the
// hash's expiry.
type holder struct {
	owner   string // owner id; semaphore: the hold's id
	mode    string // read-write mutex: "reader" or "writer"; else ""
	count   int64  // holds; semaphore: permits
	lease   time.Duration
	leaseOK bool
}

// waiter is a queued waiter and the time left until its deadline (server time); ok is false
// for an entry without a deadline, which the next acquisition purges. mode is "read" or
// "write" in a fair read-write mutex's queue.
type waiter struct {
	owner string
	mode  string
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

// Fields of the hash that are no owners: replay records (NUL) and a kind's own fields (\x01).
const (
	fieldRecord   = "\x00"
	fieldInternal = "\x01"
	fieldPermits  = "\x01p" // semaphore: permits
	fieldInUse    = "\x01u" // semaphore: permits out
	fieldWriter   = "\x01w" // read-write mutex: the writing owner
)

// readState reads the state of the lock name under prefix.
func readState(rc rueidis.Client, prefix, name string) (lockState, error) {
	key := lockKey(prefix, name)
	reply, err := rueidis.NewLuaScriptReadOnly(statusScript).Exec(context.Background(), rc,
		[]string{key, key + ":queue", key + ":deadlines", key + ":leases", key + ":writers"}, nil).ToArray()
	if err != nil {
		if strings.Contains(err.Error(), "WRONGTYPE") {
			return lockState{}, fmt.Errorf("a key of this lock (%s*) holds a value that is not a lock of rlock", key)
		}
		return lockState{}, err
	}
	if len(reply) != 7 {
		return lockState{}, fmt.Errorf("unexpected reply of %d elements", len(reply))
	}
	hash, err1 := reply[0].AsStrSlice()
	pttl, err2 := reply[1].AsInt64()
	queue, err3 := reply[2].AsStrSlice()
	deadlines, err4 := reply[3].AsStrSlice()
	now, err5 := reply[4].AsStrSlice()
	leases, err6 := reply[5].AsStrSlice()
	writers, err7 := reply[6].AsStrSlice()
	if err := errors.Join(err1, err2, err3, err4, err5, err6, err7); err != nil {
		return lockState{}, fmt.Errorf("unexpected reply: %w", err)
	}
	nowMs, err := serverMillis(now)
	if err != nil {
		return lockState{}, err
	}
	fields := make(map[string]string, len(hash)/2)
	for i := 0; i+1 < len(hash); i += 2 {
		fields[hash[i]] = hash[i+1]
	}
	st := lockState{kind: detectKind(fields, len(leases) > 0 || len(writers) > 0), pttl: time.Duration(pttl) * time.Millisecond}
	if pttl < 0 {
		st.pttl = time.Duration(pttl)
	}
	left, err := scores(leases, nowMs, "lease")
	if err != nil {
		return lockState{}, err
	}
	for i := 0; i+1 < len(hash); i += 2 {
		field, count := hash[i], hash[i+1]
		if strings.HasPrefix(field, fieldRecord) || strings.HasPrefix(field, fieldInternal) {
			continue // the library's record of a request, or a field of its own
		}
		n, err := strconv.ParseInt(count, 10, 64)
		if err != nil {
			return lockState{}, fmt.Errorf("hold count %q of %q is not a number", count, field)
		}
		h := holder{owner: field, count: n}
		switch st.kind {
		case lockRW:
			mode, owner, ok := strings.Cut(field, ":")
			if !ok || (mode != "r" && mode != "w") {
				return lockState{}, fmt.Errorf("field %q of a read-write lock is not r:OWNER nor w:OWNER", field)
			}
			h.owner, h.mode = owner, map[string]string{"r": "reader", "w": "writer"}[mode]
			h.lease, h.leaseOK = left[field]
		case lockSemaphore:
			h.lease, h.leaseOK = left[field]
		}
		st.holders = append(st.holders, h)
	}
	// Writers first, then readers; Redis lists a hash's fields in no particular order.
	slices.SortStableFunc(st.holders, func(a, b holder) int { return strings.Compare(b.mode, a.mode) })
	if st.kind == lockSemaphore {
		st.permits, _ = strconv.ParseInt(fields[fieldPermits], 10, 64)
		st.inUse, _ = strconv.ParseInt(fields[fieldInUse], 10, 64)
	}

	deadline, err := scores(deadlines, nowMs, "deadline")
	if err != nil {
		return lockState{}, err
	}
	for _, entry := range queue {
		d, ok := deadline[entry]
		// An entry is the waiter's address, then (NUL-separated) its request and what a grant
		// gives it (see the README's "Keys").
		addr, _, _ := strings.Cut(entry, "\x00")
		w := waiter{owner: addr, left: d, ok: ok}
		if st.kind == lockRW {
			if mode, owner, ok := strings.Cut(addr, ":"); ok && (mode == "r" || mode == "w") {
				w.owner, w.mode = owner, map[string]string{"r": "read", "w": "write"}[mode]
			}
		}
		st.queue = append(st.queue, w)
	}
	for i := 0; i+1 < len(writers); i += 2 {
		d, err := strconv.ParseFloat(writers[i+1], 64)
		if err != nil {
			return lockState{}, fmt.Errorf("deadline %q of writer %q is not a number", writers[i+1], writers[i])
		}
		st.writers = append(st.writers, waiter{owner: writers[i], left: time.Duration(int64(d)-nowMs) * time.Millisecond, ok: true})
	}
	return st, nil
}

// detectKind tells the kind of a lock from its hash's fields and whether it has per-hold
// leases or waiting writers: a semaphore stores its permits in the hash; a read-write mutex
// keeps a lease per hold (and its waiting writers) in sorted sets of their own, which a mutex,
// whose lease is its hash's expiry, does not have. A lock with neither (a free lock of any
// kind) is lockNone.
func detectKind(fields map[string]string, perHold bool) string {
	if len(fields) == 0 && !perHold {
		return lockNone
	}
	if _, ok := fields[fieldPermits]; ok {
		return lockSemaphore
	}
	if _, ok := fields[fieldInUse]; ok {
		return lockSemaphore
	}
	if _, ok := fields[fieldWriter]; ok || perHold {
		return lockRW
	}
	return lockMutex
}

// scores reads a ZRANGE WITHSCORES reply of members and server-time deadlines (ms) into the
// time left to each, as of the server time nowMs.
func scores(reply []string, nowMs int64, what string) (map[string]time.Duration, error) {
	left := make(map[string]time.Duration, len(reply)/2)
	for i := 0; i+1 < len(reply); i += 2 {
		ms, err := strconv.ParseFloat(reply[i+1], 64)
		if err != nil {
			return nil, fmt.Errorf("%s %q of %q is not a number", what, reply[i+1], reply[i])
		}
		left[reply[i]] = time.Duration(int64(ms)-nowMs) * time.Millisecond
	}
	return left, nil
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

// print writes st for the lock name (Redis key key); fair adds "queue: empty" when nobody
// queues (a queue with waiters is always shown).
//
//	nightly: held (key rlock:{nightly}), lease 29.874s left
//	holder 3kq8f0b2c1d9e1: 1 hold
//	queue: 1 waiting
//	  1. owner-b, deadline in 4.985s
//
//	config: read-write lock held for reading by 2 owners (key rlock:{config})
//	reader web-1: 1 hold, lease 29.874s left
//	reader web-2: 1 hold, lease 29.5s left
//	writers waiting: 1
//	  1. deployer, deadline in 4.985s
//
//	pool: semaphore, 2 of 4 permits out (key rlock:{pool})
//	hold 5f0c2a...: 1 permit, lease 29.874s left
//	hold 9e1b7d...: 1 permit, lease 12.1s left
func (st lockState) print(w io.Writer, name, key string, fair bool) {
	switch {
	case len(st.holders) == 0:
		fmt.Fprintf(w, "%s: free (key %s)\n", name, key)
	case st.kind == lockRW:
		owners := map[string]bool{}
		writing := false
		for _, h := range st.holders {
			owners[h.owner] = true
			writing = writing || h.mode == "writer"
		}
		if writing {
			fmt.Fprintf(w, "%s: read-write lock held for writing (key %s)\n", name, key)
		} else {
			fmt.Fprintf(w, "%s: read-write lock held for reading by %d %s (key %s)\n", name, len(owners),
				plural(int64(len(owners)), "owner", "owners"), key)
		}
	case st.kind == lockSemaphore:
		out := st.inUse
		if out == 0 {
			for _, h := range st.holders {
				out += h.count
			}
		}
		fmt.Fprintf(w, "%s: semaphore, %d of %d permits out (key %s)\n", name, out, st.permits, key)
	case st.pttl == -1:
		fmt.Fprintf(w, "%s: held (key %s), no lease: the key has no expiry\n", name, key)
	default:
		fmt.Fprintf(w, "%s: held (key %s), lease %v left\n", name, key, max(st.pttl, 0))
	}
	for _, h := range st.holders {
		switch st.kind {
		case lockMutex:
			fmt.Fprintf(w, "holder %s: %d %s\n", h.owner, h.count, plural(h.count, "hold", "holds"))
		case lockRW:
			fmt.Fprintf(w, "%s %s: %d %s, %s\n", h.mode, h.owner, h.count, plural(h.count, "hold", "holds"), leaseLeft(h))
		case lockSemaphore:
			fmt.Fprintf(w, "hold %s: %d %s, %s\n", h.owner, h.count, plural(h.count, "permit", "permits"), leaseLeft(h))
		}
	}
	if len(st.writers) > 0 {
		fmt.Fprintf(w, "writers waiting: %d\n", len(st.writers))
		printWaiters(w, st.writers)
	}
	switch {
	case len(st.queue) > 0:
		fmt.Fprintf(w, "queue: %d waiting\n", len(st.queue))
		printWaiters(w, st.queue)
	case fair:
		fmt.Fprintln(w, "queue: empty")
	}
}

// printWaiters lists waiters, numbered, with the time left to their deadlines.
func printWaiters(w io.Writer, ws []waiter) {
	for i, q := range ws {
		who := q.owner
		if q.mode != "" {
			who += " (" + q.mode + ")"
		}
		switch {
		case !q.ok:
			fmt.Fprintf(w, "  %d. %s, no deadline (dead: purged by the next attempt)\n", i+1, who)
		case q.left < 0:
			fmt.Fprintf(w, "  %d. %s, deadline passed %v ago (dead: purged by the next attempt)\n", i+1, who, -q.left)
		default:
			fmt.Fprintf(w, "  %d. %s, deadline in %v\n", i+1, who, q.left)
		}
	}
}

// leaseLeft describes the lease of a hold that has one of its own.
func leaseLeft(h holder) string {
	switch {
	case !h.leaseOK:
		return "no lease recorded"
	case h.lease < 0:
		return fmt.Sprintf("lease ended %v ago (dead: purged by the next attempt)", -h.lease)
	}
	return fmt.Sprintf("lease %v left", h.lease)
}

// plural returns one for n == 1, else many.
func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
