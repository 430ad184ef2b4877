#!/bin/sh
# Oversubscribed nodes: with more ranks on a node than CPUs the netmod tells pscom so
# (pscom_set_oversubscribed), and shm sends messages below 32 KiB eager instead of by
# rendezvous from 8 KiB (a rendezvous waits for the peer to be scheduled). eager.c exchanges
# 16, 64 and 256 KiB between two ranks; PSP_DEBUG_STATS says how many each rank sent by
# rendezvous. With a CPU per rank (also when mpiexec binds each rank to a core of its own) that
# is those from the threshold shm chose (8 KiB, or 64 KiB where a single-copy call is slow to
# start, which PSP_DEBUG=2 reports): 3 or 2; 3 when the user sets PSP_SHM_RENDEZVOUS=8k. With
# both ranks on one CPU (taskset): 2 (64 and 256 KiB), 3 again when the user sets
# PSP_SHM_RENDEZVOUS=8k. The ranks of the crowded jobs run as SCHED_BATCH (PSP_MPI_SCHED_BATCH),
# the others and those told not to as SCHED_OTHER.
. "$(dirname "$0")/mpitest.sh"
mpitest_build eager || mpitest_done

# rendezvous counts of the job's ranks, sorted ("1 1"), from their stats lines
rndv_counts() {
    sed -n 's/.*stats: rendezvous sent \([0-9]*\).*/\1/p' "$job.err" | sort | tr '\n' ' ' | sed 's/ $//'
}

# LABEL WANT: both ranks of the job report scheduling policy WANT (batch, other)
expect_policy() {
    got=$(sed -n 's/^eager: rank [0-9]* scheduling policy //p' "$job.err" | sort | tr '\n' ' ')
    if [ "$got" = "$2 $2 " ]; then
        tap ok "$1: both ranks run as SCHED_$(echo "$2" | tr a-z A-Z)"
    else
        mpitest_comment "$job.err" 6
        tap "not ok" "$1: scheduling policies '$got', want '$2 $2'"
    fi
}

# LABEL WANT DESCRIPTION: the job passed, and both ranks sent WANT messages by rendezvous
expect_rndv() {
    mpitest_merge "$1" "eager.c, $3"
    got=$(rndv_counts)
    case "${PSP_SHM:-1}" in
    0) tap ok "$1: rendezvous count # SKIP shm is off (PSP_SHM=0)" ;;
    *) if [ "$got" = "$2 $2" ]; then
        tap ok "$1: each rank sent $2 of 3 messages by rendezvous ($3)"
    else
        mpitest_comment "$job.err" 6
        tap "not ok" "$1: rendezvous sends per rank '$got', want '$2 $2' ($3)"
    fi ;;
    esac
}

# the first CPU this shell may use: both ranks go there
cpu=$(taskset -c -p $$ 2>/dev/null | sed 's/.*: *//; s/[-,].*//')
if [ -z "$cpu" ]; then
    tap ok "oversubscribed node # SKIP no taskset"
    mpitest_done
fi

# mpiexec with both ranks (and itself) on that CPU
printf '#!/bin/sh\nexec taskset -c %s "%s" "$@"\n' "$cpu" "$MPIEXEC" >"$MPITEST_TMP/mpiexec1"
chmod +x "$MPITEST_TMP/mpiexec1"
all_cpus=$MPIEXEC
MPIEXEC=$MPITEST_TMP/mpiexec1
PSP_DEBUG_STATS=1 mpitest_job one_cpu 2 "$MPITEST_TMP/eager"
expect_rndv "np=2 one CPU" 2 "oversubscribed: 64 and 256 KiB by rendezvous"
expect_policy "np=2 one CPU" batch
PSP_DEBUG_STATS=1 PSP_SHM_RENDEZVOUS=8k PSP_MPI_SCHED_BATCH=0 mpitest_job one_cpu_user 2 \
    "$MPITEST_TMP/eager"
expect_rndv "np=2 one CPU" 3 "PSP_SHM_RENDEZVOUS=8k set by the user wins"
expect_policy "np=2 one CPU, PSP_MPI_SCHED_BATCH=0" other
# threads that hand MPICH's lock to each other would wait a time slice for it as batch tasks
EAGER_THREADS=multiple mpitest_job one_cpu_mt 2 "$MPITEST_TMP/eager"
mpitest_merge "np=2 one CPU, MPI_THREAD_MULTIPLE" "eager.c"
expect_policy "np=2 one CPU, MPI_THREAD_MULTIPLE" other
MPIEXEC=$all_cpus

# Per rank, how many of eager.c's 16k, 64k and 256k reach the threshold that its shm reported in
# $job.err (PSP_DEBUG=2: "<PSP:rN> shm: ... rendezvous from N bytes"; 8 KiB where it reported
# none), and how many it sent by rendezvous: "rN:want/got" words, sorted. Each rank measures its
# own single-copy call, and where one takes about the 1 us that decides (1.2-1.4 us measured on
# one host kind) the two ranks of a job may choose differently.
rndv_per_rank() {
    awk '
        match($0, /^<PSP:r[0-9]+>/) { r = substr($0, 6, RLENGTH - 6) }
        / shm: a single-copy call takes .* rendezvous from / { t[r] = $(NF - 1) }
        / stats: rendezvous sent / { for (i = 1; i < NF; i++) if ($i == "sent") got[r] = $(i + 1) }
        END {
            for (r in got) {
                th = (r in t) ? t[r] : 8192; n = 0
                if (16384 >= th) n++
                if (65536 >= th) n++
                if (262144 >= th) n++
                print r ":" n "/" got[r]
            }
        }' "$job.err" | sort | tr '\n' ' ' | sed 's/ $//'
}

# LABEL DESCRIPTION: the job passed, and each of its 2 ranks sent by rendezvous what its own
# threshold says
expect_rndv_own() {
    mpitest_merge "$1" "eager.c, $2"
    got=$(rndv_per_rank)
    ok=$(printf '%s\n' "$got" | tr ' ' '\n' | awk -F'[:/]' 'NF == 3 && $2 == $3 { n++ } END { print n + 0 }')
    case "${PSP_SHM:-1}" in
    0) tap ok "$1: rendezvous count # SKIP shm is off (PSP_SHM=0)" ;;
    *) if [ "$ok" = 2 ]; then
        tap ok "$1: each rank sent by rendezvous what its threshold says, rank:want/sent $got ($2)"
    else
        mpitest_comment "$job.err" 6
        tap "not ok" "$1: rendezvous sends, rank:want/sent '$got' ($2)"
    fi ;;
    esac
}

if [ "$(nproc)" -ge 2 ]; then
    PSP_DEBUG=2 PSP_DEBUG_STATS=1 mpitest_job two_cpus 2 "$MPITEST_TMP/eager"
    expect_rndv_own "np=2" "a CPU per rank: rendezvous from shm's threshold"
    expect_policy "np=2" other
    # each rank bound to a core of its own: its mask has one CPU, the launcher's all of them
    PSP_DEBUG=2 PSP_DEBUG_STATS=1 mpitest_job bound 2 -bind-to core "$MPITEST_TMP/eager"
    expect_rndv_own "np=2 -bind-to core" "bound ranks are not oversubscribed"
    PSP_DEBUG_STATS=1 PSP_SHM_RENDEZVOUS=8k mpitest_job two_cpus_user 2 "$MPITEST_TMP/eager"
    expect_rndv "np=2" 3 "a CPU per rank, PSP_SHM_RENDEZVOUS=8k set by the user"
else
    tap ok "np=2: a CPU per rank # SKIP one CPU only"
fi
mpitest_done
