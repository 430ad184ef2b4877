#!/bin/sh
# MPI_Abort and a rank killed by SIGKILL, with 1, 2, 4 and 8 ranks: the whole job ends at once
# with the right exit status and a message saying why, and leaves no process behind. Last, an
# MPI_Init that fails (a bad MPIR_CVAR_ value) says why, once per rank, and nothing else.
. "$(dirname "$0")/mpitest.sh"
mpitest_build abort || mpitest_done
mpitest_build crash || mpitest_done

ended() { # PROG: the job ended by itself, quickly, with the expected exit status
    ! job_timed_out && [ "$job_secs" -le 20 ] || return 1
    case $1 in
    abort) [ "$job_rc" -eq 7 ] ;;
    crash) [ "$job_rc" -ne 0 ] ;;
    esac
}

said() { # PROG: what the user sees about the failure, on mpiexec's stdout or stderr
    case $1 in
    abort) grep -q 'application called MPI_Abort(MPI_COMM_WORLD, 7)' "$job.out" "$job.err" ;;
    crash) grep -q 'BAD TERMINATION' "$job.out" "$job.err" &&
        grep -q -i 'signal 9' "$job.out" "$job.err" ;;
    esac
}

for np in $NPS; do
    for prog in abort crash; do
        mpitest_job "$prog.np$np" "$np" "$MPITEST_TMP/$prog"
        want="7, the MPI_Abort code"
        [ $prog = abort ] || want="not 0"
        what="np=$np: $prog: job ends after ${job_secs}s, exit status $job_rc ($want)"
        if ended $prog; then
            tap ok "$what"
        else
            mpitest_comment "$job.out" 12
            mpitest_comment "$job.err" 12
            tap "not ok" "$what"
        fi

        # (maint/patches/0004 and 0005 make hydra keep the message and the code reliably)
        if said $prog; then
            tap ok "np=$np: $prog: message on mpiexec's output"
        else
            tap "not ok" "np=$np: $prog: message on mpiexec's output"
        fi

        if [ -z "$job_left" ] && ! grep -q 'not reached' "$job.out"; then
            tap ok "np=$np: $prog: no process left behind, no rank went on"
        else
            tap "not ok" "np=$np: $prog: processes left: ${job_left:-none}; $(grep -c 'not reached' "$job.out") ranks went on"
        fi
    done
done

# MPI_Init fails before there is a world: the abort must not try the launcher's PMI connection,
# which is not up yet ("[unset]: write_line error; fd=-1" with maint/patches/0005 before)
mpitest_job init-fails 2 -genv MPIR_CVAR_BCAST_INTRA_ALGORITHM no_such_algorithm \
    "$MPITEST_TMP/abort"
what="MPI_Init fails (bad MPIR_CVAR_BCAST_INTRA_ALGORITHM): exit status $job_rc, after ${job_secs}s"
if [ "$job_rc" -ne 0 ] && ! job_timed_out && [ -z "$job_left" ]; then
    tap ok "$what"
else
    mpitest_comment "$job.err" 12
    tap "not ok" "$what"
fi
reason='Invalid MPIR_CVAR_BCAST_INTRA_ALGORITHM value (no_such_algorithm)'
said=$(cat "$job.out" "$job.err" | grep -c "$reason")
other=$(cat "$job.out" "$job.err" | grep -v 'Invalid MPIR_CVAR_BCAST_INTRA_ALGORITHM' | grep -c .)
if [ "$said" -eq 2 ] && [ "$other" -eq 0 ]; then
    tap ok "MPI_Init fails: each rank says why, nothing else is printed"
else
    mpitest_comment "$job.out" 12
    mpitest_comment "$job.err" 12
    tap "not ok" "MPI_Init fails: $said lines say why (want 2), $other other lines (want 0)"
fi
mpitest_done
