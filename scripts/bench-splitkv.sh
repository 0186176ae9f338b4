#!/usr/bin/env bash
# SplitKV's experiments (BENCHMARKS.md, "SplitKV on a pm fast tier against RocksDB"):
#  1. YCSB A-F, half 256 B and half 4 KiB values, zipfian 0.99, 4 client threads, the fast
#     area (tierkv's hot store, RocksDB's fast db_path target) about 4% of the data. The fast
#     tier is shared memory (a `pm` tier for tierkv: its files memory-mapped), the capacity
#     tier the lab's throttled loop device. Engines: tierkv's `splitkv` preset, RocksDB spread
#     over the two tiers (LAD-2), and RocksDB's BlobDB with its blob files on the fast tier
#     (`lad2+blob`) and on the capacity tier (`pl+blob`). Equal durability: with SYNC=1 (the
#     default) every write of every engine is synced.
#  2. Single-thread latency of small updates (256 B values, 100% updates): tierkv:splitkv
#     against RocksDB on the same tiers.
#  3. The value log's space after an overwrite-heavy run (4 KiB values, every one separated):
#     the engine's own report of its value-log file bytes and live bytes.
# Run it inside the lab, which throttles the capacity tier and bounds memory:
#
#   sudo LAB_MEM=1G LAB_MEMCG=tierkv-lab-splitkv LAB_DIR=/var/tmp/tierkv-lab-splitkv \
#       scripts/lab.sh -- scripts/bench-splitkv.sh OUT_DIR
#
# Environment: BIN (the tierkv-bench binary, built with --features rocksdb), PM_DIR (the fast
# tier, default /dev/shm; a tmpfs or DAX mount), RECORDS (default 100000), OPS (per run,
# default 200000), DURATION (cap per run in seconds, default 40), WORKLOADS (default
# "ycsb-a ycsb-b ycsb-c ycsb-d ycsb-e ycsb-f"), COMPARE (default
# "tierkv:splitkv,rocksdb,rocksdb:lad2+blob,rocksdb:pl+blob"), SYNC=0 (no engine syncs),
# PARTS (default "ycsb latency space"), SPACE_ENGINE (the engine of the space part, default
# tierkv:splitkv). Each run's report goes to OUT_DIR/<name>.txt and .json.
set -euo pipefail

out=${1:?usage: bench-splitkv.sh OUT_DIR}
: "${LAB_CAPACITY:?run inside scripts/lab.sh}" "${LAB_CAPACITY_DEV:?run inside scripts/lab.sh}"
BIN=${BIN:-target/release/tierkv-bench}
PM_DIR=${PM_DIR:-/dev/shm}
RECORDS=${RECORDS:-100000}
OPS=${OPS:-200000}
DURATION=${DURATION:-40}
WORKLOADS=${WORKLOADS:-"ycsb-a ycsb-b ycsb-c ycsb-d ycsb-e ycsb-f"}
COMPARE=${COMPARE:-tierkv:splitkv,rocksdb,rocksdb:lad2+blob,rocksdb:pl+blob}
PARTS=${PARTS:-"ycsb latency space"}
mkdir -p "$out"
fast=$PM_DIR/tierkv-splitkv-bench
capacity=$LAB_CAPACITY/splitkv

# Half 256 B, half 4 KiB values with 16-byte keys: the data's bytes, and 4% of them.
data_bytes=$((RECORDS * (16 + (256 + 4096) / 2)))
budget=$((data_bytes * 4 / 100))
common=(--records "$RECORDS" --ops "$OPS" --duration "$DURATION" --distribution zipfian
    --zipf-theta 0.99 --write-buffer-size $((8 << 20)) --block-cache $((16 << 20))
    --target-file-size $((8 << 20)) --max-bytes-for-level-base $((32 << 20)) --quiet
    --tier "fast=$fast" --tier "capacity=$capacity" --tier-kind fast=pm
    --device "capacity=$LAB_CAPACITY_DEV")
[ "${SYNC:-1}" = 1 ] && common+=(--sync)

# run NAME ARGS...: one tierkv-bench invocation, its report kept under NAME.
run() {
    local name=$1
    shift
    rm -rf "$fast" "$capacity"
    echo "== $name" >&2
    "$BIN" "${common[@]}" --json "$out/$name.json" "$@" | tee "$out/$name.txt"
}
trap 'rm -rf "$fast"' EXIT

for part in $PARTS; do
    case $part in
        ycsb)
            for w in $WORKLOADS; do
                run "$w" --workload "$w" --compare "$COMPARE" --threads 4 \
                    --value-size 256:50,4096:50 --tier-capacity "fast=$budget"
            done
            ;;
        latency)
            # Small updates only, one thread: each put waits for its own sync.
            run latency-small-updates --workload write100 --threads 1 --value-size 256 \
                --compare tierkv:splitkv,rocksdb --tier-capacity "fast=$budget"
            ;;
        space)
            # Every value at the split threshold goes to the value log; overwrites make
            # garbage that collection must bound. --verbose prints the engine's counters;
            # --collect-value-log then collects to the end and prints the space again. The
            # live data is RECORDS values of 4 KiB.
            run space-overwrite --workload overwrite --threads 4 --value-size 4096 \
                --engine "${SPACE_ENGINE:-tierkv:splitkv}" --tier-capacity "fast=$budget" --verbose \
                --collect-value-log
            echo "live data: $((RECORDS * 4096 >> 20)) MiB"
            grep -E "value log|value-log gc" "$out/space-overwrite.txt" || true
            ;;
        *)
            echo "bench-splitkv.sh: unknown part $part (ycsb, latency, space)" >&2
            exit 2
            ;;
    esac
done
