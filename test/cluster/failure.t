#!/usr/bin/env bash
# Failures across the nodes of a simulated cluster (4 nodes x 1 rank of busy.c, ranks
# exchanging 64 KiB with their neighbours): what the user sees must be right, fast and clean.
#  - a rank killed by a signal on node3: the job ends within 5 s, non-zero, hydra names rank,
#    host and signal;
#  - node3 dies (all its processes SIGKILLed at once) and, separately, node3's link goes down
#    mid-transfer (over ucp and over tcp): the job ends within 30 s naming the lost node;
#  - a rank stopped for 15 s (SIGSTOP, SIGCONT): the job completes correctly;
#  - mpiexec killed with SIGTERM (exit 143) and with SIGKILL: no rank is left on any node.
# After every case no process of the job may be left on any node 5 s after mpiexec ended.
NP=4
. "$(dirname "$0")/../mpi/mpitest.sh"
. "$TOP/test/cluster/lib.sh"
vc_up 4
vc_build busy
vc_hosts node1:1 node2:1 node3:1 node4:1

rank_pid() { # NODE [COMM]: pid of the busy rank (or of COMM) on NODE
    for p in $("$VC" ps "$1"); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "${2:-busy}" ] && echo "$p"
    done
    return 0
}

# NAME SECONDS [ENV=VAL...]: start the job in the background, wait until every rank runs
start_job() {
    job=$MPITEST_TMP/$1
    local secs=$2
    shift 2
    env "$@" "$CLUSTER/mpiexec-vc" -n $NP "$MPITEST_TMP/busy" "$secs" </dev/null \
        >"$job.out" 2>"$job.err" &
    job_pid=$!
    for _ in $(seq 150); do
        [ "$(grep -c '^# rank' "$job.out")" -ge $NP ] && return 0
        sleep 0.1
    done
    return 1
}

# LIMIT: wait for the job (killing it after LIMIT + 30 s), set job_rc, job_secs (since the
# failure, 0.1 s steps) and job_left (processes on any node 5 s later; they are killed)
finish_job() {
    local limit=$1 t0 t1 n i
    t0=$(date +%s%N)
    for ((i = 0; i < (limit + 30) * 10; i++)); do
        kill -0 "$job_pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -9 "$job_pid" 2>/dev/null
    { wait "$job_pid"; } 2>/dev/null
    job_rc=$?
    t1=$(date +%s%N)
    job_secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
    job_left=""
    for ((i = 0; i < 50; i++)); do
        job_left=""
        for n in 1 2 3 4; do
            for p in $("$VC" ps node$n); do job_left="$job_left node$n:$p($(cat /proc/$p/comm 2>/dev/null))"; done
        done
        [ -z "$job_left" ] && break
        sleep 0.1
    done
    for n in 1 2 3 4; do "$VC" kill node$n; done
}

# DESCRIPTION CONDITION...: one TAP line; the job's output as comments when it fails
check() {
    local what=$1
    shift
    if "$@"; then
        tap ok "$what"
    else
        mpitest_comment "$job.out" 10
        mpitest_comment "$job.err" 10
        tap "not ok" "$what"
    fi
}
within() { awk -v s="$job_secs" -v l="$1" 'BEGIN { exit !(s <= l) }'; }
said() { grep -q -E "$1" "$job.out" "$job.err"; }

# 1. a rank killed by a signal
if start_job signal 60; then
    kill -KILL "$(rank_pid node3)"
    finish_job 5
    check "rank on node3 killed by SIGKILL: job ends after ${job_secs}s (<= 5), exit status $job_rc" \
        eval 'within 5 && [ "$job_rc" -ne 0 ]'
    check "the message names rank 2, node3 and signal 9" \
        eval 'said "RANK 2 PID [0-9]+ RUNNING AT node3" && said "KILLED BY SIGNAL: 9"'
    check "no process left on any node${job_left:+: $job_left}" test -z "$job_left"
else
    tap "not ok" "the job started"
fi

# 2. a node dies: every process on it at once
if start_job nodekill 60; then
    "$VC" kill node3
    finish_job 30
    check "node3's processes all SIGKILLed: job ends after ${job_secs}s (<= 30), exit status $job_rc" \
        eval 'within 30 && [ "$job_rc" -ne 0 ]'
    check "the message names the lost node3 and its rank" said "LOST NODE node3 \(RANK 2\)"
    check "no process left on any node${job_left:+: $job_left}" test -z "$job_left"
else
    tap "not ok" "the job started"
fi

# 3. a node cut off mid-transfer, over ucp (the default) and over tcp
for via in ucp tcp; do
    env=()
    [ $via = tcp ] && env=(PSP_UCP=0)
    if start_job "link.$via" 90 ${env[@]+"${env[@]}"}; then
        sleep 1
        "$VC" link node3 a down
        finish_job 30
        check "[$via] node3's link down mid-transfer: job ends after ${job_secs}s (<= 30), exit status $job_rc" \
            eval 'within 30 && [ "$job_rc" -ne 0 ]'
        check "[$via] the message names the lost node3" said "LOST NODE node3"
        check "[$via] no process left on any node${job_left:+: $job_left}" test -z "$job_left"
        "$VC" link node3 a up
    else
        tap "not ok" "[$via] the job started"
    fi
done

# 4. a slow peer is not a dead peer
if start_job stop 25; then
    p=$(rank_pid node3)
    kill -STOP "$p"
    sleep 15
    kill -CONT "$p"
    finish_job 60
    check "rank on node3 stopped for 15 s: job completes (exit status $job_rc)" \
        eval '[ "$job_rc" -eq 0 ] && [ "$(grep -c "^ok" "$job.out")" -eq 2 ] && ! grep -q "^not ok" "$job.out"'
    check "no process left on any node${job_left:+: $job_left}" test -z "$job_left"
else
    tap "not ok" "the job started"
fi

# 5. mpiexec itself killed
for sig in TERM KILL; do
    if start_job "mpiexec.$sig" 60; then
        kill -"$sig" "$(rank_pid node1 mpiexec)"
        finish_job 5
        want="not 0"
        [ $sig = TERM ] && want=143
        check "mpiexec killed with SIG$sig: exit status $job_rc ($want) after ${job_secs}s" \
            eval '[ "$job_rc" -ne 0 ] && { [ $sig != TERM ] || [ "$job_rc" -eq 143 ]; }'
        check "SIG$sig to mpiexec: no orphaned rank on any node${job_left:+: $job_left}" test -z "$job_left"
    else
        tap "not ok" "the job started"
    fi
done
mpitest_done
