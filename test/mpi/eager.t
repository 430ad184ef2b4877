#!/bin/sh
# Oversubscribed nodes: with more ranks on a node than CPUs the netmod tells pscom so
# (pscom_set_oversubscribed), and shm sends messages below 128 KiB eager instead of by
# rendezvous from 8 KiB (a rendezvous waits for the peer to be scheduled). eager.c exchanges
# 16, 64 and 256 KiB between two ranks; PSP_DEBUG_STATS says how many each rank sent by
# rendezvous. With a CPU per rank (also when mpiexec binds each rank to a core of its own) that
# is those from the threshold shm chose (8 KiB, or 64 KiB where a single-copy call is slow to
# start, which PSP_DEBUG=2 reports): 3 or 2; 3 when the user sets PSP_SHM_RENDEZVOUS=8k. With
# both ranks on one CPU (taskset): 1 (256 KiB), 3 again when the user sets PSP_SHM_RENDEZVOUS.
. "$(dirname "$0")/mpitest.sh"
mpitest_build eager || mpitest_done

# rendezvous counts of the job's ranks, sorted ("1 1"), from their stats lines
rndv_counts() {
    sed -n 's/.*stats: rendezvous sent \([0-9]*\).*/\1/p' "$job.err" | sort | tr '\n' ' ' | sed 's/ $//'
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
expect_rndv "np=2 one CPU" 1 "oversubscribed: only 256 KiB by rendezvous"
PSP_DEBUG_STATS=1 PSP_SHM_RENDEZVOUS=8k mpitest_job one_cpu_user 2 "$MPITEST_TMP/eager"
expect_rndv "np=2 one CPU" 3 "PSP_SHM_RENDEZVOUS=8k set by the user wins"
MPIEXEC=$all_cpus

# how many of eager.c's 16k, 64k and 256k reach the threshold that shm reported in $job.err
# (PSP_DEBUG=2: "rendezvous from N bytes"); empty if it reported none
want_from_threshold() {
    t=$(sed -n 's/.*shm: a single-copy call takes [0-9]* ns here: rendezvous from \([0-9]*\) bytes.*/\1/p' \
        "$job.err" | sort -n | tail -1)
    [ -n "$t" ] || return 0
    n=0
    for s in 16384 65536 262144; do [ "$s" -ge "$t" ] && n=$((n + 1)); done
    echo "$n"
}

if [ "$(nproc)" -ge 2 ]; then
    PSP_DEBUG=2 PSP_DEBUG_STATS=1 mpitest_job two_cpus 2 "$MPITEST_TMP/eager"
    want=$(want_from_threshold)
    expect_rndv "np=2" "${want:-3}" "a CPU per rank: rendezvous from shm's threshold"
    # each rank bound to a core of its own: its mask has one CPU, the launcher's all of them
    PSP_DEBUG=2 PSP_DEBUG_STATS=1 mpitest_job bound 2 -bind-to core "$MPITEST_TMP/eager"
    want=$(want_from_threshold)
    expect_rndv "np=2 -bind-to core" "${want:-3}" "bound ranks are not oversubscribed"
    PSP_DEBUG_STATS=1 PSP_SHM_RENDEZVOUS=8k mpitest_job two_cpus_user 2 "$MPITEST_TMP/eager"
    expect_rndv "np=2" 3 "a CPU per rank, PSP_SHM_RENDEZVOUS=8k set by the user"
else
    tap ok "np=2: a CPU per rank # SKIP one CPU only"
fi
mpitest_done
