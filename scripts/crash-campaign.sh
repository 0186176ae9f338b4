#!/usr/bin/env bash
# Crash and kill campaign: runs tierkv's simulated power-loss / process-crash sweeps and its
# SIGKILL test over and over with fresh seeds until the time is up, then prints what it counted:
# crashes simulated, kills, acknowledged writes checked, and violations (a failed check: an
# acknowledged write lost, a state that is not a prefix, a batch split, a failed recovery).
#
#   scripts/crash-campaign.sh [SECONDS]            default 600; CI runs a short one
#
# Suites, each run once per iteration with the iteration's seed:
#   crash sweeps (tests/crash.rs)       group-commit WAL: crash points x {power loss with three
#                                       page-loss policies, process crash}, then a second crash
#                                       during recovery; TIERKV_CRASH_POINTS per sweep (default 40)
#   parallel-WAL sweeps (parallel_wal)  parallel WAL with writers in flight, pwrite and the
#                                       emulated io_uring ring, sync and async API, batches
#   kill -9 (tests/kill.rs)             a child writing with Sync, SIGKILLed 8 times per run, in
#                                       each WAL variant (group, parallel io_uring, parallel pwrite)
#                                       and with the hot store on
# CAMPAIGN_VARIANTS="append zoned" limits the kill runs to those variants, and CAMPAIGN_SWEEPS=0
# skips the simulated sweeps (a kill-only campaign, to add kills where a variant has fewer).
# A failing run's seed and output are kept in $CAMPAIGN_DIR (default target/crash-campaign).
# With TIERKV_CAMPAIGN_BIN=DIR the test binaries are taken from DIR (crash-*, parallel_wal-*,
# kill-*) instead of being built, e.g. to run a campaign on a machine without Rust.
set -uo pipefail
cd "$(dirname "$0")/.."

secs=${1:-600}
out=${CAMPAIGN_DIR:-target/crash-campaign}
mkdir -p "$out"

binary() { # suite name -> path of its test binary
    if [ -n "${TIERKV_CAMPAIGN_BIN:-}" ]; then
        ls "$TIERKV_CAMPAIGN_BIN/$1"-* 2>/dev/null | grep -v '\.d$' | head -1
    else
        cargo test -p tierkv --test "$1" --no-run 2>&1 |
            sed -n "s|.*Executable tests/$1.rs (\(.*\))|\1|p" | tail -1
    fi
}
crash_bin=$(binary crash)
pwal_bin=$(binary parallel_wal)
kill_bin=$(binary kill)
for b in "$crash_bin" "$pwal_bin" "$kill_bin"; do
    [ -x "$b" ] || { echo "crash-campaign: test binary missing ($b)" >&2; exit 2; }
done

crashes=0 pwal_crashes=0 acked=0 violations=0 iterations=0
declare -A kills=() kill_acked=()
end=$(($(date +%s) + secs))
seed=${TIERKV_CAMPAIGN_SEED:-$(date +%s)}
all_variants="group parallel_uring parallel_pwrite hot_tier append zoned split_values"
variants=${CAMPAIGN_VARIANTS:-$all_variants}
sweeps=${CAMPAIGN_SWEEPS:-1}

# Runs one suite; on failure keeps its output and counts a violation.
run() { # name command...
    local name=$1 log="$out/last.log"
    shift
    if ! "$@" >"$log" 2>&1; then
        violations=$((violations + 1))
        cp "$log" "$out/FAILED-$name-seed-$seed.log"
        echo "VIOLATION in $name (seed $seed): $out/FAILED-$name-seed-$seed.log" >&2
        grep -E -A3 "panicked|failing cases" "$log" | head -20 >&2
    fi
}

while [ "$(date +%s)" -lt "$end" ]; do
    iterations=$((iterations + 1))

    if [ "$sweeps" != 0 ]; then
        run crash env TIERKV_CRASH_SEED="$seed" "$crash_bin" crash_sweep --nocapture --test-threads 2
        # "N crash points x K crash kinds": each point crashes once per kind.
        n=$(sed -n 's/.* \([0-9]*\) crash points x \([0-9]*\) crash kinds.*/\1 \2/p' "$out/last.log" |
            awk '{ s += $1 * $2 } END { print s + 0 }')
        crashes=$((crashes + n))

        # Each iteration moves the parallel-WAL sweeps' seeds past every earlier iteration's.
        run parallel_wal env TIERKV_PWAL_SEED_OFFSET=$(((seed % 100000) * 100000)) \
            "$pwal_bin" crash_with --nocapture --test-threads 2
        read -r c a < <(sed -n 's/.*: \([0-9]*\) cases, \([0-9]*\) acknowledged writes checked.*/\1 \2/p' "$out/last.log" |
            awk '{ c += $1; a += $2 } END { print c + 0, a + 0 }')
        pwal_crashes=$((pwal_crashes + c))
        acked=$((acked + a))
    fi

    for variant in $variants; do
        run "kill-$variant" env TIERKV_KILL_SEED="$seed" "$kill_bin" --exact \
            "acknowledged_writes_survive_sigkill_$variant" --nocapture
        k=$(grep -c '^round [0-9]* (' "$out/last.log")
        a=$(sed -n 's/.*opened: [a-z]*, \([0-9]*\) writes acknowledged.*/\1/p' "$out/last.log" |
            awk '{ s += $1 } END { print s + 0 }')
        kills[$variant]=$((${kills[$variant]:-0} + k))
        kill_acked[$variant]=$((${kill_acked[$variant]:-0} + a))
        acked=$((acked + a))
    done
    seed=$((seed + 1))
    printf 'iteration %d: %d + %d crashes, kills %s, %d violations\n' "$iterations" \
        "$crashes" "$pwal_crashes" "${kills[*]}" "$violations"
done

echo
echo "== crash campaign: $iterations iterations in ${secs} s"
echo "crashes simulated, group-commit WAL sweeps: $crashes"
echo "crashes simulated, parallel-WAL sweeps:     $pwal_crashes"
for variant in $variants; do
    echo "kills ($variant): ${kills[$variant]:-0}, writes acknowledged before them: ${kill_acked[$variant]:-0}"
done
echo "acknowledged writes checked: $acked"
echo "violations: $violations"
[ "$violations" -eq 0 ]
