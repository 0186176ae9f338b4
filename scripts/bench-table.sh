#!/usr/bin/env bash
# Regenerates the results table of BENCHMARKS.md: builds tierkv-bench with RocksDB, runs the
# issue's side-by-side experiments inside the tier lab (scripts/lab.sh, needs root), runs the
# db_bench cross-check, and rewrites the table between the RESULTS markers.
#
#   sudo scripts/bench-table.sh            # full size (database 4x the lab's memory)
#   sudo SCALE=0.1 scripts/bench-table.sh  # a quick, smaller run
set -euo pipefail
cd "$(dirname "$0")/.."
SCALE=${SCALE:-1}
OUT=${OUT:-target/bench-results}
MEM_BYTES=$((1024 * 1024 * 1024))
export LAB_MEM=${LAB_MEM:-$MEM_BYTES}
# 1 KiB values + 16 B keys: 4x memory is about 4 M records at LAB_MEM = 1 GiB.
RECORDS=$(python3 -c "print(int(4 * $LAB_MEM / 1040 * $SCALE))")
READS=$(python3 -c "print(int(200000 * $SCALE))")
SYNC_OPS=$(python3 -c "print(int(100000 * $SCALE))")
mkdir -p "$OUT"

cargo build --release -p tierkv-bench --features rocksdb
BENCH=$PWD/target/release/tierkv-bench
OUT_ABS=$(cd "$OUT" && pwd)

scripts/lab.sh -- bash -c "
set -euo pipefail
common=\"--tier fast=\$LAB_FAST --tier capacity=\$LAB_CAPACITY --device fast=\$LAB_FAST_DEV --device capacity=\$LAB_CAPACITY_DEV --quiet\"
$BENCH --compare rocksdb,tierkv --workload fillrandom --records $RECORDS \$common --json $OUT_ABS/fillrandom.json
$BENCH --compare rocksdb,tierkv --workload readrandom --records $RECORDS --ops $READS \$common --json $OUT_ABS/readrandom.json
$BENCH --compare rocksdb,tierkv --workload fillrandom --sync --threads 8 --records $SYNC_OPS \$common --json $OUT_ABS/fillrandom-sync8.json
# Cross-check: RocksDB in process and RocksDB's own db_bench, one path on the fast tier.
one=\"--tier fast=\$LAB_FAST --quiet\"
$BENCH --engine rocksdb --workload fillrandom --records $SYNC_OPS \$one --json $OUT_ABS/xcheck-fill.json
$BENCH --engine rocksdb --workload readrandom --records $SYNC_OPS --ops $SYNC_OPS \$one --json $OUT_ABS/xcheck-read.json
dbb() { rm -rf \$LAB_FAST/dbb && mkdir -p \$LAB_FAST/dbb
  db_bench --benchmarks=\$1 --db=\$LAB_FAST/dbb/db --wal_dir=\$LAB_FAST/dbb/wal \\
    --num=$SYNC_OPS --reads=$SYNC_OPS --key_size=16 --value_size=1024 --compression_type=lz4 \\
    --write_buffer_size=67108864 --max_write_buffer_number=3 --cache_size=67108864 --bloom_bits=10 \\
    --max_background_jobs=2 --target_file_size_base=67108864 --max_bytes_for_level_base=268435456 \\
    --compression_ratio=1.0 --threads=1 --seed=42; }
# fillrandom draws keys with replacement in both tools; the read test loads each key once
# (filluniquerandom, like tierkv-bench's load phase) so every read finds its key.
{ dbb fillrandom; dbb filluniquerandom,readrandom; } > $OUT_ABS/db_bench.txt 2>&1
"
python3 scripts/bench_table.py "$OUT" BENCHMARKS.md
echo "BENCHMARKS.md updated from $OUT"
