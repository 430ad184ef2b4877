#!/usr/bin/env bash
# A long job of mixed traffic with every byte verified (test/mpi/mixed.c), optionally with a
# tcp connection reset in the middle (test/mpi/tcp-reset.sh, ss -K: root). Outside CI.
#
#   maint/longjob.sh [--minutes M] [--np N] [--reset-at S] [--transport tcp|default|ucp]
#                                     (defaults: 30 minutes, 8 ranks, no reset, tcp)
#
# Without --reset-at the job must run its time and exit 0 (mixed.c aborts with "CORRUPT ..."
# on a wrong byte). With --reset-at S one connection between two ranks is reset S seconds in:
# the job must then end, failing, with a message naming the broken connection, within
# PSP_MPI_LOST_PEER_ABORT (default 10 s) and a margin, no rank seeing a wrong byte. Either
# way no process of the job may be left. Prints rank 0's progress lines and a verdict.
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prefix=${PSMPI_PREFIX:-$top/install}
minutes=30 np=8 reset_at="" transport=tcp
while [ $# -gt 0 ]; do
    case $1 in
    --minutes) minutes=${2:?}; shift ;;
    --np) np=${2:?}; shift ;;
    --reset-at) reset_at=${2:?}; shift ;;
    --transport) transport=${2:?}; shift ;;
    -h | --help) sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "longjob.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
case $transport in
tcp) envs=(PSP_SHM=0 PSP_UCP=0) ;;
ucp) envs=(PSP_SHM=0 PSP_TCP=0) ;;
default) envs=() ;;
*) echo "longjob.sh: --transport tcp, ucp or default" >&2; exit 2 ;;
esac
[ -z "$reset_at" ] || [ "$transport" = tcp ] || { echo "longjob.sh: --reset-at needs tcp" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/longjob.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
"$prefix/bin/mpicc" -O2 -Wall -o "$tmp/mixed" "$top/test/mpi/mixed.c" || exit 1
secs=$((minutes * 60))
tag=longjob.$$
echo "== $np ranks, $minutes min of mixed traffic over $transport${reset_at:+, a tcp reset after ${reset_at}s}"
t0=$(date +%s)
env ${envs[@]+"${envs[@]}"} MPITEST_JOB=$tag MPIEXEC_TIMEOUT=$((secs + 300)) \
    "$prefix/bin/mpiexec" -n "$np" "$tmp/mixed" "$secs" "$t0" </dev/null \
    > >(tee "$tmp/out") 2> >(tee "$tmp/err" >&2) &
job=$!
job_pids() { # the ranks: processes carrying our tag whose command is mixed
    grep -lzx -F "MPITEST_JOB=$tag" /proc/[0-9]*/environ 2>/dev/null |
        sed 's,^/proc/,,; s,/environ$,,' | while read -r p; do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = mixed ] && echo "$p"
    done
}
reset="" t_reset=0
if [ -n "$reset_at" ]; then
    while kill -0 $job 2>/dev/null && [ $(($(date +%s) - t0)) -lt "$reset_at" ]; do sleep 1; done
    if kill -0 $job 2>/dev/null; then
        # shellcheck disable=SC2046 # a list of pids
        reset=$("$top/test/mpi/tcp-reset.sh" $(job_pids)) ||
            { echo "longjob.sh: could not reset a connection (root? ss -K?)" >&2; kill $job; exit 1; }
        t_reset=$(date +%s)
        echo "== reset after $((t_reset - t0)) s: $reset"
    else
        echo "== the job ended before the reset"
    fi
fi
wait $job
rc=$?
t1=$(date +%s)
sleep 5
left=$(grep -lzx -F "MPITEST_JOB=$tag" /proc/[0-9]*/environ 2>/dev/null | tr '\n' ' ')
status=0
verdict() { # CONDITION DESCRIPTION
    if eval "$1"; then echo "ok   - $2"; else echo "FAIL - $2"; status=1; fi
}
echo "== the job ended after $((t1 - t0)) s with exit status $rc"
verdict '! grep -q CORRUPT "$tmp/out" "$tmp/err"' "no rank saw a wrong byte"
if [ -z "$reset_at" ] || [ -z "$reset" ]; then
    verdict '[ $rc -eq 0 ] && grep -q "^ok 1" "$tmp/out"' "the job ran its $minutes min and passed"
else
    limit=$((${PSP_MPI_LOST_PEER_ABORT:-10} + 20))
    verdict '[ $rc -ne 0 ]' "the job failed"
    verdict "[ $((t1 - t_reset)) -le $limit ]" "it ended $((t1 - t_reset)) s after the reset (<= $limit)"
    verdict 'grep -q -E "via tcp lost|connection .* broke" "$tmp/err" "$tmp/out"' \
        "the message names the broken connection"
fi
verdict '[ -z "$left" ]' "no process of the job left${left:+: $left}"
exit $status
