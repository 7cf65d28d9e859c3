# servers.sh, sourced by the scripts/with-*.sh: which server to run, free loopback ports, a temp
# dir for the servers, and stopping every process whose PID is in pids when the script exits.

# use_server [sentinel]: puts the server that RLOCK_SERVER names first on PATH (exported, so that
# tests and tools starting redis-server or redis-cli by name get the same one):
#   unset, system or redis-7.0  redis-server on PATH, Debian 12's 7.0 installed if missing
#   redis-8.0, valkey-8.1       fetched once into a cache by scripts/fetch-server.sh
#   a directory                 its redis-server, redis-sentinel and redis-cli
# With sentinel, redis-sentinel is needed too.
use_server() {
  local d f
  case "${RLOCK_SERVER:-}" in
  "" | system | redis-7.0)
    if [ "${1:-}" = sentinel ]; then scripts/ensure-sentinel.sh; else scripts/ensure-redis.sh; fi
    return
    ;;
  */*) d=$RLOCK_SERVER ;;
  *) d=$(scripts/fetch-server.sh "$RLOCK_SERVER") ;;
  esac
  for f in redis-server redis-cli ${1:+redis-sentinel}; do
    if [ ! -x "$d/$f" ]; then
      echo "RLOCK_SERVER=$RLOCK_SERVER: no $f in $d" >&2
      return 1
    fi
  done
  PATH="$(cd "$d" && pwd):$PATH"
  export PATH
}

# server_version prints the server's name and version, e.g. "Valkey 8.1.1".
server_version() {
  redis-server --version | sed 's/^\([A-Za-z]*\) server v=\([^ ]*\).*/\1 \2/'
}

# free_port prints a loopback port that nothing listens on and that is not in $taken. Ports
# come from below Linux's default ephemeral range (32768-60999), where outgoing connections of
# other programs would make a bind fail; a server that cannot bind is started again elsewhere.
# RLOCK_PORTS (LOW-HIGH, default 20000-32767) narrows them, as for the Go tests' servers.
taken=" "
free_port() {
  local p lo=20000 hi=32767
  if [ -n "${RLOCK_PORTS:-}" ]; then lo=${RLOCK_PORTS%-*} hi=${RLOCK_PORTS#*-}; fi
  for _ in $(seq 1 200); do
    p=$((lo + RANDOM % (hi - lo + 1)))
    case "$taken" in *" $p "*) continue ;; esac
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  echo "no free port found" >&2
  return 1
}

# servers_dir NAME makes the temp dir $dir (removed on exit) and sets the traps that stop
# every process in pids, and every server that a test started again (see start_server).
pids=()
servers_dir() {
  dir=$(mktemp -d "${TMPDIR:-/tmp}/rlock-$1.XXXXXX")
  trap stop EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# start_server D [-cluster-bus] [-- ARGS...]: starts a throwaway redis-server in directory D
# as the Go tests start theirs (internal/redistest's StartServer, through its command
# redis-start: a free port below the ephemeral range, another one if it cannot bind, persistence
# off, DEBUG allowed, log, pidfile and command line in D, so that a test that killed it can
# start it again as it was). Sets $port and adds its PID to pids; on failure prints the end of
# its log and returns 1.
start_server() {
  local d=$1 out
  shift
  if ! out=$("${GO:-go}" run ./internal/redistest/cmd/redis-start -dir "$d" "$@"); then
    tail -n 5 "$d/redis.log" >&2 || true
    return 1
  fi
  read -r port pid <<<"$out"
  pids+=("$pid")
}

stop() {
  local pid f
  for f in "$dir"/*/redis.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    # A server a test started again, if that PID still runs in the server's directory (a PID
    # may be reused).
    if [ "/proc/$pid/cwd" -ef "${f%/redis.pid}" ]; then
      case " ${pids[*]} " in *" $pid "*) ;; *) pids+=("$pid") ;; esac
    fi
  done
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for _ in $(seq 1 100); do # up to 5s for a clean exit, then SIGKILL
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.05
  done
  for pid in "${pids[@]}"; do
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$dir"
}
