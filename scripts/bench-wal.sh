#!/usr/bin/env bash
# The write-path experiments (SpanDB parallel WAL and asynchronous pipeline) side by side in the
# tier lab (scripts/lab.sh, needs root): fio's synced 4 KiB write rate on the fast tier, then
# fillrandom and ycsb-a with sync=true for RocksDB, tierkv group commit and tierkv parallel WAL.
# JSON reports and a text log go to $OUT (default target/bench-wal).
#
#   sudo scripts/bench-wal.sh              # full size
#   sudo SCALE=0.2 scripts/bench-wal.sh    # quicker
set -euo pipefail
cd "$(dirname "$0")/.."
SCALE=${SCALE:-1}
OUT=${OUT:-target/bench-wal}
SYNC_OPS=$(python3 -c "print(int(200000 * $SCALE))")
YCSB_RECORDS=$(python3 -c "print(int(500000 * $SCALE))")
YCSB_OPS=$(python3 -c "print(int(200000 * $SCALE))")
mkdir -p "$OUT"
cargo build --release -p tierkv-bench --features rocksdb
BENCH=$PWD/target/release/tierkv-bench
OUT_ABS=$(cd "$OUT" && pwd)
FIO=$PWD/scripts/fio-wal.sh

scripts/lab.sh -- bash -c "
set -euo pipefail
common=\"--tier fast=\$LAB_FAST --tier capacity=\$LAB_CAPACITY --device fast=\$LAB_FAST_DEV --device capacity=\$LAB_CAPACITY_DEV --quiet\"
engines=rocksdb,tierkv:group,tierkv:parallel
$FIO \$LAB_FAST 5 | tee $OUT_ABS/fio-before.txt
$BENCH --compare \$engines --workload fillrandom --sync --threads 8 --records $SYNC_OPS \$common --json $OUT_ABS/fill-sync-t8.json
$BENCH --compare \$engines --workload fillrandom --sync --threads 2 --inflight 16 --records $SYNC_OPS \$common --json $OUT_ABS/fill-sync-t2x16.json
$BENCH --compare \$engines --workload ycsb-a --distribution zipfian --sync --threads 8 --records $YCSB_RECORDS --ops $YCSB_OPS \$common --json $OUT_ABS/ycsba-sync-t8.json
$BENCH --compare \$engines --workload ycsb-a --distribution zipfian --sync --threads 2 --inflight 16 --records $YCSB_RECORDS --ops $YCSB_OPS \$common --json $OUT_ABS/ycsba-sync-t2x16.json
# The WAL's own synced write rate: page-sized values, enough requests in flight to saturate it.
$BENCH --engine tierkv:parallel --workload fillrandom --sync --value-size 4000 --threads 2 --inflight 32 --records $SYNC_OPS \$common --json $OUT_ABS/wal-rate-4k.json
$FIO \$LAB_FAST 5 | tee $OUT_ABS/fio-after.txt
" 2>&1 | tee "$OUT_ABS/log.txt"
