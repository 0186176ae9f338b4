#!/usr/bin/env bash
# SpanDB's Fig. 8 in the tier lab (scripts/lab.sh, needs root), in the paper's setting rather
# than bench-placement.sh's: write-only (fillrandom), 50% read (ycsb-a) and 95% read (ycsb-b),
# zipfian 0.99, fixed placements PL and LAD-1..3 against automatic placement, all on one lab.
#
# What makes it the paper's setting (SpanDB section 5.2, S-O: an Optane P4800X in front of a
# SATA RAID, 512 GB database):
# - The fast tier's bandwidth runs out: it is a loop device held to LAB_FAST_WRITE_BPS (default
#   200 MB/s, twice the capacity tier's writes), so WAL, flush and compaction compete for it,
#   and its ceiling is given to tierkv instead of probed (a probe overestimates a throttled
#   loop device).
# - The fast tier holds most of the database: SpanDB's usable Optane space was about 330 GB of
#   a 512 GB database, so FAST_SHARE (default 0.64) of the loaded data, where
#   bench-placement.sh's 1 GiB cap is about 40%.
# - The tree has the paper's shape: nearly all data in the last level, out of the fixed
#   splits' reach. SpanDB's 512 GB database with RocksDB's 256 MB level base had five levels,
#   and LAD-0..3 together held 27.3 GB, about 5%; with that base, this lab's 2.5 GiB database
#   would have two levels and LAD-3 would cover all of it. LEVEL_BASE (default 32 MiB, tables of
#   FILE_SIZE, default 32 MiB) gives three: L1 32 MiB, L2 320 MiB, L3 the rest, so LAD-3 holds
#   about 13% of the data and automatic placement can take part of L3, as in the paper.
# - Each YCSB run phase is preceded by WARMUP unmeasured requests (default 30% of OPS), as
#   SpanDB's were: automatic placement adapts to the workload before it is measured.
# The database is 5x the lab's memory (LAB_MEM, default 512M). Each engine runs in its own
# process; ROUNDS=N repeats each block with the order rotated. JSON reports and the log go to
# $OUT. BENCH=path runs an already built tierkv-bench instead of building one.
#
#   sudo scripts/bench-fig8.sh
#   sudo ROUNDS=2 READ_PLACEMENTS=tierkv:pl,tierkv:lad3,tierkv:auto scripts/bench-fig8.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-target/bench-fig8}
export LAB_MEM=${LAB_MEM:-512M}
export LAB_FAST_WRITE_BPS=${LAB_FAST_WRITE_BPS:-200000000}
MEM_BYTES=$(numfmt --from=iec "$LAB_MEM")
# 1 KiB values + 16 B keys: the database is 5x the lab's memory (page cache included).
RECORDS=$(python3 -c "print(int(5 * $MEM_BYTES / 1040))")
FAST_SHARE=${FAST_SHARE:-0.64}
FAST_CAP=$(python3 -c "print(int($FAST_SHARE * $RECORDS * 1040))")
OPS=${OPS:-700000}
WARMUP=${WARMUP:-$((OPS * 3 / 10))}
WRITE_RECORDS=${WRITE_RECORDS:-1000000}
ROUNDS=${ROUNDS:-1}
LEVEL_BASE=${LEVEL_BASE:-$((32 << 20))}
FILE_SIZE=${FILE_SIZE:-$((32 << 20))}
PLACEMENTS=${PLACEMENTS:-tierkv:pl,tierkv:lad1,tierkv:lad2,tierkv:lad3,tierkv:auto}
READ_PLACEMENTS=${READ_PLACEMENTS:-$PLACEMENTS}
WORKLOADS=${WORKLOADS:-fillrandom ycsb-a ycsb-b}
mkdir -p "$OUT"
if [ -z "${BENCH:-}" ]; then
    cargo build --release -p tierkv-bench
    BENCH=$PWD/target/release/tierkv-bench
fi
OUT_ABS=$(cd "$OUT" && pwd)

scripts/lab.sh -- bash -c "
set -euo pipefail
common=\"--tier fast=\$LAB_FAST --tier capacity=\$LAB_CAPACITY --device fast=\$LAB_FAST_DEV --device capacity=\$LAB_CAPACITY_DEV --quiet --distribution zipfian --threads 4 --write-buffer-size 16777216 --block-cache 33554432 --tier-capacity fast=$FAST_CAP --fast-tier-bandwidth $LAB_FAST_WRITE_BPS --max-bytes-for-level-base $LEVEL_BASE --target-file-size $FILE_SIZE --rounds $ROUNDS --verbose\"
for w in $WORKLOADS; do
    case \$w in
        fillrandom) $BENCH --compare $PLACEMENTS --workload fillrandom --records $WRITE_RECORDS \$common --json $OUT_ABS/fig8-fillrandom.json ;;
        *) $BENCH --compare $READ_PLACEMENTS --workload \$w --records $RECORDS --ops $OPS --warmup $WARMUP \$common --json $OUT_ABS/fig8-\$w.json ;;
    esac
done
" 2>&1 | tee "$OUT_ABS/log.txt"
