#!/usr/bin/env bash
# Usage: scripts/with-redis.sh COMMAND [ARGS...]
# Starts a throwaway redis-server on a free loopback port, runs COMMAND with REDIS_ADDR set to
# it, and stops the server by PID afterwards, whatever COMMAND did. Exits with COMMAND's status.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-redis.sh

free_port() {
  local p
  for _ in $(seq 1 200); do
    p=$((20000 + RANDOM % 30000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  echo "no free port found" >&2
  return 1
}

port=$(free_port)
dir=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
  --enable-debug-command yes --dir "$dir" --logfile "$dir/redis.log" &
pid=$!
stop() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -rf "$dir"
}
trap stop EXIT INT TERM

for _ in $(seq 1 100); do
  if redis-cli -p "$port" ping >/dev/null 2>&1; then break; fi
  sleep 0.05
done
redis-cli -p "$port" ping >/dev/null

export REDIS_ADDR="127.0.0.1:$port"
export RLOCK_TEST_THROWAWAY=1 # tests may run DEBUG SLEEP, SCRIPT FLUSH and CLIENT KILL on it
echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') pid $pid at $REDIS_ADDR" >&2
set +e
"$@"
status=$?
set -e
exit "$status"
