#!/usr/bin/env bash
# Usage: scripts/with-cluster.sh COMMAND [ARGS...]
# Starts a throwaway Redis Cluster of 3 masters and 3 replicas (one replica per master) on free
# loopback ports in a temp dir, waits until every node says cluster_state:ok, knows all six
# nodes in their roles and every replica is in sync, runs COMMAND with
#   REDIS_CLUSTER_ADDRS  comma-separated host:port of all six nodes (masters first)
#   RLOCK_TEST_THROWAWAY 1 unless REDIS_ADDR is set (tests may disturb every client)
# set, and stops every server by PID afterwards, whatever COMMAND did. Exits with COMMAND's
# status. It composes with the others: scripts/with-redis.sh scripts/with-cluster.sh CMD sets
# REDIS_ADDR too.
#
# CLUSTER_NODE_TIMEOUT (ms, default 5000) is cluster-node-timeout: how long a master must be
# unreachable before its replica takes over. Keep it well above any DEBUG SLEEP a test runs.
set -euo pipefail
cd "$(dirname "$0")/.."

node_timeout=${CLUSTER_NODE_TIMEOUT:-5000}
nodes=6 # 3 masters + 3 replicas

. scripts/servers.sh
use_server
servers_dir cluster

started=$(date +%s%N)

# Each node is a cluster-enabled redis-server in $dir/nodeN, with a cluster bus port of its own
# (see start_server). Two settings are for start-up only and are reset once the cluster is
# ready: a node timeout of 1s makes the nodes gossip often enough to agree on every node's role
# within about a second (CLUSTER_NODE_TIMEOUT is set then), and a replica ping period of 1s
# moves the replication offsets off 0 at once: CLUSTER SLOTS, where clients learn the topology,
# leaves out replicas whose offset is 0, which on an idle cluster lasts until the first ping
# (10s by default).
ports=()
for i in $(seq 1 "$nodes"); do
  d="$dir/node$i"
  start_server "$d" -cluster-bus -- --cluster-enabled yes --cluster-config-file "$d/nodes.conf" \
    --cluster-node-timeout 1000 --repl-ping-replica-period 1 \
    --repl-diskless-sync yes --repl-diskless-sync-delay 0
  ports+=("$port")
done

addrs=()
for p in "${ports[@]}"; do addrs+=("127.0.0.1:$p"); done

# redis-cli picks 3 masters and gives each a replica; with every node on one host it cannot spread
# them over hosts, and says so.
if ! redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes \
  >"$dir/create.log" 2>&1; then
  cat "$dir/create.log" >&2
  exit 1
fi

# ready: every node has cluster_state:ok, all 16384 slots, knows 6 nodes of which 3 masters and
# 3 replicas with no node in handshake or failing, and lists all 6 in CLUSTER SLOTS; every
# master has its replica online and every replica has its link up with no sync in progress.
ready() {
  local p info nodes_out
  for p in "${ports[@]}"; do
    info=$(redis-cli -p "$p" cluster info 2>/dev/null) || return 1
    case "$info" in *cluster_state:ok*) ;; *) return 1 ;; esac
    case "$info" in *cluster_slots_ok:16384*) ;; *) return 1 ;; esac
    case "$info" in *cluster_known_nodes:6*) ;; *) return 1 ;; esac
    nodes_out=$(redis-cli -p "$p" cluster nodes 2>/dev/null) || return 1
    case "$nodes_out" in *handshake* | *fail* | *noaddr*) return 1 ;; esac
    [ "$(grep -c ' master ' <<<"${nodes_out//,/ }")" = 3 ] || return 1
    [ "$(grep -c ' slave ' <<<"${nodes_out//,/ }")" = 3 ] || return 1
    [ "$(redis-cli -p "$p" cluster slots 2>/dev/null | grep -cE '^[0-9a-f]{40}$')" = 6 ] || return 1
    info=$(redis-cli -p "$p" info replication 2>/dev/null) || return 1
    case "$info" in
    *role:master*)
      case "$info" in *connected_slaves:1*state=online*) ;; *) return 1 ;; esac
      ;;
    *role:slave*)
      case "$info" in *master_link_status:up*master_sync_in_progress:0*) ;; *) return 1 ;; esac
      ;;
    *) return 1 ;;
    esac
  done
}
ok=0
for _ in $(seq 1 400); do # up to 20s
  if ready; then
    ok=1
    break
  fi
  sleep 0.05
done
if [ "$ok" != 1 ]; then
  echo "the cluster did not become ready in 20s:" >&2
  for p in "${ports[@]}"; do
    echo "--- 127.0.0.1:$p" >&2
    redis-cli -p "$p" cluster info 2>&1 | grep -E 'cluster_state|known_nodes|slots_ok' >&2 || true
    redis-cli -p "$p" cluster nodes >&2 || true
    redis-cli -p "$p" info replication 2>&1 | grep -E '^(role|connected_slaves|master_link_status|master_sync_in_progress)' >&2 || true
  done
  exit 1
fi

for p in "${ports[@]}"; do
  redis-cli -p "$p" config set cluster-node-timeout "$node_timeout" repl-ping-replica-period 10 >/dev/null
done
ms=$((($(date +%s%N) - started) / 1000000))
# Masters first, then replicas, in the roles they have now.
masters=() replicas=()
for p in "${ports[@]}"; do
  if redis-cli -p "$p" info replication | grep -q '^role:master'; then
    masters+=("127.0.0.1:$p")
  else
    replicas+=("127.0.0.1:$p")
  fi
done
addrs=("${masters[@]}" "${replicas[@]}")
REDIS_CLUSTER_ADDRS=$(
  IFS=,
  echo "${addrs[*]}"
)
export REDIS_CLUSTER_ADDRS
# Tests may disturb every client of these servers (DEBUG SLEEP, SCRIPT FLUSH, CLIENT KILL,
# failovers). RLOCK_TEST_THROWAWAY also speaks for REDIS_ADDR, so it is left alone when that is
# set (scripts/with-redis.sh sets both); unset, the tests start a throwaway server themselves.
if [ -z "${REDIS_ADDR:-}" ]; then export RLOCK_TEST_THROWAWAY=1; fi
echo "redis cluster $(server_version) at $REDIS_CLUSTER_ADDRS" \
  "(pids ${pids[*]}), ready in ${ms}ms" >&2
set +e
"$@"
status=$?
set -e
exit "$status"
