#!/usr/bin/env bash
# The device's rate for WAL-shaped writes, measured with fio in the same session as a
# tierkv-bench run, so that a WAL's synced-write rate can be read against what the device does.
#
#   scripts/fio-wal.sh DIR [SECONDS]      # SECONDS per variant, default 10
#
# DIR is the directory of the fast tier (where both WALs live). The script preallocates and
# writes one file there (DIR/fio-wal.area, FIO_WAL_SIZE bytes, default 256M: a reused, already
# written WAL area, so no write converts an unwritten extent), runs each variant on it, prints
# one line per variant, and removes the file. All writes are 4 KiB.
#
#   uring-direct-dsync-qd16  io_uring, O_DIRECT, O_DSYNC (fio --sync=dsync: every write is durable
#                            on completion, like a RWF_DSYNC write), 16 writes in flight, one job:
#                            the parallel WAL's loggers over io_uring.
#   uring-direct-dsync-qd1   the same with one write in flight: one logger's serial rate.
#   psync-fdatasync-8jobs    pwrite (buffered) then fdatasync after every write, 8 jobs on
#                            disjoint 1/8ths of the file: synced writers each paying a flush,
#                            like group commit with no grouping.
#
# Output, one line per variant:
#   fio-wal VARIANT iops=N mb_s=N lat_mean_us=N lat_p99_us=N
# (latency is fio's completion latency of the write; for the fdatasync variant it is the write
# plus its fdatasync). Needs fio (apt-get install fio) and python3.
set -euo pipefail

die() { echo "fio-wal.sh: $*" >&2; exit 2; }
case "${1:-}" in
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    "") die "usage: fio-wal.sh DIR [SECONDS]" ;;
esac
DIR=$1
SECS=${2:-10}
SIZE=${FIO_WAL_SIZE:-256M}
[ -d "$DIR" ] || die "$DIR is not a directory"
[[ "$SECS" =~ ^[0-9]+$ ]] && [ "$SECS" -gt 0 ] || die "SECONDS must be a positive integer"
command -v fio >/dev/null || die "fio missing (apt-get install fio)"
command -v python3 >/dev/null || die "python3 missing"

AREA="$DIR/fio-wal.area"
TMP=$(mktemp -d)
cleanup() { rm -f "$AREA"; rm -rf "$TMP"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# Preallocate and write the area once (1 MiB direct writes), then make it durable.
fio --name=prefill --filename="$AREA" --size="$SIZE" --rw=write --bs=1M --ioengine=psync \
    --direct=1 --end_fsync=1 --output="$TMP/prefill.json" --output-format=json >/dev/null \
    || die "could not prefill $AREA (see $TMP)"
BYTES=$(stat -c %s "$AREA")
PART=$((BYTES / 8 / 4096 * 4096))

common=(--filename="$AREA" --bs=4k --rw=write --time_based --runtime="$SECS"
        --group_reporting --output-format=json)

run() {
    local name=$1
    shift
    fio --name="$name" "${common[@]}" "$@" --output="$TMP/$name.json" >/dev/null \
        || die "fio failed for $name"
    python3 - "$name" "$TMP/$name.json" <<'EOF'
import json, sys
name, path = sys.argv[1], sys.argv[2]
with open(path) as f:
    job = json.load(f)["jobs"][0]
w = job["write"]
lat = w.get("clat_ns") or w.get("lat_ns") or {}
if job.get("sync", {}).get("lat_ns", {}).get("N"):
    # fdatasync variants: a write is durable only after its fdatasync.
    mean = lat.get("mean", 0) + job["sync"]["lat_ns"]["mean"]
    p99 = lat.get("percentile", {}).get("99.000000", 0) + job["sync"]["lat_ns"].get("percentile", {}).get("99.000000", 0)
else:
    mean = lat.get("mean", 0)
    p99 = lat.get("percentile", {}).get("99.000000", 0)
print(f"fio-wal {name:<24} iops={w['iops']:.0f} mb_s={w['bw_bytes'] / 1e6:.1f} "
      f"lat_mean_us={mean / 1e3:.1f} lat_p99_us={p99 / 1e3:.1f}")
EOF
}

echo "fio-wal: $DIR ($(df --output=source "$DIR" | tail -1)), $SECS s per variant, area $BYTES bytes" >&2
run uring-direct-dsync-qd16 --ioengine=io_uring --direct=1 --sync=dsync --iodepth=16 \
    --size="$BYTES"
run uring-direct-dsync-qd1 --ioengine=io_uring --direct=1 --sync=dsync --iodepth=1 \
    --size="$BYTES"
run psync-fdatasync-8jobs --ioengine=psync --direct=0 --fdatasync=1 --numjobs=8 \
    --size="$PART" --offset_increment="$PART"
