#!/usr/bin/env bash
# The tier lab: runs a command with a fast tier on the local disk, a throttled capacity tier
# (ext4 on a loop device limited with the blkio cgroup), an optional tmpfs "pm" tier, and a
# memory cgroup that bounds the page cache. Cleans everything up on exit, error or interrupt.
# Works with cgroup v1 (blkio and memory hierarchies) and, where those are not mounted, with
# the unified v2 hierarchy (io.max and memory.max on one cgroup of the lab's own).
#
#   sudo scripts/lab.sh [--pm] [--keep] -- COMMAND [ARGS...]
#
# The command sees LAB_FAST, LAB_CAPACITY (and LAB_PM) directories, and LAB_FAST_DEV and
# LAB_CAPACITY_DEV block device names for device counters (tierkv-bench --device).
#
# Defaults model a SATA/QLC capacity drive next to this machine's local NVMe-backed disk at
# roughly the fast:capacity ratio of SpanDB's Optane P4800X vs. SATA S4510 pair (about 5x in
# random-read IOPS): the local disk does about 38K 4 KiB IOPS at depth 16, so the capacity tier
# gets 8000 read IOPS, 4000 write IOPS, 200 MB/s reads and 100 MB/s writes (a QLC drive's
# sustained write rate once its SLC cache is full). Override with the environment:
#   LAB_READ_IOPS LAB_WRITE_IOPS LAB_READ_BPS LAB_WRITE_BPS  capacity-tier limits
#   LAB_FAST_WRITE_BPS LAB_FAST_READ_BPS  if either is set, the fast tier too is a loop device
#                  (ext4 on a sparse file of LAB_FAST_SIZE, default 8G) with these byte rates
#                  (0 = unlimited): a fast tier whose bandwidth runs out, as in SpanDB's
#                  experiments where WAL, flush and compaction compete for the Optane drive
#   LAB_MEM        memory cgroup limit, page cache included (default 1G)
#   LAB_CAP_SIZE   capacity file system size (default 32G, sparse)
#   LAB_PM_SIZE    tmpfs size for --pm (default 2G)
#   LAB_DIR        where the lab lives (default /var/tmp/tierkv-lab)
#   LAB_MEMCG      name of the lab's cgroup (default tierkv-lab): give each concurrent lab its own
set -euo pipefail

READ_IOPS=${LAB_READ_IOPS:-8000}
WRITE_IOPS=${LAB_WRITE_IOPS:-4000}
READ_BPS=${LAB_READ_BPS:-$((200 * 1000 * 1000))}
WRITE_BPS=${LAB_WRITE_BPS:-$((100 * 1000 * 1000))}
MEM=${LAB_MEM:-1G}
CAP_SIZE=${LAB_CAP_SIZE:-32G}
PM_SIZE=${LAB_PM_SIZE:-2G}
LAB_DIR=${LAB_DIR:-/var/tmp/tierkv-lab}
FAST_WRITE_BPS=${LAB_FAST_WRITE_BPS:-}
FAST_READ_BPS=${LAB_FAST_READ_BPS:-}
FAST_SIZE=${LAB_FAST_SIZE:-8G}
BLKIO=/sys/fs/cgroup/blkio
MEMCG=/sys/fs/cgroup/memory/${LAB_MEMCG:-tierkv-lab}
if [ ! -d "$BLKIO" ] && [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    # cgroup v2: one cgroup holds the command, its memory limit and its devices' limits.
    CGROUP_V2=1
    MEMCG=/sys/fs/cgroup/${LAB_MEMCG:-tierkv-lab}
else
    CGROUP_V2=0
fi

die() { echo "lab.sh: $*" >&2; exit 2; }

WITH_PM=0
KEEP=0
while [ $# -gt 0 ]; do
    case "$1" in
        --pm) WITH_PM=1 ;;
        --keep) KEEP=1 ;;
        --) shift; break ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        *) die "unknown option $1 (use -- before the command)" ;;
    esac
    shift
done
[ $# -gt 0 ] || die "no command given; usage: lab.sh [--pm] [--keep] -- COMMAND [ARGS...]"
[ "$(id -u)" = 0 ] || die "needs root (loop devices, mounts and cgroups)"
if [ "$CGROUP_V2" = 1 ]; then
    # NB: a child gets the io and memory controllers only once its parent enables them.
    echo "+io +memory" >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
    grep -qw io /sys/fs/cgroup/cgroup.subtree_control || die "cgroup v2 without the io controller"
    grep -qw memory /sys/fs/cgroup/cgroup.subtree_control || die "cgroup v2 without the memory controller"
else
    [ -d "$BLKIO" ] || die "no blkio cgroup (v1) at $BLKIO"
    [ -d /sys/fs/cgroup/memory ] || die "no memory cgroup (v1) at /sys/fs/cgroup/memory"
fi
command -v mkfs.ext4 >/dev/null || die "mkfs.ext4 missing (apt-get install e2fsprogs)"

LOOP=""
MAJMIN=""
FAST_LOOP=""
FAST_MAJMIN=""
# Limits device MAJ:MIN to READ_IOPS WRITE_IOPS READ_BPS WRITE_BPS (0 = no limit).
throttle() {
    local majmin=$1 f
    shift
    if [ "$CGROUP_V2" = 1 ]; then
        # NB: v2 has no limits on the root cgroup; the lab's own cgroup carries them, and
        # cgroup writeback charges the command's dirty pages to it, so they hold for writeback.
        local v=() x
        for x in "$@"; do [ "$x" = 0 ] && v+=(max) || v+=("$x"); done
        echo "$majmin riops=${v[0]} wiops=${v[1]} rbps=${v[2]} wbps=${v[3]}" >"$MEMCG/io.max"
        return
    fi
    for f in read_iops_device write_iops_device read_bps_device write_bps_device; do
        echo "$majmin $1" > "$BLKIO/blkio.throttle.$f" 2>/dev/null
        shift
    done
}
unthrottle() { [ "$CGROUP_V2" = 1 ] || throttle "$1" 0 0 0 0; }
# Prints a loop device (direct I/O) over a new sparse file $LAB_DIR/NAME.img of SIZE.
attach() {
    truncate -s "$2" "$LAB_DIR/$1.img"
    losetup --find --show --direct-io=on "$LAB_DIR/$1.img"
}
# Makes ext4 on loop device DEV and mounts it at $LAB_DIR/NAME.
format_and_mount() {
    mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$1"
    mount -o noatime "$1" "$LAB_DIR/$2"
}
majmin() { lsblk -dno MAJ:MIN "$1" | tr -d ' '; }
cleanup() {
    set +e
    if [ -d "$MEMCG" ]; then
        # Anything the command left behind dies with the lab.
        for pid in $(cat "$MEMCG/cgroup.procs" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
        sleep 0.2
        rmdir "$MEMCG" 2>/dev/null
    fi
    [ -n "$MAJMIN" ] && unthrottle "$MAJMIN"
    [ -n "$FAST_MAJMIN" ] && unthrottle "$FAST_MAJMIN"
    mountpoint -q "$LAB_DIR/pm" && umount "$LAB_DIR/pm"
    mountpoint -q "$LAB_DIR/capacity" && umount "$LAB_DIR/capacity"
    mountpoint -q "$LAB_DIR/fast" && umount "$LAB_DIR/fast"
    [ -n "$LOOP" ] && losetup -d "$LOOP"
    [ -n "$FAST_LOOP" ] && losetup -d "$FAST_LOOP"
    if [ "$KEEP" = 0 ]; then
        rm -f "$LAB_DIR/capacity.img" "$LAB_DIR/fast.img"
        rm -rf "$LAB_DIR/fast"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$LAB_DIR/fast" "$LAB_DIR/capacity"
# NB: under v2 the cgroup comes first: the devices' limits are written into it.
mkdir -p "$MEMCG"
LOOP=$(attach capacity "$CAP_SIZE")
format_and_mount "$LOOP" capacity
MAJMIN=$(majmin "$LOOP")
# NB: under v1 the limits go on the root blkio cgroup for each lab device only: writeback of
# buffered writes is issued by kernel threads outside any child cgroup, and each device serves
# only its tier, so a device-wide limit is the one that really holds.
throttle "$MAJMIN" "$READ_IOPS" "$WRITE_IOPS" "$READ_BPS" "$WRITE_BPS"

if [ -n "$FAST_WRITE_BPS$FAST_READ_BPS" ]; then
    FAST_LOOP=$(attach fast "$FAST_SIZE")
    format_and_mount "$FAST_LOOP" fast
    FAST_MAJMIN=$(majmin "$FAST_LOOP")
    throttle "$FAST_MAJMIN" 0 0 "${FAST_READ_BPS:-0}" "${FAST_WRITE_BPS:-0}"
fi

if [ "$WITH_PM" = 1 ]; then
    mkdir -p "$LAB_DIR/pm"
    mount -t tmpfs -o "size=$PM_SIZE" tmpfs "$LAB_DIR/pm"
    export LAB_PM="$LAB_DIR/pm"
fi

if [ "$CGROUP_V2" = 1 ]; then
    echo "$MEM" >"$MEMCG/memory.max"
else
    echo "$MEM" >"$MEMCG/memory.limit_in_bytes"
fi
if [ -n "$FAST_LOOP" ]; then
    FAST_DEV=$(basename "$FAST_LOOP")
else
    FAST_DEV=$(lsblk -no PKNAME "$(df --output=source "$LAB_DIR/fast" | tail -1)" 2>/dev/null | head -1)
    [ -n "$FAST_DEV" ] || FAST_DEV=$(basename "$(df --output=source "$LAB_DIR/fast" | tail -1)")
fi
export LAB_FAST="$LAB_DIR/fast" LAB_CAPACITY="$LAB_DIR/capacity"
export LAB_FAST_DEV="$FAST_DEV" LAB_CAPACITY_DEV=$(basename "$LOOP")

sync
echo 3 > /proc/sys/vm/drop_caches
echo "lab: fast=$LAB_FAST ($LAB_FAST_DEV${FAST_LOOP:+: ${FAST_READ_BPS:-0}/${FAST_WRITE_BPS:-0} B/s}) capacity=$LAB_CAPACITY ($LAB_CAPACITY_DEV:" \
     "$READ_IOPS/$WRITE_IOPS IOPS, $READ_BPS/$WRITE_BPS B/s) memory=$MEM" >&2
set +e
bash -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$MEMCG" "$@"
status=$?
exit $status
