#!/usr/bin/env bash
# Usage: scripts/with-redis.sh COMMAND [ARGS...]
# Starts a throwaway redis-server on a free loopback port, runs COMMAND with REDIS_ADDR set to
# it, and stops the server by PID afterwards, whatever COMMAND did. Exits with COMMAND's status.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/servers.sh
use_server
servers_dir redis

start_server "$dir/redis"

export REDIS_ADDR="127.0.0.1:$port"
export RLOCK_TEST_THROWAWAY=1 # tests may run DEBUG SLEEP, SCRIPT FLUSH and CLIENT KILL on it
echo "redis-server $(server_version) pid $pid at $REDIS_ADDR" >&2
set +e
"$@"
status=$?
set -e
exit "$status"
