# servers.sh, sourced by with-cluster.sh and with-sentinel.sh: free loopback ports, a temp dir
# for the servers, and stopping every process whose PID is in pids when the script exits.

# free_port prints a loopback port that nothing listens on and that is not in $taken. Ports
# come from below Linux's default ephemeral range (32768-60999), where outgoing connections of
# other programs would make a bind fail; a server that cannot bind is started again elsewhere.
taken=" "
free_port() {
  local p
  for _ in $(seq 1 200); do
    p=$((20000 + RANDOM % 12768))
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
# every process in pids.
pids=()
servers_dir() {
  dir=$(mktemp -d "${TMPDIR:-/tmp}/rlock-$1.XXXXXX")
  trap stop EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}
stop() {
  local pid
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
