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

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/wire"
)

// family is what status, unlock and exec tell apart about a lock: its kind, fair or not (a
// fair lock keeps a plain one's keys while nobody queues). Messages name a kind as
// rlock.State.Kind spells it.
type family int

const (
	familyNone      family = iota // Redis holds nothing at the name (a free lock of any kind)
	familyMutex                   // mutex, fair_mutex
	familyRW                      // rw_mutex, fair_rw_mutex
	familySemaphore               // semaphore
	familyElection                // election (while somebody leads it)
)

// familyOf returns the family of a State's Kind (rlock.Client.State tells it from the keys in
// Redis; a fair lock shows as fair only while its queue exists).
func familyOf(kind string) family {
	switch kind {
	case rlock.KindMutex, rlock.KindFairMutex:
		return familyMutex
	case rlock.KindRWMutex, rlock.KindFairRWMutex:
		return familyRW
	case rlock.KindSemaphore:
		return familySemaphore
	case rlock.KindElection:
		return familyElection
	}
	return familyNone
}

// readState reads the state of the lock name, whatever its kind (rlock.Client.State).
func readState(s *session, name string) (rlock.State, error) {
	return s.locks.State(context.Background(), name)
}

// runStatus is "rlock status": it prints who holds the lock NAME and returns 0 if it is held,
// 1 if it is free, 2 on errors.
func runStatus(args []string, env []string, stdout, stderr io.Writer) int {
	s, f, name, code := startNamed("status", args, env, stdout, stderr, nil, nil)
	if s == nil {
		return code
	}
	defer s.close()
	st, err := readState(s, name)
	if err != nil {
		fmt.Fprintf(stderr, "rlock: status: %s\n", errorText(err))
		return exitError
	}
	key := wire.LockKey(f.keyPrefix(), name)
	if st.Kind == rlock.KindElection {
		// Two reads: again if a new term began between them (State's Token is the last term).
		var l rlock.Leadership
		for try := 0; try < 3; try++ {
			if try > 0 {
				if st, err = readState(s, name); err != nil {
					break
				}
			}
			if l, err = s.locks.NewElection(name).Leader(context.Background()); err != nil || l.Term == 0 || l.Term == st.Token {
				break
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "rlock: status: %s\n", errorText(err))
			return exitError
		}
		printElection(stdout, st, l, key)
	} else {
		printState(stdout, st, key, f.fair)
	}
	if len(st.Holders) > 0 {
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
	}
	if err := wire.CheckName(pos[0]); err != nil {
		return usagef("%s: NAME: %v", fs.Name(), err)
	}
	return nil
}

// startNamed parses args of subcommand sub, which takes the Redis flags, those that extra
// registers (may be nil) and one NAME, runs check (may be nil) once they parsed, and connects.
// It returns the session (the caller closes it), its flags and NAME; or a nil session and the
// exit status to return: 0 after --help, exitUsage for a bad command line, exitError when
// Redis cannot be reached.
func startNamed(sub string, args, env []string, stdout, stderr io.Writer, extra func(*flag.FlagSet),
	check func() error) (*session, *redisFlags, string, int) {
	f := new(redisFlags)
	fs := newFlagSet(sub)
	f.register(fs)
	if extra != nil {
		extra(fs)
	}
	pos, rest, err := parseArgs(fs, args, 1)
	if errors.Is(err, flag.ErrHelp) {
		helpFor(stdout, sub)
		return nil, nil, "", 0
	}
	if err == nil {
		err = oneName(fs, pos, rest)
	}
	if err == nil && check != nil {
		err = check()
	}
	var opt rueidis.ClientOption
	if err == nil {
		opt, err = f.clientOption(fs, env)
	}
	if err != nil {
		return nil, nil, "", usageFailed(stderr, err)
	}
	s, code := open(opt, f, stderr, exitError)
	return s, f, pos[0], code
}

// printState writes st for the lock whose hash is the Redis key key; fair adds "queue: empty"
// when nobody queues (a queue with waiters is always shown).
//
//	nightly: fair_mutex held (key rlock:{nightly}), lease 29.874s left
//	holder 3kq8f0b2c1d9e1: 1 hold, label "host-a pid 12", held 3.2s
//	queue: 1 waiting
//	  1. owner-b, deadline in 4.985s, label "host-b pid 7"
//
//	config: rw_mutex held for reading by 2 owners (key rlock:{config})
//	reader web-1: 1 hold, lease 29.874s left
//	reader web-2: 1 hold, lease 29.5s left
//	writers waiting: 1
//	  1. deployer, deadline in 4.985s
//
//	pool: semaphore, 2 of 4 permits out (key rlock:{pool})
//	hold 5f0c2a...: 1 permit, lease 29.874s left
//	hold 9e1b7d...: 1 permit, lease 12.1s left
func printState(w io.Writer, st rlock.State, key string, fair bool) {
	name, kind := st.Name, familyOf(st.Kind)
	// Writers first, then readers, each by owner; Redis lists holds in no particular order.
	holders := slices.Clone(st.Holders)
	slices.SortStableFunc(holders, func(a, b rlock.Holder) int {
		if c := strings.Compare(b.Mode, a.Mode); c != 0 {
			return c
		}
		return strings.Compare(a.Owner, b.Owner)
	})
	switch {
	case len(holders) == 0:
		fmt.Fprintf(w, "%s: free (key %s)\n", name, key)
	case kind == familyRW:
		owners := map[string]bool{}
		writing := false
		for _, h := range holders {
			owners[h.Owner] = true
			writing = writing || h.Mode == "write"
		}
		if writing {
			fmt.Fprintf(w, "%s: %s held for writing (key %s)\n", name, st.Kind, key)
		} else {
			fmt.Fprintf(w, "%s: %s held for reading by %d %s (key %s)\n", name, st.Kind, len(owners),
				plural(int64(len(owners)), "owner", "owners"), key)
		}
	case kind == familySemaphore:
		var out int64
		for _, h := range holders {
			out += int64(h.Count)
		}
		fmt.Fprintf(w, "%s: %s, %d of %d permits out (key %s)\n", name, st.Kind, out, st.Permits, key)
	case holders[0].Lease < 0:
		fmt.Fprintf(w, "%s: %s held (key %s), no lease: the key has no expiry\n", name, st.Kind, key)
	default:
		fmt.Fprintf(w, "%s: %s held (key %s), lease %v left\n", name, st.Kind, key, holders[0].Lease)
	}
	for _, h := range holders {
		n := int64(h.Count)
		switch kind {
		case familyMutex:
			fmt.Fprintf(w, "holder %s: %d %s%s\n", h.Owner, n, plural(n, "hold", "holds"), holderLabel(h))
		case familyRW:
			fmt.Fprintf(w, "%s %s: %d %s, lease %v left%s\n", map[string]string{"write": "writer", "read": "reader"}[h.Mode],
				h.Owner, n, plural(n, "hold", "holds"), h.Lease, holderLabel(h))
		case familySemaphore:
			fmt.Fprintf(w, "hold %s: %d %s, lease %v left%s\n", h.Owner, n, plural(n, "permit", "permits"), h.Lease,
				holderLabel(h))
		}
	}
	switch {
	case len(st.Waiters) > 0 && st.Kind == rlock.KindRWMutex:
		fmt.Fprintf(w, "writers waiting: %d\n", len(st.Waiters))
		printWaiters(w, st.Waiters, false)
	case len(st.Waiters) > 0:
		fmt.Fprintf(w, "queue: %d waiting\n", len(st.Waiters))
		printWaiters(w, st.Waiters, st.Kind == rlock.KindFairRWMutex)
	case fair:
		fmt.Fprintln(w, "queue: empty")
	}
}

// printElection writes st, the state of an election whose hash is the Redis key key, and l,
// its leadership, read just after: the leader (its candidate id), its term, lease and value,
// and the candidates in the order they will lead.
//
//	scheduler: election led by 3kq8f0b2c1d9e1 (key rlock:{scheduler}), term 1767225600123, lease 29.874s left
//	value: "10.0.0.7:8080"
//	candidates: 1 waiting
//	  1. 3kq8f0b2c1d9e2, deadline in 4.985s
func printElection(w io.Writer, st rlock.State, l rlock.Leadership, key string) {
	switch {
	case len(st.Holders) == 0 || l.Term == 0:
		fmt.Fprintf(w, "%s: election, no leader (key %s)\n", st.Name, key)
	case l.Lease < 0:
		fmt.Fprintf(w, "%s: election led by %s (key %s), term %d, no lease: the key has no expiry\n", st.Name,
			st.Holders[0].Owner, key, l.Term)
	default:
		fmt.Fprintf(w, "%s: election led by %s (key %s), term %d, lease %v left\n", st.Name, st.Holders[0].Owner, key,
			l.Term, l.Lease)
	}
	if l.Term != 0 {
		fmt.Fprintf(w, "value: %s\n", strconv.Quote(l.Value))
		if len(st.Holders) > 0 && st.Holders[0].Label != "" {
			fmt.Fprintf(w, "leader%s\n", holderLabel(st.Holders[0]))
		}
	}
	if len(st.Waiters) > 0 {
		fmt.Fprintf(w, "candidates: %d waiting\n", len(st.Waiters))
		printWaiters(w, st.Waiters, false)
	}
}

// printWaiters lists waiters, numbered, with the time left to their deadlines, and their mode
// when modes tells apart readers and writers in one queue.
func printWaiters(w io.Writer, ws []rlock.Waiter, modes bool) {
	for i, q := range ws {
		who := q.Owner
		if modes && q.Mode != "" {
			who += " (" + q.Mode + ")"
		}
		label := ""
		if q.Label != "" {
			label = ", label " + strconv.Quote(q.Label)
		}
		fmt.Fprintf(w, "  %d. %s, deadline in %v%s\n", i+1, who, q.Deadline, label)
	}
}

// holderLabel is what a holder's line says of its label (WithLabel): `, label "L", held D`, or
// nothing for an unlabelled hold.
func holderLabel(h rlock.Holder) string {
	if h.Label == "" {
		return ""
	}
	return fmt.Sprintf(", label %s, held %v", strconv.Quote(h.Label), h.Since)
}

// plural returns one for n == 1, else many.
func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
