#!/usr/bin/env bash
# SpanDB Fig. 8 and 9 in the tier lab (scripts/lab.sh, needs root): write-only (fillrandom), 50% read
# (ycsb-a) and 95% read (ycsb-b), zipfian 0.99, for the fixed placements PL and LAD-1..3 and
# automatic placement, side by side per workload; then ycsb-b against RocksDB (db_paths
# placement). The database is 5x the lab's memory (LAB_MEM, default 512M here so a run takes
# minutes, not hours; engines get 16 MiB memtables and a 32 MiB block cache to fit in it).
# The fast tier has a budget (FAST_CAP, default 1G: about 40% of the database), as a small
# Optane drive would, so "everything on the fast tier" is not one of the choices; tierkv spills
# tables to the capacity tier once it is full and RocksDB's fast db_path target is capped at
# it. A last block compares multi-gets of 16 keys (ycsb-c, reads only). JSON reports go to $OUT.
#
# Each engine runs in its own process; ROUNDS=N repeats every block with the order rotated and
# reports medians (the lab favours whichever engine runs first in a block).
#
#   sudo scripts/bench-placement.sh             # full size
#   sudo SCALE=0.2 scripts/bench-placement.sh   # quicker
#   sudo ROUNDS=2 scripts/bench-placement.sh    # rotated, twice as long
set -euo pipefail
cd "$(dirname "$0")/.."
SCALE=${SCALE:-1}
OUT=${OUT:-target/bench-placement}
export LAB_MEM=${LAB_MEM:-512M}
MEM_BYTES=$(numfmt --from=iec "$LAB_MEM")
# 1 KiB values + 16 B keys: the database is 5x the lab's memory (page cache included).
RECORDS=$(python3 -c "print(int(5 * $MEM_BYTES / 1040 * $SCALE))")
OPS=$(python3 -c "print(int(200000 * $SCALE))")
FAST_CAP=${FAST_CAP:-1G}
ROUNDS=${ROUNDS:-1}
mkdir -p "$OUT"
cargo build --release -p tierkv-bench --features rocksdb
BENCH=$PWD/target/release/tierkv-bench
OUT_ABS=$(cd "$OUT" && pwd)

scripts/lab.sh -- bash -c "
set -euo pipefail
common=\"--tier fast=\$LAB_FAST --tier capacity=\$LAB_CAPACITY --device fast=\$LAB_FAST_DEV --device capacity=\$LAB_CAPACITY_DEV --quiet --distribution zipfian --threads 4 --write-buffer-size 16777216 --block-cache 33554432 --tier-capacity fast=$FAST_CAP --rounds $ROUNDS\"
placements=tierkv:pl,tierkv:lad1,tierkv:lad2,tierkv:lad3,tierkv:auto
$BENCH --compare \$placements --workload fillrandom --records $OPS \$common --json $OUT_ABS/fig8-write.json
$BENCH --compare \$placements --workload ycsb-a --records $RECORDS --ops $OPS \$common --json $OUT_ABS/fig8-ycsb-a.json
$BENCH --compare \$placements --workload ycsb-b --records $RECORDS --ops $OPS \$common --json $OUT_ABS/fig8-ycsb-b.json
$BENCH --compare rocksdb:lad2,tierkv:auto --workload ycsb-b --records $RECORDS --ops $OPS \$common --json $OUT_ABS/ycsb-b-vs-rocksdb.json
# SpanDB Fig. 9: phases of 50% reads, all writes, 95% reads; the longest write stall shows as max latency.
$BENCH --compare rocksdb:lad2,tierkv:auto --workload multiphase --records $RECORDS --ops $((3 * OPS)) \$common --json $OUT_ABS/fig9-multiphase.json
# Batched point reads: 16 keys per multi-get (RocksDB: batched_multi_get_cf).
$BENCH --compare rocksdb:lad2,tierkv:auto --workload ycsb-c --multiget 16 --records $RECORDS --ops $OPS \$common --json $OUT_ABS/multiget-ycsb-c.json
" 2>&1 | tee "$OUT_ABS/log.txt"
