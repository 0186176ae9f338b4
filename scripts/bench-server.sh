#!/usr/bin/env bash
# tierkv-server against redis-server, measured with redis-benchmark in one run, on loopback.
#
#   scripts/bench-server.sh [all|setsync|sync|get|big|proxy|scale]   (default all; results also in $OUT)
#
# Experiments (50 clients each; each run is short, so expect noise on a small machine):
#   setsync  the SET target's run: redis-benchmark -t set -n 200000 -c 50 -P 16 -r 1000000
#          -d 100 against tierkv (sync) and redis (appendfsync always), ROUNDS (default 3)
#          alternating rounds, then (from INFO) tierkv's WAL syncs per write batch and
#          reply writes per command.
#   sync   SET, tierkv --durability sync vs redis appendfsync always, and flush vs everysec,
#          with -P 16 and without pipelining; data fits in memory.
#   get    GET on data that fits in memory, both servers, -P 16 and -P 1.
#   big    GET on data several times a memory limit: tierkv-server in a memory cgroup (v1's
#          /sys/fs/cgroup/memory, else the v2 hierarchy; needs root) against the engine measured in-process
#          (tierkv-server --bench-inprocess: the same async GETs, 50 concurrent, no network)
#          in the same cgroup, alternating BIG_ROUNDS times. redis-server cannot hold such
#          data and is not run.
#   proxy  one shard directly vs the same shard through nutcracker, and two shards behind it.
#   scale  throughput as shards are added: for each count in SHARDS (default "1 2 4"), that
#          many tierkv-servers (flush durability) behind as many nutcracker processes (one
#          proxy is one thread; each knows every shard; PROXIES sets their number instead),
#          driven by one redis-benchmark per proxy (CLIENTS clients each, default 50), all
#          at once; the figure is all their requests over the time until the last one
#          finished. One shard without the proxy first (with PROXIES set, by as many
#          benchmarks).
#
# Environment: BENCH_DIR (default /tmp/tierkv-bench-server), PORT_BASE (default 7700),
# REQUESTS (SETs/GETs per pipelined run, default 400000; unpipelined runs do a quarter),
# BIG_KEYS (default 500000 keys of 1000 bytes), MEM_LIMIT (default 128M), BIG_ROUNDS (default 3)
# and BIG_GETS (GETs per server run in `big`, default 100000), OUT (result file),
# SERVER (a tierkv-server binary to measure instead of building this checkout's).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
what="${1:-all}"
dir="${BENCH_DIR:-/tmp/tierkv-bench-server}"
base="${PORT_BASE:-7700}"
requests="${REQUESTS:-400000}"
big_keys="${BIG_KEYS:-500000}"
mem_limit="${MEM_LIMIT:-128M}"
big_rounds="${BIG_ROUNDS:-3}"
big_gets="${BIG_GETS:-100000}"
out="${OUT:-$dir/results.md}"
server="${SERVER:-$root/target/release/tierkv-server}"
# The memory cgroup of `big`: cgroup v1's memory hierarchy where it is mounted, else the
# unified (v2) hierarchy. Both count the page cache against the limit.
if [ -d /sys/fs/cgroup/memory ]; then
    cg=/sys/fs/cgroup/memory/tierkv-bench-server cg_limit=memory.limit_in_bytes
    cg_peak=memory.max_usage_in_bytes
else
    cg=/sys/fs/cgroup/tierkv-bench-server cg_limit=memory.max cg_peak=memory.peak
fi

for tool in redis-benchmark redis-server redis-cli; do
    command -v "$tool" >/dev/null || { echo "$tool missing: apt-get install redis-tools redis-server" >&2; exit 1; }
done
# NB: SERVER names another build (e.g. an earlier commit's, for a before/after comparison).
[ -n "${SERVER:-}" ] || (cd "$root" && cargo build --release -q -p tierkv-server)
mkdir -p "$dir"
: >"$out"

pids=()
stop_all() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    pids=()
}
cleanup() {
    stop_all
    [ -d "$cg" ] && rmdir "$cg" 2>/dev/null || true
}
trap cleanup EXIT

wait_port() {
    for _ in $(seq 1 400); do
        redis-cli -p "$1" PING >/dev/null 2>&1 && return 0
        sleep 0.05
    done
    echo "nothing answers on port $1" >&2
    exit 1
}

# tierkv PORT NAME [flags...]: a fresh tierkv-server.
tierkv() {
    local port=$1 name=$2
    shift 2
    rm -rf "${dir:?}/$name"
    "$server" --port "$port" --tier "fast=$dir/$name/fast" --tier "capacity=$dir/$name/capacity" \
        "$@" >"$dir/$name.log" 2>&1 &
    pids+=($!)
    wait_port "$port"
}

# redis PORT NAME FSYNC: a fresh redis-server with AOF at FSYNC.
redis() {
    local port=$1 name=$2 fsync=$3
    rm -rf "${dir:?}/$name" && mkdir -p "$dir/$name"
    redis-server --port "$port" --bind 127.0.0.1 --dir "$dir/$name" --save "" \
        --appendonly yes --appendfsync "$fsync" --daemonize no >"$dir/$name.log" 2>&1 &
    pids+=($!)
    wait_port "$port"
}

# bench PORT TEST PIPELINE N [extra]: prints "rps p99_ms" (redis-benchmark --csv).
bench() {
    local port=$1 test=$2 pipe=$3 n=$4
    shift 4
    redis-benchmark -p "$port" -c 50 -P "$pipe" -n "$n" -r 100000 -t "$test" --csv "$@" 2>/dev/null |
        csv_rps_p99
}

# redis-benchmark --csv on stdin -> "rps p99_ms" of its one test.
csv_rps_p99() {
    awk -F'","' 'NR==2 { gsub(/"/, "", $7); print $2, $7 }'
}

row() { printf '%s\n' "$*" | tee -a "$out"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

# compare LABEL TKV_PORT BASE_PORT TEST PIPE N: one row, tierkv then the baseline.
compare() {
    local label=$1 a=$2 b=$3 test=$4 pipe=$5 n=$6
    read -r ra pa < <(bench "$a" "$test" "$pipe" "$n")
    read -r rb pb < <(bench "$b" "$test" "$pipe" "$n")
    row "| $label | $ra | $pa | $rb | $pb | $(ratio "$ra" "$rb") |"
}

header() {
    row ""
    row "$1"
    row ""
    row "| run | tierkv-server rps | p99 ms | $2 rps | p99 ms | ratio |"
    row "|---|---|---|---|---|---|"
}

# quiet CMD...: runs CMD without its output.
quiet() { "$@" >/dev/null 2>&1; }

# info_field PORT FIELD: one field of the server's INFO (tierkv's engine counters).
info_field() {
    redis-cli -p "$1" INFO stats | tr -d '\r' | awk -F: -v f="$2" '$1 == f { print $2 }'
}

# fsyncs_during PORT CMD...: runs CMD, then prints what the tierkv-server on PORT counted
# meanwhile: write batches and WAL syncs (synced groups), commands and reply writes.
fsyncs_during() {
    local port=$1
    shift
    local fields=(engine_writes engine_synced_groups total_commands_processed reply_writes)
    local before=() after=() f
    for f in "${fields[@]}"; do before+=("$(info_field "$port" "$f")"); done
    "$@"
    for f in "${fields[@]}"; do after+=("$(info_field "$port" "$f")"); done
    # NB: each INFO above is one command and one reply write of its own.
    row "tierkv-server during one more run: $((after[0] - before[0])) write batches in" \
        "$((after[1] - before[1])) WAL syncs; $((after[2] - before[2] - 4)) commands in" \
        "$((after[3] - before[3] - 4)) reply writes"
}

# The acceptance run for SET with sync durability: exactly
#   redis-benchmark -t set -n 200000 -c 50 -P 16 -r 1000000 -d 100
# against tierkv-server (--durability sync) and redis-server (appendfsync always), same disk,
# alternating ROUNDS times so that both see the same background load.
run_setsync() {
    local rounds="${ROUNDS:-3}" n="${SET_REQUESTS:-200000}"
    tierkv $((base + 1)) tkv-setsync --durability sync
    redis $((base + 2)) redis-setsync always
    row ""
    row "SET -P 16 -d 100 -r 1000000, 50 clients, sync vs appendfsync always ($(date -u +%F), $rounds rounds)"
    row ""
    row "| round | tierkv-server rps | p99 ms | redis-server rps | p99 ms | ratio |"
    row "|---|---|---|---|---|---|"
    local args=(-t set -n "$n" -c 50 -P 16 -r 1000000 -d 100 --csv)
    for ((i = 1; i <= rounds; i++)); do
        local ra pa rb pb
        read -r ra pa < <(redis-benchmark -p $((base + 1)) "${args[@]}" 2>/dev/null | csv_rps_p99)
        read -r rb pb < <(redis-benchmark -p $((base + 2)) "${args[@]}" 2>/dev/null | csv_rps_p99)
        row "| $i | $ra | $pa | $rb | $pb | $(ratio "$ra" "$rb") |"
    done
    fsyncs_during $((base + 1)) quiet redis-benchmark -p $((base + 1)) "${args[@]}"
    stop_all
}

run_sync() {
    header "SET, data in memory, 50 clients ($(date -u +%F))" "redis-server"
    for pair in "sync always" "flush everysec"; do
        read -r dur fsync <<<"$pair"
        tierkv $((base + 1)) "tkv-$dur" --durability "$dur"
        redis $((base + 2)) "redis-$fsync" "$fsync"
        compare "SET -P 16, $dur vs appendfsync $fsync" $((base + 1)) $((base + 2)) set 16 "$requests"
        compare "SET -P 1, $dur vs appendfsync $fsync" $((base + 1)) $((base + 2)) set 1 $((requests / 4))
        stop_all
    done
}

run_get() {
    header "GET, data in memory (100000 keys of 3 bytes), 50 clients" "redis-server"
    tierkv $((base + 1)) tkv-get --durability flush
    redis $((base + 2)) redis-get everysec
    for p in $((base + 1)) $((base + 2)); do bench "$p" set 16 "$requests" >/dev/null; done
    compare "GET -P 16" $((base + 1)) $((base + 2)) get 16 "$requests"
    compare "GET -P 1" $((base + 1)) $((base + 2)) get 1 $((requests / 4))
    stop_all
}

# in_cgroup CMD...: runs CMD in the memory cgroup.
in_cgroup() {
    sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg" "$@"
}

run_big() {
    # NB: v2 gives a child the memory controller only once its parent enables it.
    [ "$cg_limit" = memory.max ] && { echo +memory >/sys/fs/cgroup/cgroup.subtree_control; } 2>/dev/null || true
    if ! mkdir -p "$cg" 2>/dev/null || ! echo "$mem_limit" >"$cg/$cg_limit" 2>/dev/null; then
        row "(big: no memory cgroup at $cg; skipped)"
        return
    fi
    local name=tkv-big conf="$dir/big.toml"
    printf 'compression = "none"\nblock_cache_bytes = "16MiB"\nwrite_buffer_size = "16MiB"\n' >"$conf"
    rm -rf "${dir:?}/$name"
    local tiers=(--tier "fast=$dir/$name/fast" --tier "capacity=$dir/$name/capacity" --config "$conf")
    "$server" "${tiers[@]}" --bench-load "$big_keys" --bench-value-size 1000 | tee -a "$out"
    sync
    echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
    row ""
    row "GET on $big_keys keys of 1000 bytes ($(du -sh "$dir/$name" | cut -f1) on disk) under a $mem_limit memory cgroup, 50 clients, $big_rounds rounds"
    row ""
    # NB: the two cannot share the database (its LOCK), so they alternate, round by round,
    # each about as long as the other, so that both meet the same background load.
    local i r p
    for ((i = 1; i <= big_rounds; i++)); do
        in_cgroup "$server" "${tiers[@]}" --bench-inprocess 10 --bench-keyspace "$big_keys" \
            --bench-clients 50 | tee -a "$out"
        # NB: exec all the way down, so $! is the server itself and stop_all reaches it.
        (exec sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg" "$server" "${tiers[@]}" \
            --port $((base + 1))) >"$dir/$name.log" 2>&1 &
        pids+=($!)
        wait_port $((base + 1))
        read -r r p < <(redis-benchmark -p $((base + 1)) -c 50 -n "$big_gets" -r "$big_keys" -t get --csv 2>/dev/null | csv_rps_p99)
        row "server GET -P 1: $r rps, p99 $p ms"
        if [ "$i" = "$big_rounds" ]; then
            read -r r p < <(redis-benchmark -p $((base + 1)) -c 50 -P 16 -n "$big_gets" -r "$big_keys" -t get --csv 2>/dev/null | csv_rps_p99)
            row "server GET -P 16: $r rps, p99 $p ms"
        fi
        stop_all
    done
    row "cgroup peak memory: $(($(cat "$cg/$cg_peak") >> 20)) MiB of $mem_limit"
}

# proxy NAME PORT STATS_PORT SHARDS: a nutcracker on PORT in front of the SHARDS tierkv-servers
# on base+1.. (ketama over fnv1a_64, as scripts/cluster.sh).
proxy() {
    local name=$1 port=$2 stats=$3 shards=$4 i
    {
        printf 'tierkv:\n  listen: 127.0.0.1:%s\n  hash: fnv1a_64\n  distribution: ketama\n' "$port"
        printf '  redis: true\n  auto_eject_hosts: false\n  timeout: 5000\n'
        # NB: as scripts/cluster.sh: one connection per shard (per-client order), opened
        # before the first request so that connecting is not measured.
        printf '  server_connections: 1\n  preconnect: true\n  servers:\n'
        for ((i = 1; i <= shards; i++)); do printf '   - 127.0.0.1:%s:1 shard%s\n' $((base + i)) "$i"; done
    } >"$dir/$name.yml"
    nutcracker -c "$dir/$name.yml" -a 127.0.0.1 -s "$stats" -o "$dir/$name.log" &
    pids+=($!)
}

run_proxy() {
    command -v nutcracker >/dev/null || { row "(proxy: nutcracker missing; skipped)"; return; }
    header "nutcracker: one shard directly vs through the proxy (flush durability), 50 clients" "direct"
    tierkv $((base + 1)) shard1 --durability flush
    tierkv $((base + 2)) shard2 --durability flush
    local n
    for n in 1 2; do proxy "nutcracker$n" $((base + 10 * n)) $((base + 10 * n + 5)) "$n"; done
    wait_port $((base + 10)) && wait_port $((base + 20))
    for test in set get; do
        for pipe in 16 1; do
            local n=$requests
            [ "$pipe" = 1 ] && n=$((requests / 4))
            compare "$test -P $pipe, 1 shard via proxy vs direct" $((base + 10)) $((base + 1)) "$test" "$pipe" "$n"
            compare "$test -P $pipe, 2 shards via proxy vs 1 via proxy" $((base + 20)) $((base + 10)) "$test" "$pipe" "$n"
        done
    done
    stop_all
}

# bench_all TEST PIPE N PORT...: one redis-benchmark per port, all at once (CLIENTS each);
# prints the requests of all of them over the time until the last finished, and the highest
# p99 (not a sum of rps: a benchmark that ends early would count its rate over less time).
bench_all() {
    local test=$1 pipe=$2 n=$3 port files=() clients=() start k=0
    shift 3
    start=$(date +%s.%N)
    for port in "$@"; do
        k=$((k + 1))
        redis-benchmark -p "$port" -c "${CLIENTS:-50}" -P "$pipe" -n "$n" -r 1000000 -t "$test" \
            --csv 2>/dev/null | csv_rps_p99 >"$dir/scale-$k.out" &
        clients+=($!)
        files+=("$dir/scale-$k.out")
    done
    wait "${clients[@]}"
    cat "${files[@]}" | awk -v n="$n" -v start="$start" -v end="$(date +%s.%N)" \
        '{ if ($2 > p) p = $2 } END { printf "%.0f %.3f\n", NR * n / (end - start), p }'
}

run_scale() {
    command -v nutcracker >/dev/null || { row "(scale: nutcracker missing; skipped)"; return; }
    local counts="${SHARDS:-1 2 4}" n i
    row ""
    row "Shards behind nutcracker, one redis-benchmark (${CLIENTS:-50} clients, -P 16) per proxy, flush durability ($(date -u +%F))"
    row ""
    row "| shards | SET rps | p99 ms | GET rps | p99 ms |"
    row "|---|---|---|---|---|"
    # NB: with PROXIES set, the direct run has as many benchmark processes (and clients) as
    # each proxied run, so that only the proxies differ.
    local direct=()
    for ((i = 1; i <= ${PROXIES:-1}; i++)); do direct+=($((base + 1))); done
    tierkv $((base + 1)) scale-direct --durability flush
    read -r rs ps < <(bench_all set 16 "$requests" "${direct[@]}")
    read -r rg pg < <(bench_all get 16 "$requests" "${direct[@]}")
    row "| 1, direct (no proxy; ${#direct[@]} benchmarks) | $rs | $ps | $rg | $pg |"
    stop_all
    for n in $counts; do
        local proxies=() p=${PROXIES:-$n}
        for ((i = 1; i <= n; i++)); do tierkv $((base + i)) "scale$i" --durability flush; done
        for ((i = 1; i <= p; i++)); do
            proxy "scale-proxy$i" $((base + 100 + i)) $((base + 200 + i)) "$n"
            proxies+=($((base + 100 + i)))
        done
        for port in "${proxies[@]}"; do wait_port "$port"; done
        read -r rs ps < <(bench_all set 16 "$requests" "${proxies[@]}")
        read -r rg pg < <(bench_all get 16 "$requests" "${proxies[@]}")
        row "| $n ($p proxies) | $rs | $ps | $rg | $pg |"
        stop_all
    done
}

echo "machine: $(nproc) cores, $(uname -r); redis $(redis-server --version | awk '{print $3}')" | tee -a "$out"
case "$what" in
    setsync) run_setsync ;;
    sync) run_sync ;;
    get) run_get ;;
    big) run_big ;;
    proxy) run_proxy ;;
    scale) run_scale ;;
    all) run_setsync; run_sync; run_get; run_big; run_proxy ;;
    *) echo "usage: $0 [all|setsync|sync|get|big|proxy|scale]" >&2; exit 2 ;;
esac
echo "results in $out"
