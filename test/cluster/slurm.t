#!/usr/bin/env bash
# MPI jobs under a real Slurm (test/cluster/slurm) on a simulated cluster of 2 nodes x 2 CPUs,
# started the two usual ways from node1 (the login node):
#   srun --mpi=pmi2 -N 2 -n 4 PROG            Slurm's PMI-2 plugin answers MPICH's PMI-1 client
#   salloc -N 2 -n 4 mpiexec PROG             hydra starts its proxies with srun
# each with test/mpi/ring.c (ranks 0-1 on node1, 2-3 on node2; every connection's transport
# checked: shm within a node, ucp between) and test/mpi/crash.c (rank 3 killed by SIGKILL: the
# command fails within 5 s with a message naming rank, node and signal, the job is FAILED, no
# step and no process is left). srun --mpi=pmix runs both too when PSMPI_PMIX_PREFIX names an
# MPI configured with PMIx (MPICH_CONFIGURE_FLAGS=--with-pmix=...); otherwise that line skips.
. "$(dirname "$0")/../mpi/mpitest.sh"
export VCLUSTER=slurmt # not test/cluster/slurm's default (slurm): a user may have that one up
. "$TOP/test/cluster/lib.sh"
for c in munged mungekey slurmctld slurmd srun salloc sinfo squeue scontrol; do
    command -v $c >/dev/null ||
        { echo "1..0 # SKIP $c is missing (maint/install-deps.sh --slurm)"; exit 0; }
done
SLURM=$CLUSTER/slurm
MAXSECS=5 # a crashed job must end within this

trap '"$SLURM" stop >/dev/null 2>&1; [ "${MPITEST_KEEP:-0}" = 1 ] || rm -rf "$MPITEST_TMP"' EXIT
t0=$(date +%s.%N)
if ! "$SLURM" start 2 >"$MPITEST_TMP/start.log" 2>&1; then
    sed 's/^/# /' "$MPITEST_TMP/start.log"
    echo "Bail out! test/cluster/slurm start 2 failed"
    exit 1
fi
eval "$("$SLURM" env)"
since() { awk -v t0="$1" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.1f", t1 - t0 }'; }
tap ok "slurm start 2: munged, slurmctld, 2 slurmd, both nodes idle after $(since "$t0")s"

in_node1() { "$VC" exec node1 "$@"; }

# NAME CMD...: mpitest_job with CMD run in node1, the login node
sjob() {
    local name=$1 MPIEXEC=$VC
    shift
    mpitest_job "$name" - exec node1 "$@"
}

# NAME: the Slurm job's final state (squeue keeps ended jobs for MinJobAge)
job_state() {
    local st=""
    for _ in $(seq 50); do
        st=$(in_node1 squeue -h -t all -n "$1" -o %T 2>/dev/null)
        case $st in "" | *PENDING* | *RUNNING* | *COMPLETING*) sleep 0.2 ;; *) break ;; esac
    done
    echo "${st:-unknown}"
}

# job steps still known to slurmctld, then the processes in the nodes other than the daemons,
# after up to 5 s (slurmstepd ends shortly after the command returns)
leftovers() {
    local left k pid cmd
    for _ in $(seq 25); do
        left=$(in_node1 squeue -h -s -o '%i' 2>&1 | sed 's/^/step /')
        for k in 1 2; do
            for pid in $("$VC" ps node$k); do
                cmd=$({ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null) || continue
                case $cmd in
                "" | "munged "* | "slurmctld "* | ": slurmscriptd"* | "slurmd "*) ;;
                *) left="$left node$k:$pid(${cmd%% *})" ;;
                esac
            done
        done
        [ -z "$left" ] && break
        sleep 0.2
    done
    echo "$left" | tr '\n' ' ' | sed 's/^ *//; s/ *$//'
}

# LABEL NAME CMD...: ring.c's TAP, the job itself, where the ranks ran and over what
ring_case() {
    local label=$1 name=$2 places contype ct left
    shift 2
    PSP_DEBUG_CONTYPE=1 sjob "$name" "$@"
    mpitest_merge "$label" ring
    places=$(sed -n 's/^# hello from rank \([0-9]*\) of 4 on \(node[0-9]*\)$/\1:\2/p' "$job.out" |
        sort -n | tr '\n' ' ')
    contype=$(vc_contype ucp "$job.err")
    ct=$?
    echo "$contype"
    if [ "$places" = "0:node1 1:node1 2:node2 3:node2 " ] && [ $ct -eq 0 ]; then
        tap ok "$label: ranks 0-1 of 4 on node1, 2-3 on node2; $(echo "$contype" | tail -1 | cut -c3-)"
    else
        mpitest_comment "$job.err" 8
        tap "not ok" "$label: ranks (rank:node) ${places:-none}, expected 0-1 on node1, 2-3 on node2; transports: $(echo "$contype" | tail -1 | cut -c3-)"
    fi
    left=$(leftovers)
    if [ -z "$left" ]; then
        tap ok "$label: no job step, no process left in the nodes"
    else
        tap "not ok" "$label: left: $left"
    fi
}

# LABEL NAME WHAT CMD...: crash.c, rank 3 (on node2) killed by SIGKILL. WHAT: srun or hydra,
# which of the two reports it
crash_case() {
    local label=$1 name=$2 what=$3 msg state left
    shift 3
    sjob "$name" "$@"
    if [ "$job_rc" -ne 0 ] && ! job_timed_out &&
        awk -v t="$job_time" -v m=$MAXSECS 'BEGIN { exit !(t <= m) }'; then
        tap ok "$label: crash: exits with status $job_rc after ${job_time}s (limit ${MAXSECS}s)"
    else
        mpitest_comment "$job.out" 8
        mpitest_comment "$job.err" 8
        tap "not ok" "$label: crash: exit status $job_rc after ${job_time}s (want non-zero within ${MAXSECS}s)"
    fi

    case $what in
    srun) msg=$(grep -h -m1 'srun: error: node2: task 3: Killed' "$job.out" "$job.err") ;;
    hydra) # "RANK 3 PID 123 RUNNING AT node2" and on the next line "KILLED BY SIGNAL: 9 (Killed)"
        msg=$(cat "$job.out" "$job.err" | grep -A1 'RANK 3 PID [0-9]* RUNNING AT node2' |
            grep -B1 'KILLED BY SIGNAL: 9' | sed 's/^= *//' | tr '\n' ' ' | sed 's/ *$//') ;;
    esac
    if [ -n "$msg" ]; then
        tap ok "$label: crash: message names rank, node and signal: '$msg'"
    else
        tap "not ok" "$label: crash: no message naming rank 3, node2 and SIGKILL"
    fi

    state=$(job_state "$name")
    if [ "$state" = FAILED ]; then
        tap ok "$label: crash: Slurm job $name is FAILED"
    else
        in_node1 scontrol show job 2>&1 | grep -E 'JobId|JobState' | tail -4 | sed 's/^/# /'
        tap "not ok" "$label: crash: Slurm job $name is $state, not FAILED"
    fi

    left=$(leftovers)
    if [ -z "$left" ] && [ -z "$job_left" ] && ! grep -q 'not reached' "$job.out"; then
        tap ok "$label: crash: no job step, no process left in the nodes, no rank went on"
    else
        tap "not ok" "$label: crash: left: ${left:-none} ${job_left:-}; $(grep -c 'not reached' "$job.out") ranks went on"
    fi
}

mpitest_build ring || mpitest_done
mpitest_build crash || mpitest_done
cd "$MPITEST_TMP" || exit 1 # tasks start in srun's directory: /tmp is shared by the nodes

ring_case "srun --mpi=pmi2" srun-ring srun --mpi=pmi2 -J srun-ring -N 2 -n 4 ./ring
crash_case "srun --mpi=pmi2" srun-crash srun srun --mpi=pmi2 -J srun-crash -N 2 -n 4 ./crash
ring_case "salloc + mpiexec" salloc-ring salloc -J salloc-ring -N 2 -n 4 "$PREFIX/bin/mpiexec" ./ring
crash_case "salloc + mpiexec" salloc-crash hydra \
    salloc -J salloc-crash -N 2 -n 4 "$PREFIX/bin/mpiexec" ./crash

if [ -n "${PSMPI_PMIX_PREFIX:-}" ]; then
    if mpitest_build_with "$PSMPI_PMIX_PREFIX/bin/mpicc" ring-pmix ring.c -O2 &&
        mpitest_build_with "$PSMPI_PMIX_PREFIX/bin/mpicc" crash-pmix crash.c -O2; then
        ring_case "srun --mpi=pmix" pmix-ring srun --mpi=pmix -J pmix-ring -N 2 -n 4 ./ring-pmix
        crash_case "srun --mpi=pmix" pmix-crash srun srun --mpi=pmix -J pmix-crash -N 2 -n 4 ./crash-pmix
    fi
else
    tap ok "srun --mpi=pmix # SKIP needs an MPI configured with PMIx: MPICH_CONFIGURE_FLAGS=--with-pmix=/usr/lib/x86_64-linux-gnu/pmix2 maint/build.sh --prefix=DIR (libpmix-dev), then PSMPI_PMIX_PREFIX=DIR"
fi
mpitest_done
