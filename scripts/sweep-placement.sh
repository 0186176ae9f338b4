#!/usr/bin/env bash
# Chooses placement = auto's thresholds by measurement, in the tier lab (scripts/lab.sh, needs
# root). Each block runs tierkv:auto with several thresholds side by side, for ROUNDS rounds
# with the run order rotated (tierkv-bench --rounds), and prints each setting's median:
#   1. BW_L/BW_H (auto_bw_low/auto_bw_high) on the multiphase workload (50% reads, then all
#      writes, then 95% reads), where fast-tier bandwidth moves the pointer;
#   2. the space watermark and target (auto_space_high/auto_space_target) on ycsb-b with the
#      fast tier capped, where space moves the pointer.
# The database is 2.5x the lab's memory at the default SCALE=0.5 (half of bench-placement.sh),
# with the fast tier capped at the same share of it (FAST_CAP, default 512M). JSON goes to $OUT.
#
#   sudo scripts/sweep-placement.sh
#   sudo ROUNDS=3 SCALE=1 FAST_CAP=1G scripts/sweep-placement.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SCALE=${SCALE:-0.5}
ROUNDS=${ROUNDS:-2}
OUT=${OUT:-target/sweep-placement}
export LAB_MEM=${LAB_MEM:-512M}
MEM_BYTES=$(numfmt --from=iec "$LAB_MEM")
RECORDS=$(python3 -c "print(int(5 * $MEM_BYTES / 1040 * $SCALE))")
OPS=$(python3 -c "print(int(400000 * $SCALE))")
FAST_CAP=${FAST_CAP:-512M}
BW_SETTINGS=${BW_SETTINGS:-"tierkv:auto+bwl=0.2+bwh=0.5,tierkv:auto+bwl=0.35+bwh=0.65,tierkv:auto+bwl=0.5+bwh=0.8,tierkv:auto+bwl=0.7+bwh=0.95"}
SPACE_SETTINGS=${SPACE_SETTINGS:-"tierkv:auto+sph=0.8+spt=0.7,tierkv:auto+sph=0.9+spt=0.8,tierkv:auto+sph=0.97+spt=0.9"}
mkdir -p "$OUT"
cargo build --release -p tierkv-bench
BENCH=$PWD/target/release/tierkv-bench
OUT_ABS=$(cd "$OUT" && pwd)

scripts/lab.sh -- bash -c "
set -euo pipefail
common=\"--tier fast=\$LAB_FAST --tier capacity=\$LAB_CAPACITY --device fast=\$LAB_FAST_DEV --device capacity=\$LAB_CAPACITY_DEV --quiet --distribution zipfian --threads 4 --write-buffer-size 16777216 --block-cache 33554432 --tier-capacity fast=$FAST_CAP --rounds $ROUNDS --verbose\"
$BENCH --compare '$BW_SETTINGS' --workload multiphase --records $RECORDS --ops $((3 * OPS)) \$common --json $OUT_ABS/bw-multiphase.json
$BENCH --compare '$SPACE_SETTINGS' --workload ycsb-b --records $RECORDS --ops $OPS \$common --json $OUT_ABS/space-ycsb-b.json
" 2>&1 | tee "$OUT_ABS/log.txt"
