#!/usr/bin/env bash
# Starts N tierkv-server shards behind twemproxy (nutcracker) on loopback and serves until
# Ctrl-C (or SIGTERM), then stops everything it started.
#
#   scripts/cluster.sh N
#
# Environment:
#   TIERKV_CLUSTER_DIR  where each shard's tiers, the proxy config and logs go
#                       (default ./tierkv-cluster)
#   TIERKV_SERVER       the server binary (default target/release/tierkv-server, built if
#                       missing)
#   BASE_PORT           shard i listens on BASE_PORT+1+i, the proxy on BASE_PORT
#                       (default 7400); the proxy's stats port is BASE_PORT+99
#   SERVER_ARGS         extra tierkv-server flags for every shard (e.g. "--durability sync")
#   CLUSTER_READY_FILE  if set, the proxy address is also written there once it is up
#
# Needs: nutcracker (Debian package nutcracker).
set -euo pipefail

n="${1:-}"
if ! [[ "$n" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: $0 N   (N >= 1 tierkv-server shards behind nutcracker)" >&2
    exit 2
fi
command -v nutcracker >/dev/null || { echo "nutcracker is not installed (apt-get install nutcracker)" >&2; exit 1; }

root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$(mkdir -p "${TIERKV_CLUSTER_DIR:-./tierkv-cluster}" && cd "${TIERKV_CLUSTER_DIR:-./tierkv-cluster}" && pwd)"
server="${TIERKV_SERVER:-$root/target/release/tierkv-server}"
base="${BASE_PORT:-7400}"
if [ ! -x "$server" ]; then
    (cd "$root" && cargo build --release -p tierkv-server)
fi

pids=()
stop() {
    trap - EXIT INT TERM
    # Only the processes this script started, newest (the proxy) first.
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        kill -TERM "${pids[$i]}" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

wait_port() {
    local port=$1 what=$2
    for _ in $(seq 1 200); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            return 0
        fi
        sleep 0.05
    done
    echo "$what did not start listening on 127.0.0.1:$port (see $dir/*.log)" >&2
    exit 1
}

servers=""
for ((i = 0; i < n; i++)); do
    port=$((base + 1 + i))
    mkdir -p "$dir/shard$i"
    # shellcheck disable=SC2086
    "$server" --bind 127.0.0.1 --port "$port" \
        --tier "fast=$dir/shard$i/fast" --tier "capacity=$dir/shard$i/capacity" \
        ${SERVER_ARGS:-} >"$dir/shard$i.log" 2>&1 &
    pids+=($!)
    wait_port "$port" "shard $i"
    servers+="   - 127.0.0.1:$port:1 shard$i"$'\n'
done

cat >"$dir/nutcracker.yml" <<YAML
tierkv:
  listen: 127.0.0.1:$base
  hash: fnv1a_64
  distribution: ketama
  redis: true
  auto_eject_hosts: false
  timeout: 2000
  # One connection per shard keeps each client's requests in order (nutcracker spreads
  # requests over server connections round-robin); open it at start, not on first use.
  server_connections: 1
  preconnect: true
  servers:
$servers
YAML
nutcracker -c "$dir/nutcracker.yml" -a 127.0.0.1 -s $((base + 99)) -o "$dir/nutcracker.log" &
pids+=($!)
wait_port "$base" "nutcracker"

echo "tierkv cluster: $n shard(s) behind nutcracker at 127.0.0.1:$base (data and logs in $dir)"
echo "  redis-cli -p $base SET hello world"
if [ -n "${CLUSTER_READY_FILE:-}" ]; then
    echo "127.0.0.1:$base" >"$CLUSTER_READY_FILE"
fi
# Serve until a shard or the proxy exits, or we are told to stop.
wait -n "${pids[@]}"
echo "a cluster process exited; stopping the rest" >&2
exit 1
