#!/usr/bin/env bash
# Runs tierkv's decoder fuzz targets (crates/tierkv/fuzz) one after another, each for a given
# time, and reports which ones found a crash.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     default: 60 s, every target
#
# With the nightly toolchain and cargo-fuzz installed
#   rustup toolchain install nightly --profile minimal && cargo install cargo-fuzz
# the targets are built by `cargo fuzz` with AddressSanitizer. Without them (stable Rust only,
# as on a fresh CI machine) the same libFuzzer targets are built by plain cargo with
# SanitizerCoverage instrumentation (coverage-guided, no AddressSanitizer; FUZZ_STABLE=1 forces
# this path). Both builds keep debug assertions and overflow checks, so an arithmetic overflow
# on a decoded length is a crash.
# Corpora grow in crates/tierkv/fuzz/corpus/<target>/ (seeded from seeds/<target>/, not
# committed); a crash leaves its input in crates/tierkv/fuzz/artifacts/<target>/. Once the
# decoder is fixed, copy that input to crates/tierkv/fuzz/regressions/<target>/ so the stable
# test suite (tests/fuzz_regressions.rs) replays it. FUZZ_JOBS (default 1) builds with that
# many jobs; FUZZ_ARGS adds libFuzzer flags.
set -uo pipefail
cd "$(dirname "$0")/../crates/tierkv/fuzz"

secs=${1:-60}
shift || true
if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(sed -n 's/^name = "\([a-z_]*\)"$/\1/p' Cargo.toml | grep -v '^tierkv-fuzz$')
fi
export CARGO_BUILD_JOBS=${FUZZ_JOBS:-1}

if [ -z "${FUZZ_STABLE:-}" ] && cargo +nightly fuzz --version >/dev/null 2>&1; then
    # -a: debug assertions and overflow checks.
    cargo +nightly fuzz build -O -a || exit 1
    run_target() { cargo +nightly fuzz run -O -a "$@"; }
else
    # What cargo-fuzz passes, less AddressSanitizer (nightly only). `--target` keeps the
    # instrumentation off build scripts, which do not link libFuzzer.
    host=$(rustc -vV | sed -n 's/^host: //p')
    export CARGO_TARGET_DIR=${FUZZ_TARGET_DIR:-target/stable}
    RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
        -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
        -Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions \
        -Coverflow-checks" cargo build --release --target "$host" --bins || exit 1
    bin_dir="$CARGO_TARGET_DIR/$host/release"
    run_target() {
        local t=$1
        shift
        local args=()
        for a in "$@"; do
            # `--` separates cargo-fuzz's arguments from libFuzzer's; the binary takes them all.
            [ "$a" = "--" ] || args+=("$a")
        done
        mkdir -p "artifacts/$t"
        "$bin_dir/$t" -artifact_prefix="artifacts/$t/" "${args[@]}"
    }
fi

failed=()
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t"
    # An area file is pages of 4 KiB, a zoned device a superblock, a zone table and zones, a
    # hot-store journal 4 KiB page images: their inputs need room for several.
    max_len=4096
    case "$t" in
        wal_area | wal_zoned) max_len=65536 ;;
        hot_journal) max_len=16384 ;;
    esac
    echo "== $t: ${secs}s"
    # -malloc_limit_mb: one allocation above it is reported as a crash; nothing a decoder
    # sizes from a length field may come near it (the largest cap, a compressed block's raw
    # length, is 64 MiB).
    # shellcheck disable=SC2086
    mkdir -p "seeds/$t"
    if ! run_target "$t" "corpus/$t" "seeds/$t" -- \
        -max_total_time="$secs" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
        -malloc_limit_mb=128 -print_final_stats=1 ${FUZZ_ARGS:-}; then
        failed+=("$t")
    fi
done

if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz: crashes in ${failed[*]} (inputs in crates/tierkv/fuzz/artifacts/)" >&2
    exit 1
fi
echo "fuzz: ${#targets[@]} targets ran ${secs}s each without a crash"
