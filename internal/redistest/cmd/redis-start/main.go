// Command redis-start starts a throwaway redis-server the way the Go tests start theirs
// (redistest.StartServer: a free port below the ephemeral range, tried again elsewhere when it
// cannot bind, persistence off, DEBUG allowed, its log, pidfile and command line in its
// directory), prints "PORT PID" and exits, leaving the server running. scripts/with-redis.sh,
// with-cluster.sh and with-sentinel.sh start their data nodes with it, and stop them by PID.
// Arguments after the flags go to redis-server; -cluster-bus gives the node a free cluster bus
// port of its own.
//
//	go run ./internal/redistest/cmd/redis-start -dir DIR [-cluster-bus] [-- SERVER-ARGS...]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/rlock-go/rlock/internal/redistest"
)

func main() {
	dir := flag.String("dir", "", "the server's working directory (made if missing)")
	bus := flag.Bool("cluster-bus", false, "give the server a free cluster bus port (--cluster-port)")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "redis-start: -dir is required")
		os.Exit(2)
	}
	s, err := redistest.StartServer(redistest.ServerOptions{Dir: *dir, ClusterBus: *bus,
		Args: append(redistest.TestArgs(*dir), flag.Args()...)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "redis-start:", err)
		os.Exit(1)
	}
	fmt.Println(s.Port, s.PID())
}
