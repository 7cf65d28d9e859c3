#!/usr/bin/env bash
# Usage: scripts/with-sentinel.sh COMMAND [ARGS...]
# Starts a throwaway Sentinel deployment on free loopback ports in a temp dir: one primary, two
# replicas of it and three redis-sentinel processes monitoring it with a quorum of 2. Waits until
# both replicas are in sync and every sentinel sees the primary, both replicas and the two other
# sentinels, then runs COMMAND with
#   REDIS_SENTINEL_ADDRS  comma-separated host:port of the three sentinels
#   REDIS_SENTINEL_MASTER the monitored primary's name (rlock)
#   REDIS_SENTINEL_DATA   comma-separated host:port of the data nodes, primary first
#   RLOCK_TEST_THROWAWAY  1 unless REDIS_ADDR is set (tests may disturb every client)
# set, and stops every process by PID afterwards, whatever COMMAND did. Exits with COMMAND's
# status. It composes with the others: scripts/with-redis.sh scripts/with-sentinel.sh CMD sets
# REDIS_ADDR too.
#
# SENTINEL_DOWN_AFTER_MS (default 5000) is down-after-milliseconds: how long the primary must be
# unreachable before the sentinels fail over. Keep it well above any DEBUG SLEEP a test runs.
set -euo pipefail
cd "$(dirname "$0")/.."

master=rlock
quorum=2
down_after=${SENTINEL_DOWN_AFTER_MS:-5000}

. scripts/servers.sh
use_server sentinel
servers_dir sentinel

started=$(date +%s%N)

# start_sentinel: starts one redis-sentinel on a free port, in a directory of its own, retrying
# on another port when it does not answer within 5 seconds (e.g. another process took the port
# meanwhile). Sets $port to the port it answers on. (The data nodes start with start_server.)
start_sentinel() {
  local attempt d pid
  for attempt in 1 2 3 4 5; do
    port=$(free_port)
    taken="$taken$port "
    d="$dir/sentinel-$port"
    mkdir -p "$d"
    # Sentinel rewrites its config file (ids, discovered replicas and sentinels): one per process.
    cat >"$d/sentinel.conf" <<EOF
port $port
bind 127.0.0.1
dir $d
logfile $d/sentinel.log
sentinel monitor $master 127.0.0.1 $primary_port $quorum
sentinel down-after-milliseconds $master $down_after
sentinel failover-timeout $master 10000
sentinel parallel-syncs $master 1
EOF
    redis-sentinel "$d/sentinel.conf" &
    pid=$!
    pids+=("$pid")
    for _ in $(seq 1 100); do
      if redis-cli -p "$port" ping >/dev/null 2>&1; then return 0; fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    echo "redis-sentinel on port $port did not start (attempt $attempt):" >&2
    tail -n 5 "$d"/*.log >&2 || true
  done
  return 1
}

start_server "$dir/primary" -- --repl-diskless-sync yes --repl-diskless-sync-delay 0
primary_port=$port
replica_ports=()
for i in 1 2; do
  start_server "$dir/replica$i" -- --repl-diskless-sync yes --repl-diskless-sync-delay 0 \
    --replicaof 127.0.0.1 "$primary_port"
  replica_ports+=("$port")
done

# wait_for WHAT SECONDS CHECK...: runs CHECK every 50ms until it succeeds.
wait_for() {
  local what=$1 n=$(($2 * 20))
  shift 2
  for _ in $(seq 1 "$n"); do
    if "$@"; then return 0; fi
    sleep 0.05
  done
  echo "$what did not happen in $((n / 20))s" >&2
  return 1
}

# in_sync: the primary has both replicas online and each replica has its link up, synced.
in_sync() {
  local info p
  info=$(redis-cli -p "$primary_port" info replication 2>/dev/null) || return 1
  case "$info" in *connected_slaves:2*state=online*state=online*) ;; *) return 1 ;; esac
  for p in "${replica_ports[@]}"; do
    info=$(redis-cli -p "$p" info replication 2>/dev/null) || return 1
    case "$info" in *master_link_status:up*master_sync_in_progress:0*) ;; *) return 1 ;; esac
  done
}
# Sentinels learn of replicas from the primary's INFO, which they read as soon as they connect;
# start them once the replicas are attached.
if ! wait_for "replication" 20 in_sync; then
  for p in "$primary_port" "${replica_ports[@]}"; do
    redis-cli -p "$p" info replication >&2 || true
  done
  exit 1
fi

sentinel_ports=()
for _ in 1 2 3; do
  start_sentinel
  sentinel_ports+=("$port")
done

# field NAME: the value after NAME in a flat field/value reply read from stdin.
field() {
  awk -v k="$1" 'f { print; exit } $0 == k { f = 1 }'
}
# sentinels_agree: every sentinel sees the primary at its port as master (no other flag), 2
# replicas and 2 other sentinels, and both replicas as healthy replicas with their links up.
sentinels_agree() {
  local s out
  for s in "${sentinel_ports[@]}"; do
    out=$(redis-cli -p "$s" sentinel master "$master" 2>/dev/null) || return 1
    [ "$(field port <<<"$out")" = "$primary_port" ] || return 1
    [ "$(field flags <<<"$out")" = master ] || return 1
    [ "$(field num-slaves <<<"$out")" = 2 ] || return 1
    [ "$(field num-other-sentinels <<<"$out")" = 2 ] || return 1
    out=$(redis-cli -p "$s" sentinel replicas "$master" 2>/dev/null | paste - -) || return 1
    [ "$(grep -c $'^flags\tslave$' <<<"$out")" = 2 ] || return 1
    [ "$(grep -c $'^master-link-status\tok$' <<<"$out")" = 2 ] || return 1
  done
}
if ! wait_for "sentinel discovery" 30 sentinels_agree; then
  for s in "${sentinel_ports[@]}"; do
    echo "--- sentinel 127.0.0.1:$s" >&2
    redis-cli -p "$s" sentinel master "$master" | paste - - | grep -E '^(port|flags|num-slaves|num-other-sentinels)\s' >&2 || true
    redis-cli -p "$s" sentinel replicas "$master" | paste - - | grep -E '^(port|flags|master-link-status)\s' >&2 || true
  done
  exit 1
fi

ms=$((($(date +%s%N) - started) / 1000000))
join() {
  local IFS=,
  echo "$*"
}
REDIS_SENTINEL_ADDRS=$(join "${sentinel_ports[@]/#/127.0.0.1:}")
REDIS_SENTINEL_DATA=$(join "127.0.0.1:$primary_port" "${replica_ports[@]/#/127.0.0.1:}")
export REDIS_SENTINEL_ADDRS REDIS_SENTINEL_DATA
export REDIS_SENTINEL_MASTER=$master
# Tests may disturb every client of these servers (DEBUG SLEEP, SCRIPT FLUSH, CLIENT KILL,
# failovers). RLOCK_TEST_THROWAWAY also speaks for REDIS_ADDR, so it is left alone when that is
# set (scripts/with-redis.sh sets both); unset, the tests start a throwaway server themselves.
if [ -z "${REDIS_ADDR:-}" ]; then export RLOCK_TEST_THROWAWAY=1; fi
echo "redis sentinel $(server_version): primary $master at" \
  "127.0.0.1:$primary_port, replicas ${replica_ports[*]}, sentinels $REDIS_SENTINEL_ADDRS" \
  "(pids ${pids[*]}), ready in ${ms}ms" >&2
set +e
"$@"
status=$?
set -e
exit "$status"
