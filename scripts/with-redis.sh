#!/usr/bin/env bash
# Usage: scripts/with-redis.sh COMMAND [ARGS...]
# Starts a throwaway redis-server on a free loopback port, runs COMMAND with REDIS_ADDR set to
# it, and stops the server by PID afterwards, whatever COMMAND did. Exits with COMMAND's status.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/servers.sh
use_server
servers_dir redis

# A port can be taken between free_port and the bind: start again elsewhere, up to 5 times.
for attempt in 1 2 3 4 5; do
  port=$(free_port)
  taken="$taken$port "
  mkdir -p "$dir/$port"
  run_server "$dir/$port" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --enable-debug-command yes
  pid=$!
  up=0
  for _ in $(seq 1 100); do
    if redis-cli -p "$port" ping >/dev/null 2>&1; then
      up=1
      break
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  [ "$up" = 1 ] && break
  echo "redis-server on port $port did not start (attempt $attempt):" >&2
  tail -n 5 "$dir/$port/redis.log" >&2 || true
  [ "$attempt" = 5 ] && exit 1
done

export REDIS_ADDR="127.0.0.1:$port"
export RLOCK_TEST_THROWAWAY=1 # tests may run DEBUG SLEEP, SCRIPT FLUSH and CLIENT KILL on it
echo "redis-server $(server_version) pid $pid at $REDIS_ADDR" >&2
set +e
"$@"
status=$?
set -e
exit "$status"
