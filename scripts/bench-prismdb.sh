#!/usr/bin/env bash
# PrismDB's experiments (BENCHMARKS.md, "PrismDB"): YCSB A, B, C, D and F, zipfian 0.99,
# 1 KiB values, 8 client threads, the fast tier's budget a share of the data (20% and 10%).
# Engines: tierkv's `prismdb` preset (the budget is its hot store's), RocksDB spread over the
# same two tiers (LAD-2, its fast db_path capped at the budget), and, with the 10% budget,
# RocksDB wholly on the fast tier and wholly on the capacity tier (WAL included: one tier).
# Run it inside the lab, which throttles the capacity tier and bounds memory:
#
#   sudo LAB_MEM=256M LAB_MEMCG=tierkv-lab-prismdb LAB_DIR=/var/tmp/tierkv-lab-prismdb \
#       scripts/lab.sh -- scripts/bench-prismdb.sh OUT_DIR
#
# Environment: BIN (the tierkv-bench binary, built with --features rocksdb), RECORDS (default
# 200000), DURATION (run seconds, default 8), WORKLOADS (default "ycsb-a ycsb-b ycsb-c ycsb-d
# ycsb-f"), SHARES (fast-tier budget in percent of the data, default "20 10"), SYNC=1 (sync
# every write), COMPARE (the two-tier engines, default "tierkv:prismdb,rocksdb"; e.g.
# "tierkv:prismdb+msc=approximate,tierkv:prismdb+msc=random" for MSC's policies), BASELINES=0
# (skip the one-tier RocksDB runs), SPANDB=1 (also run tierkv's SpanDB configuration,
# `tierkv:parallel`, over the same two tiers with the fast tier uncapped: its WAL reserve
# alone is larger than the budget; the synced target compares against it; SPANDB_FAST caps
# its fast tier at that many bytes instead, WAL reserve included), PREFIX (of the report
# names), ROUNDS (tierkv-bench --rounds: the COMPARE engines interleaved, each round in turn,
# medians at the end; default 1),
# WARMUP (operations run unmeasured before the run phase, for every engine alike: `paper`,
# the default, warms up as PrismDB's evaluation does, scaled to RECORDS: half a trace of as
# many operations as keys for A and F, 2.4 times the keys for B, C and D (80% of 3 requests
# per key), 0.05 times for E; or a number, 0 for none). Each run's report goes to
# OUT_DIR/PREFIX<share>-<workload>[-<engine>].txt and .json.
set -euo pipefail

out=${1:?usage: bench-prismdb.sh OUT_DIR}
: "${LAB_FAST:?run inside scripts/lab.sh}" "${LAB_CAPACITY:?run inside scripts/lab.sh}"
BIN=${BIN:-target/release/tierkv-bench}
RECORDS=${RECORDS:-200000}
DURATION=${DURATION:-8}
WORKLOADS=${WORKLOADS:-"ycsb-a ycsb-b ycsb-c ycsb-d ycsb-f"}
SHARES=${SHARES:-"20 10"}
COMPARE=${COMPARE:-tierkv:prismdb,rocksdb}
BASELINES=${BASELINES:-1}
PREFIX=${PREFIX:-}
mkdir -p "$out"

# The data: RECORDS keys of 16 bytes with values of 1024.
data_bytes=$((RECORDS * (16 + 1024)))
common=(--records "$RECORDS" --duration "$DURATION" --threads 8 --distribution zipfian
    --zipf-theta 0.99 --value-size 1024 --write-buffer-size $((8 << 20))
    --block-cache $((16 << 20)) --target-file-size $((8 << 20))
    --max-bytes-for-level-base $((32 << 20)) --quiet)
[ "${SYNC:-0}" = 1 ] && common+=(--sync)
[ "${ROUNDS:-1}" != 1 ] && common+=(--rounds "$ROUNDS")

WARMUP=${WARMUP:-paper}

# warmup WORKLOAD: the operations run before WORKLOAD's run phase (see WARMUP above).
warmup() {
    if [ "$WARMUP" != paper ]; then
        echo "$WARMUP"
        return
    fi
    case $1 in
    ycsb-a | ycsb-f) echo $((RECORDS / 2)) ;;
    ycsb-e) echo $((RECORDS / 20)) ;;
    *) echo $((RECORDS * 12 / 5)) ;;
    esac
}

# run NAME ARGS...: one tierkv-bench invocation, its report kept under NAME.
run() {
    local name=$PREFIX$1
    shift
    rm -rf "$LAB_FAST/prismdb" "$LAB_CAPACITY/prismdb"
    echo "== $name" >&2
    "$BIN" "${common[@]}" --json "$out/$name.json" "$@" | tee "$out/$name.txt"
}

for share in $SHARES; do
    budget=$((data_bytes * share / 100))
    for w in $WORKLOADS; do
        wu=$(warmup "$w")
        run "$share-$w" --workload "$w" --warmup "$wu" --compare "$COMPARE" \
            --tier "fast=$LAB_FAST/prismdb" --tier "capacity=$LAB_CAPACITY/prismdb" \
            --tier-capacity "fast=$budget" --device "capacity=$LAB_CAPACITY_DEV"
        if [ "${SPANDB:-0}" = 1 ]; then
            cap=()
            [ -n "${SPANDB_FAST:-}" ] && cap=(--tier-capacity "fast=$SPANDB_FAST")
            run "$share-$w-spandb" --workload "$w" --warmup "$wu" --engine tierkv:parallel \
                --tier "fast=$LAB_FAST/prismdb" --tier "capacity=$LAB_CAPACITY/prismdb" \
                --device "capacity=$LAB_CAPACITY_DEV" "${cap[@]}"
        fi
        if [ "$share" = 10 ] && [ "$BASELINES" = 1 ]; then
            run "$share-$w-rocksdb-fast" --workload "$w" --warmup "$wu" --engine rocksdb \
                --tier "fast=$LAB_FAST/prismdb" --device "fast=$LAB_FAST_DEV"
            run "$share-$w-rocksdb-capacity" --workload "$w" --warmup "$wu" --engine rocksdb \
                --tier "capacity=$LAB_CAPACITY/prismdb" --device "capacity=$LAB_CAPACITY_DEV"
        fi
    done
done
