package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/rlock-go/rlock"
)

// runLeader is "rlock leader": it prints who leads the election NAME and returns 0 if somebody
// leads, 1 if nobody does, 2 on errors. With --watch it prints the leadership, then every
// change (Election.Observe), one line each, until SIGINT or SIGTERM, and returns 0.
func runLeader(args []string, env []string, stdout, stderr io.Writer) int {
	var watch *bool
	s, _, name, code := startNamed("leader", args, env, stdout, stderr, func(fs *flag.FlagSet) {
		watch = fs.Bool("watch", false, "print every change until interrupted")
	}, nil)
	if s == nil {
		return code
	}
	defer s.close()
	el := s.locks.NewElection(name)
	if !*watch {
		l, err := el.Leader(context.Background())
		if err != nil {
			fmt.Fprintf(stderr, "rlock: leader: %s\n", errorText(err))
			return exitError
		}
		fmt.Fprintln(stdout, leadership(name, l))
		if l.Term == 0 {
			return exitFree
		}
		return exitHeld
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for l := range el.Observe(ctx) {
		fmt.Fprintf(stdout, "%s %s\n", time.Now().Format("15:04:05.000"), leadership(name, l))
	}
	return 0
}

// leadership is the line that describes l, the leadership of the election name:
//
//	scheduler: led by "10.0.0.7:8080", term 1767225600123, lease 29.874s left
//	scheduler: no leader
func leadership(name string, l rlock.Leadership) string {
	switch {
	case l.Term == 0:
		return name + ": no leader"
	case l.Lease < 0:
		return fmt.Sprintf("%s: led by %s, term %d, no lease: the key has no expiry", name, strconv.Quote(l.Value), l.Term)
	}
	return fmt.Sprintf("%s: led by %s, term %d, lease %v left", name, strconv.Quote(l.Value), l.Term, l.Lease)
}
