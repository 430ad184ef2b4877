# Shared by the test/mpi/*.t scripts (POSIX sh, sourced): build a test with the installed mpicc
# (or another compiler: mpitest_build_with), run it under mpiexec once per rank count and merge
# the jobs' TAP into one stream.
#
#   PSMPI_PREFIX     the installation (default: <checkout>/install)
#   MPITEST_NPS      rank counts (default "1 2 4 8"; 8 oversubscribes a 2-core machine on purpose)
#   MPITEST_TIMEOUT  seconds per job (default 30): hydra's MPIEXEC_TIMEOUT; `timeout` kills
#                    mpiexec itself 15 s later in case hydra hangs too
#   MPITEST_MPIEXEC  the launcher (default PREFIX/bin/mpiexec; test/cluster passes one that
#                    starts mpiexec on a simulated node)
#   MPITEST_KEEP=1   keep the temporary directory (binaries, job output) for debugging
#   PSP_SHM=0 ...    reach the ranks (mpiexec passes the environment on)
#
# Each job's TAP lines come out renumbered with "np=N:" in front, followed by one line for the
# job itself: exit status 0, no timeout, every planned test reported, no process left behind.
# The plan goes last (valid TAP), when the number of lines is known.
TOP=$(cd "$(dirname "$0")/../.." && pwd)
PREFIX=${PSMPI_PREFIX:-$TOP/install}
NPS=${MPITEST_NPS:-1 2 4 8}
TIMEOUT=${MPITEST_TIMEOUT:-30}
# this machine may have other MPIs installed: use ours explicitly
MPICC=$PREFIX/bin/mpicc
MPIEXEC=${MPITEST_MPIEXEC:-$PREFIX/bin/mpiexec}

mpitest_n=0      # TAP lines printed so far
mpitest_failed=0 # of which "not ok" without a TODO

if [ ! -x "$MPICC" ] || [ ! -x "$MPIEXEC" ]; then
    echo "1..0 # SKIP no MPI installed in $PREFIX (run make install)"
    exit 0
fi
MPITEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/mpitest.XXXXXX") || exit 1
# shellcheck disable=SC2064 # expand now: the path is fixed
[ "${MPITEST_KEEP:-0}" = 1 ] || trap "rm -rf '$MPITEST_TMP'" EXIT
trap 'exit 1' HUP INT PIPE TERM # the EXIT trap runs on these too

tap() { # STATUS DESCRIPTION: one TAP line, numbered
    mpitest_n=$((mpitest_n + 1))
    echo "$1 $mpitest_n - $2"
    case "$1 $2" in
    "not ok"*"# TODO"*) ;;
    "not ok"*)
        mpitest_failed=$((mpitest_failed + 1))
        # prove shows a test's stderr, not its TAP: a CI log then still says what failed
        echo "${0##*/}: $1 $mpitest_n - $2" >&2
        ;;
    esac
}

mpitest_done() { # print the plan and exit: 1 if anything failed (make hello relies on it)
    echo "1..$mpitest_n"
    [ "$mpitest_failed" -eq 0 ]
    exit
}

mpitest_comment() { # FILE [LINES]: the end of a file as TAP comments
    [ -s "$1" ] && tail -n "${2:-8}" "$1" | sed 's/^/# /'
    return 0
}

mpitest_to_both() { # lines to stdout (the TAP) and stderr (what prove shows of a failed test)
    while IFS= read -r mpitest_l; do
        printf '%s\n' "$mpitest_l"
        printf '%s\n' "$mpitest_l" >&2
    done
}

mpitest_build() { # NAME [CFLAGS...]: test/mpi/NAME.c -> $MPITEST_TMP/NAME, else a "not ok"
    mpitest_name=$1
    shift
    mpitest_build_with "$MPICC" "$mpitest_name" "$mpitest_name.c" -Wall -Wextra -O2 "$@"
}

# COMPILER NAME SOURCE [FLAGS...]: any other compiler or wrapper (mpifort, mpif77, Debian's
# mpicc.mpich, ...): test/mpi/SOURCE -> $MPITEST_TMP/NAME, else a "not ok"; warnings as comments
mpitest_build_with() {
    mpitest_cc=$1
    mpitest_name=$2
    mpitest_src=$3
    shift 3
    if "$mpitest_cc" "$@" -o "$MPITEST_TMP/$mpitest_name" "$TOP/test/mpi/$mpitest_src" \
        >"$MPITEST_TMP/cc.err" 2>&1; then
        mpitest_comment "$MPITEST_TMP/cc.err" 20 # warnings
        return 0
    fi
    mpitest_comment "$MPITEST_TMP/cc.err" 20
    tap "not ok" "$mpitest_src compiles with ${mpitest_cc##*/}"
    return 1
}

mpitest_leftovers() { # TAG: pids of processes that still carry MPITEST_JOB=TAG
    grep -lzx -F "MPITEST_JOB=$1" /proc/[0-9]*/environ 2>/dev/null |
        sed 's,^/proc/,,; s,/environ$,,' | tr '\n' ' ' | sed 's/ $//'
}

# JOB NP [MPIEXEC ARGS...] PROGRAM [ARGS...]: run one job under both timeouts, stdin closed.
# NP "-" adds no -n: the arguments are the whole mpiexec line (MPMD blocks with ":" and -env).
# Output in $job.out (stdout: rank 0's TAP) and $job.err; sets job_rc, job_secs, job_time, job_left
# (processes still there 5 s after mpiexec returned; they are killed).
mpitest_job() {
    job=$MPITEST_TMP/$1
    mpitest_np=$2
    shift 2
    [ "$mpitest_np" = - ] || set -- -n "$mpitest_np" "$@"
    mpitest_tag=$$.${job##*/} # job names are unique in a .t; jobs may run side by side
    mpitest_t0=$(date +%s%N)
    MPITEST_JOB=$mpitest_tag MPIEXEC_TIMEOUT=$TIMEOUT timeout -k 5 $((TIMEOUT + 15)) \
        "$MPIEXEC" "$@" </dev/null >"$job.out" 2>"$job.err"
    job_rc=$?
    # whole seconds (job_secs) for comparisons, tenths (job_time) for reports
    job_time=$(awk -v a="$mpitest_t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
    job_secs=${job_time%.*}
    mpitest_wait_gone "$mpitest_tag"
}

mpitest_wait_gone() { # TAG: set job_left; kill what is still there after 5 s
    job_left=$(mpitest_leftovers "$1")
    mpitest_i=0
    while [ -n "$job_left" ] && [ $mpitest_i -lt 10 ]; do
        sleep 0.5
        mpitest_i=$((mpitest_i + 1))
        job_left=$(mpitest_leftovers "$1")
    done
    # shellcheck disable=SC2086 # a list of pids
    [ -z "$job_left" ] || kill -9 $job_left 2>/dev/null
    return 0
}

job_timed_out() {
    # hydra prints its timeout message to stdout
    [ "$job_rc" -eq 124 ] || [ "$job_rc" -eq 137 ] || grep -q 'TIMED OUT' "$job.out" "$job.err"
}

# LABEL NAME: print the job's TAP lines renumbered as "LABEL: ...", then one line for the job.
# A program may skip a whole job with a plan "1..0 # SKIP why".
mpitest_merge() {
    mpitest_label=$1
    awk -v n="$mpitest_n" -v label="$mpitest_label" -v state="$job.state" '
        /^1\.\.[0-9]+/ {
            plans++; plan = $0; sub(/^1\.\./, "", plan); sub(/[^0-9].*/, "", plan)
            if (match($0, /#[ \t]*[Ss][Kk][Ii][Pp].*/)) skip = substr($0, RSTART + 1)
            next
        }
        /^(not )?ok([ \t]|$)/ {
            st = "ok"; rest = $0
            if (rest ~ /^not /) { st = "not ok"; if (rest !~ /#[ \t]*TODO/) failed++ }
            sub(/^(not )?ok[ \t]*[0-9]*[ \t]*(-[ \t]*)?/, "", rest)
            printf "%s %d - %s: %s\n", st, ++n, label, rest
            seen++
            next
        }
        /^#/ { print; next }
        /^[ \t]*$/ { next }
        { print "# " $0 }
        END {
            if (plans > 1) plan = "many"
            printf "%d %d %s %d %s\n", n, seen, plan == "" ? "none" : plan, failed, skip > state
        }
    ' "$job.out"
    read -r mpitest_n mpitest_seen mpitest_plan mpitest_bad mpitest_skip <"$job.state"
    mpitest_failed=$((mpitest_failed + mpitest_bad))

    mpitest_why=""
    if job_timed_out; then
        mpitest_why="timed out after ${job_secs}s (limit ${TIMEOUT}s)"
    elif [ "$job_rc" -ne 0 ]; then
        mpitest_why="exit status $job_rc"
    fi
    if [ "$mpitest_plan" = none ]; then
        mpitest_why="${mpitest_why:+$mpitest_why, }no TAP plan"
    elif [ "$mpitest_plan" = many ]; then
        mpitest_why="${mpitest_why:+$mpitest_why, }more than one TAP plan"
    elif [ "$mpitest_seen" -ne "$mpitest_plan" ]; then
        mpitest_why="${mpitest_why:+$mpitest_why, }$mpitest_seen of $mpitest_plan tests reported"
    fi
    [ -z "$job_left" ] || mpitest_why="${mpitest_why:+$mpitest_why, }processes left: $job_left"
    if [ -n "$mpitest_why" ]; then
        mpitest_comment "$job.err" 12 | mpitest_to_both
        tap "not ok" "$mpitest_label: $2 job: $mpitest_why"
    elif [ -n "$mpitest_skip" ]; then
        tap "ok" "$mpitest_label: $2 # $mpitest_skip"
    else
        tap "ok" "$mpitest_label: $2 job exits 0 after ${job_secs}s, all $mpitest_plan tests reported"
    fi
}

# NAME [MPIEXEC ARGS...]: the usual test: build test/mpi/NAME.c, run it with every NP in NPS,
# print the merged TAP and the plan, exit.
mpitest_run() {
    name=$1
    shift
    mpitest_build "$name" ${MPICC_EXTRA:+"$MPICC_EXTRA"} || mpitest_done
    for np in $NPS; do
        mpitest_job "$name.np$np" "$np" "$@" "$MPITEST_TMP/$name"
        mpitest_merge "np=$np" "$name"
    done
    mpitest_done
}
