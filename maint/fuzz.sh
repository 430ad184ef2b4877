#!/usr/bin/env bash
# Fuzz the project's parsers with libFuzzer (test/fuzz/README.md): build the targets
# (test/fuzz/Makefile: clang, libfuzzer-14-dev) and run each on its committed corpus, one
# after another.
#
#   maint/fuzz.sh [--time SECONDS] [--runs N] [--merge] [--list] [TARGET...]
#
#   --time S   each target runs S seconds (default 60; 0: no limit); with --runs alone: no limit
#   --runs N   each target stops after N executions
#   --merge    inputs that found new coverage are added (minimised) to test/fuzz/corpus/TARGET;
#              without it they stay in the scratch corpus $BUILD/fuzz/work/TARGET, which the
#              next run starts from too
#   --list     the targets this host can build (am needs an MPICH build tree in _build/)
#   TARGET     wire precon shm gw psgwd psnamd psnam_client am (default: all)
#
# Prints executions and time per target. Exits non-zero if a target crashed (an ASan/UBSan
# report, a leak, an input that ran over 20 s or 2 GB), after all have run; the input is saved
# as $BUILD/fuzz/crashes/TARGET-crash-<sha1> (or -leak-, -timeout-, -oom-) and its log as
# $BUILD/fuzz/logs/TARGET.log. Reproduce: $BUILD/fuzz/fuzz_TARGET FILE. Environment: BUILD
# (default build/), FUZZ_ARGS (more libFuzzer options), FUZZ_LOG=1 (pscom's and the daemons'
# log lines on stderr).
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
BUILD=${BUILD:-$top/build}
time_s="" runs="" merge=0 list=0 targets=()
usage() {
    sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit "${1:-2}"
}
while [ $# -gt 0 ]; do
    case $1 in
    --time) time_s=${2:?--time needs a value}; shift ;;
    --time=*) time_s=${1#--time=} ;;
    --runs) runs=${2:?--runs needs a value}; shift ;;
    --runs=*) runs=${1#--runs=} ;;
    --merge) merge=1 ;;
    --list) list=1 ;;
    -h | --help) usage 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; usage ;;
    *) targets+=("$1") ;;
    esac
    shift
done
for v in "$time_s" "$runs"; do
    case $v in '' | *[!0-9]*) [ -z "$v" ] || { echo "fuzz.sh: not a number: $v" >&2; exit 2; } ;; esac
done
[ -n "$time_s" ] || { [ -n "$runs" ] && time_s=0 || time_s=60; }

available=$(make -s -C test/fuzz BUILD="$BUILD" list) || exit 2
if [ "$list" = 1 ]; then
    echo "$available"
    exit 0
fi
[ ${#targets[@]} -gt 0 ] || read -r -a targets <<<"$available"
for t in "${targets[@]}"; do
    [[ " $available " == *" $t "* ]] || { echo "fuzz.sh: no target $t here (--list)" >&2; exit 2; }
done
if ! command -v "${CLANG:-clang}" >/dev/null; then
    echo "fuzz.sh: clang is missing (maint/install-deps.sh: clang libfuzzer-14-dev)" >&2
    exit 2
fi
make -s -C test/fuzz BUILD="$BUILD" -j"$(nproc 2>/dev/null || echo 2)" \
    $(printf "$BUILD/fuzz/fuzz_%s " "${targets[@]}") || {
    echo "fuzz.sh: building the targets failed" >&2
    exit 2
}

crashes=$BUILD/fuzz/crashes logs=$BUILD/fuzz/logs
mkdir -p "$crashes" "$logs"
status=0
for t in "${targets[@]}"; do
    work=$BUILD/fuzz/work/$t
    mkdir -p "$work"
    before=$(ls "$crashes" | grep -c "^$t-")
    # shellcheck disable=SC2086 # FUZZ_ARGS: words on purpose
    "$BUILD/fuzz/fuzz_$t" -max_total_time="$time_s" ${runs:+-runs=$runs} -timeout=20 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$crashes/$t-" ${FUZZ_ARGS:-} \
        "$work" "test/fuzz/corpus/$t" >"$logs/$t.log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$logs/$t.log" | tail -1)
    secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$logs/$t.log" | tail -1)
    new=$(ls -tr "$crashes" | grep "^$t-" | tail -n +$((before + 1)))
    slow=$(printf '%s\n' $new | grep -- '-slow-unit-') # libFuzzer's note (-report_slow_units)
    new=$(printf '%s\n' $new | grep -v -- '-slow-unit-')
    corpus="corpus $(ls "test/fuzz/corpus/$t" | wc -l) + $(ls "$work" | wc -l) new"
    if [ "$rc" = 72 ] && [ -z "$new" ]; then # libFuzzer's exit status after SIGINT/SIGTERM
        echo "$t: interrupted after ${execs:-?} executions"
        status=1
        break
    fi
    if [ "$rc" != 0 ] || [ -n "$new" ]; then
        status=1
        echo "$t: CRASH after ${execs:-?} executions (exit $rc); log $logs/$t.log"
        for f in $new; do echo "  input: $crashes/$f  (reproduce: $BUILD/fuzz/fuzz_$t $crashes/$f)"; done
        grep -m3 -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error)' "$logs/$t.log" | sed 's/^/  /'
        continue
    fi
    echo "$t: ${execs:-?} executions in ${secs:-?} s ($(( ${execs:-0} / (${secs:-1} > 0 ? ${secs:-1} : 1) ))/s), $corpus, no crash"
    for f in $slow; do echo "  an input ran slowly once (over 10 s; a loaded machine?): $crashes/$f"; done
    if [ "$merge" = 1 ]; then
        "$BUILD/fuzz/fuzz_$t" -merge=1 "test/fuzz/corpus/$t" "$work" >>"$logs/$t.log" 2>&1 ||
            { echo "$t: merging into test/fuzz/corpus/$t failed (log $logs/$t.log)"; status=1; }
        echo "$t: corpus now $(ls "test/fuzz/corpus/$t" | wc -l) inputs"
    fi
done
exit $status
