#!/bin/sh
# PSP_DIRECT_CONNECT=1: MPI_Init opens the connections to all ranks of MPI_COMM_WORLD (the
# default opens them on demand). The ring program still passes, and every rank reports
# n + 1 opened connections (PSP_DEBUG_STATS): n - 1 peers plus both ends of its loopback.
. "$(dirname "$0")/mpitest.sh"
mpitest_build ring || mpitest_done
for np in 4 8; do
    PSP_DIRECT_CONNECT=1 PSP_DEBUG_STATS=1 mpitest_job "direct$np" "$np" "$MPITEST_TMP/ring"
    mpitest_merge "np=$np" "ring with PSP_DIRECT_CONNECT=1"
    opened=$(sed -n 's/.*stats: connections opened \([0-9]*\).*/\1/p' "$job.err" | sort -u | tr '\n' ' ')
    nlines=$(grep -c 'stats: connections opened' "$job.err")
    if [ "$nlines" -eq "$np" ] && [ "$opened" = "$((np + 1)) " ]; then
        tap ok "np=$np: every rank opened $((np + 1)) connections at start-up"
    else
        mpitest_comment "$job.err" 6
        tap "not ok" "np=$np: connections opened per rank: '$opened' in $nlines reports (want $np x $((np + 1)))"
    fi
done
# a bad value is a clear warning, and the job still runs (on demand)
PSP_DIRECT_CONNECT=maybe mpitest_job direct_bad 2 "$MPITEST_TMP/ring"
mpitest_merge "np=2" "ring with PSP_DIRECT_CONNECT=maybe"
if grep -q 'PSP_DIRECT_CONNECT' "$job.err"; then
    tap ok "np=2: PSP_DIRECT_CONNECT=maybe is reported"
else
    mpitest_comment "$job.err" 6
    tap "not ok" "np=2: PSP_DIRECT_CONNECT=maybe is reported"
fi
mpitest_done
