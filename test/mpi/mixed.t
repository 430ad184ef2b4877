#!/bin/sh
# Mixed traffic with every byte verified (mixed.c: pairwise, many-to-one, late receivers,
# collectives, RMA; sizes 0 to 4 MiB), 8 ranks for a few seconds over the default transports
# and over tcp alone. Then one of the job's tcp connections is reset mid-traffic (ss -K, as
# root): the job must end, failing, within PSP_MPI_LOST_PEER_ABORT and a margin, with a message
# that names the broken connection, no rank may have seen a wrong byte, and no process may be
# left. A reset loses what was in flight in both kernels; pscom has no replay buffer above
# TCP, so the job ends rather than going on with a hole in its data. maint/longjob.sh runs the
# same traffic for 30 minutes.
. "$(dirname "$0")/mpitest.sh"
SECS=${MIXED_SECS:-6}
mpitest_build mixed || mpitest_done

mpitest_job default 8 "$MPITEST_TMP/mixed" "$SECS" 1
mpitest_merge "default np=8" mixed
mpitest_job tcp 8 -env PSP_SHM 0 -env PSP_UCP 0 "$MPITEST_TMP/mixed" "$SECS" 2
mpitest_merge "tcp np=8" mixed

# the reset: a job of 4 ranks over tcp, one connection killed once traffic flows
ABORT_S=5
job=$MPITEST_TMP/reset
tag=$$.reset
MPITEST_JOB=$tag MPIEXEC_TIMEOUT=$TIMEOUT PSP_SHM=0 PSP_UCP=0 PSP_MPI_LOST_PEER_ABORT=$ABORT_S \
    timeout -k 5 $((TIMEOUT + 15)) "$MPIEXEC" -n 4 "$MPITEST_TMP/mixed" 60 3 \
    </dev/null >"$job.out" 2>"$job.err" &
bg=$!
reset=""
i=0
while [ -z "$reset" ] && [ $i -lt 50 ] && kill -0 $bg 2>/dev/null; do
    sleep 0.2
    i=$((i + 1))
    ranks=""
    for p in $(mpitest_leftovers "$tag"); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = mixed ] && ranks="$ranks $p"
    done
    # shellcheck disable=SC2086 # a list of pids
    [ -n "$ranks" ] && [ $i -ge 10 ] && reset=$("$TOP/test/mpi/tcp-reset.sh" $ranks)
done
t0=$(date +%s)
if [ -z "$reset" ]; then
    kill -TERM $bg 2>/dev/null
    wait $bg
    mpitest_wait_gone "$tag"
    if [ "$(id -u)" != 0 ]; then
        tap ok "a reset tcp connection # SKIP not root (ss -K)"
    else
        tap ok "a reset tcp connection # SKIP ss -K could not reset a connection of the job"
    fi
    mpitest_done
fi
wait $bg
job_rc=$?
job_secs=$(($(date +%s) - t0))
mpitest_wait_gone "$tag"
echo "# reset $reset; the job ended after ${job_secs}s with exit status $job_rc"
grep -h -E 'lost|broke|BAD TERMINATION|Abort' "$job.out" "$job.err" | head -n 6 | sed 's/^/# /'
ok_if() { # DESCRIPTION CONDITION...
    d=$1
    shift
    if "$@"; then tap ok "$d"; else tap "not ok" "$d"; fi
}
ok_if "reset: the job fails (exit status $job_rc), no timeout" \
    eval '[ "$job_rc" -ne 0 ] && ! job_timed_out'
ok_if "reset: it ends within ${job_secs}s <= PSP_MPI_LOST_PEER_ABORT ($ABORT_S) + 15" \
    test "$job_secs" -le $((ABORT_S + 15))
ok_if "reset: the message names the broken tcp connection" \
    grep -q -E 'via tcp lost|connection .* broke' "$job.out" "$job.err"
ok_if "reset: no rank saw a wrong byte" eval '! grep -q CORRUPT "$job.out" "$job.err"'
ok_if "reset: no process left${job_left:+: $job_left}" test -z "$job_left"
mpitest_done
