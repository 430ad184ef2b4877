#!/bin/sh
# Many ranks on one (oversubscribed) machine: 64 ranks in a ring open at most 2 connections
# each (on-demand connections, counted by PSP_DEBUG_STATS); all-to-all with 64 and 128 ranks
# completes with correct data (128: more shm connections than SysV segments the kernel allows
# at its default shmmni, so some pairs fall back to the next transport).
. "$(dirname "$0")/mpitest.sh"
TIMEOUT=${MPITEST_TIMEOUT:-120}
mpitest_build scale || mpitest_done

PSP_DEBUG_STATS=1 mpitest_job scale.ring64 64 "$MPITEST_TMP/scale" ring
mpitest_merge "np=64" "scale ring"
opened=$(sed -n 's/.*stats: connections opened \([0-9]*\).*/\1/p' "$job.err")
nlines=$(printf '%s\n' "$opened" | grep -c .)
most=$(printf '%s\n' "$opened" | sort -n | tail -n 1)
if [ "$nlines" -eq 64 ] && [ "${most:-99}" -le 2 ]; then
    tap ok "np=64: ring: every rank opened at most 2 connections (most: $most)"
else
    mpitest_comment "$job.err" 6
    tap "not ok" "np=64: ring: connections opened per rank: $nlines reports, most ${most:-none} (want 64 reports, <= 2)"
fi

for np in 64 128; do
    mpitest_job "scale.a2a$np" "$np" "$MPITEST_TMP/scale" alltoall
    mpitest_merge "np=$np" "scale alltoall"
done
mpitest_done
