// Command redis-start starts a throwaway redis-server the way the Go tests start theirs
// (redistest.StartServer: a free port below the ephemeral range, tried again elsewhere when it
// cannot bind, persistence off, DEBUG allowed, its log, pidfile and command line in its
// directory), prints "PORT PID" and exits, leaving the server running. scripts/with-redis.sh
// uses it, and stops the server by its PID.
//
//	go run ./internal/redistest/cmd/redis-start -dir DIR
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/rlock-go/rlock/internal/redistest"
)

func main() {
	dir := flag.String("dir", "", "the server's working directory (made if missing)")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "redis-start: -dir is required")
		os.Exit(2)
	}
	s, err := redistest.StartServer(redistest.ServerOptions{Dir: *dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, "redis-start:", err)
		os.Exit(1)
	}
	fmt.Println(s.Port, s.PID())
}
