#!/usr/bin/env bash
# Usage: scripts/with-redis.sh COMMAND [ARGS...]
# Starts a throwaway redis-server on a free loopback port, runs COMMAND with REDIS_ADDR set to
# it, and stops the server by PID afterwards, whatever COMMAND did. Exits with COMMAND's status.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/servers.sh
use_server
servers_dir redis

# The server starts as the Go tests start theirs (internal/redistest's StartServer: a free port
# below the ephemeral range, another one if it cannot bind, its command line recorded in its
# directory for tests that restart it); it runs until stop, here, kills it by its PID.
if ! out=$("${GO:-go}" run ./internal/redistest/cmd/redis-start -dir "$dir/redis"); then
  tail -n 5 "$dir/redis/redis.log" >&2 || true
  exit 1
fi
read -r port pid <<<"$out"
pids+=("$pid")

export REDIS_ADDR="127.0.0.1:$port"
export RLOCK_TEST_THROWAWAY=1 # tests may run DEBUG SLEEP, SCRIPT FLUSH and CLIENT KILL on it
echo "redis-server $(server_version) pid $pid at $REDIS_ADDR" >&2
set +e
"$@"
status=$?
set -e
exit "$status"
