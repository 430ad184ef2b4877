#!/usr/bin/env bash
# The fuzz targets (test/fuzz/README.md) as a regression test: each one runs every input of its
# committed corpus (test/fuzz/corpus/TARGET), then fuzzes on for a short bounded run
# (FUZZ_RUNS executions, default 20000, at most FUZZ_TIME seconds, default 10; mutations drawn
# from FUZZ_SEED, default 1, so that a failure comes back; 0: a new seed each time), new inputs
# into a scratch directory. Skips without clang and libFuzzer (maint/install-deps.sh).
# BUILD: where the targets are built (default <repo>/build: build/fuzz).
set -u
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-$TOP/build}
RUNS=${FUZZ_RUNS:-20000}
TIME=${FUZZ_TIME:-10}
SEED=${FUZZ_SEED:-1}
. "$TOP/test/tap.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fuzz.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
if ! printf 'int LLVMFuzzerTestOneInput(const char *d, long n) { return d && n; }\n' |
    ${CLANG:-clang} -fsanitize=fuzzer -x c - -o "$tmp/probe" 2>/dev/null; then
    echo "1..0 # SKIP no clang with libFuzzer (maint/install-deps.sh: clang libfuzzer-14-dev)"
    exit 0
fi

targets=$(make -s -C "$TOP/test/fuzz" BUILD="$BUILD" list)
make -s -C "$TOP/test/fuzz" BUILD="$BUILD" -j"$(nproc 2>/dev/null || echo 2)" >"$tmp/build.log" 2>&1
rc=$?
tap_ok $rc "the fuzz targets build ($targets)"
if [ $rc != 0 ]; then
    tail -20 "$tmp/build.log" | tap_diag
    tap_done
fi

# run TARGET LABEL ARGS...: one libFuzzer run; its crash report to stderr when it fails
run() {
    local t=$1 label=$2 rc
    shift 2
    "$BUILD/fuzz/fuzz_$t" -timeout=20 -rss_limit_mb=2048 -artifact_prefix="$tmp/$t-" "$@" \
        >"$tmp/$t.log" 2>&1
    rc=$?
    tap_ok $rc "$t: $label"
    if [ $rc != 0 ]; then
        grep -E -m5 '(ERROR|SUMMARY|runtime error|Test unit written)' "$tmp/$t.log" |
            sed 's/^/# /' | to_both
        ls "$tmp" | grep "^$t-" | sed "s|^|  input: $tmp/|" >&2
        cp "$tmp/$t"-* "$BUILD/fuzz/" 2>/dev/null && echo "  (kept in $BUILD/fuzz/)" >&2
    fi
}

for t in $targets; do
    n=$(ls "$TOP/test/fuzz/corpus/$t" | wc -l)
    run "$t" "its corpus ($n inputs)" -runs=0 "$TOP/test/fuzz/corpus/$t"
    mkdir -p "$tmp/new-$t"
    run "$t" "$RUNS runs or $TIME s" -runs="$RUNS" -max_total_time="$TIME" -seed="$SEED" "$tmp/new-$t" \
        "$TOP/test/fuzz/corpus/$t"
    execs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1 runs in \2 s/p' "$tmp/$t.log")
    [ -n "$execs" ] && echo "# $t: $execs"
done
tap_done
