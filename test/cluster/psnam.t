#!/usr/bin/env bash
# PSNAM's nam manifestation across nodes: psnamd on node1 (a memory server on the fabric), the
# ranks on node2 and node3, tcp between them.
#  - a fetch_and_op counter of 4 ranks (exact total, every value fetched once), exclusive-lock
#    read-modify-write without a lost update, 64 MiB put and get verified;
#  - a job killed while it holds an exclusive lock: psnamd releases the lock, the next job gets
#    it and finds the data the dead job had flushed;
#  - psnamd killed mid-epoch: the ranks' operations fail with an error (MPI_ERRORS_RETURN)
#    within PSP_NAM_TIMEOUT, the job ends, no process is left.
. "$(dirname "$0")/../mpi/mpitest.sh"
. "$TOP/test/cluster/lib.sh"
vc_up 3
mpitest_build psnam || mpitest_done
PSNAMD=$PREFIX/bin/psnamd
SERVER=10.250.1.1:7400
export PSP_NAM_SERVER=$SERVER PSP_NAM_KEY=$MPITEST_TMP/key PSP_NAM_TIMEOUT=10 PSP_UCP=0
psnamd_pid=""

psnamd_start() {
    : >"$MPITEST_TMP/psnamd.out"
    "$VC" exec node1 "$PSNAMD" --listen "$SERVER" --memory 512M --foreground \
        --log "$MPITEST_TMP/psnamd.log" >"$MPITEST_TMP/psnamd.out" 2>&1 </dev/null &
    for _ in $(seq 50); do
        grep -q " pid [0-9]" "$MPITEST_TMP/psnamd.out" && break
        sleep 0.1
    done
    psnamd_pid=$(sed -n 's/.* pid \([0-9]*\).*/\1/p' "$MPITEST_TMP/psnamd.out")
    [ -n "$psnamd_pid" ]
}
trap '[ -z "$psnamd_pid" ] || kill -9 "$psnamd_pid" 2>/dev/null; "$VC" down >/dev/null 2>&1; [ "${MPITEST_KEEP:-0}" = 1 ] || rm -rf "$MPITEST_TMP"' EXIT

psnamd_start && st=ok || st="not ok"
tap "$st" "psnamd on node1: $(head -1 "$MPITEST_TMP/psnamd.out")"

n=0
run() { # HOSTS LABEL ARGS...
    n=$((n + 1))
    vc_hosts $1
    local label=$2
    shift 2
    mpitest_job "j$n" 4 "$MPITEST_TMP/psnam" "$@"
    mpitest_merge "$label" psnam
}
run "node2:2 node3:2" "counter, 2 nodes x 2" counter nam ctr 300
run "node2:2 node3:2" "exclusive lock, 2 nodes x 2" exclusive nam excl 100
n=$((n + 1))
vc_hosts node2:1 node3:1
mpitest_job "j$n" 2 "$MPITEST_TMP/psnam" big nam big 64
mpitest_merge "64 MiB, node2 and node3" psnam

# a lock holder killed: its lock is released, its flushed data stays
vc_hosts node2:1 node3:1
job=$MPITEST_TMP/hold
MPITEST_JOB=$$.hold MPIEXEC_TIMEOUT=60 "$MPIEXEC" -n 2 "$MPITEST_TMP/psnam" holdlock nam held \
    </dev/null >"$job.out" 2>"$job.err" &
holder=$!
for _ in $(seq 100); do
    grep -q "# locked" "$job.out" && break
    sleep 0.1
done
grep -q "# locked" "$job.out" && st=ok || st="not ok"
tap "$st" "a job holds an exclusive lock on the region"
pkill -9 -f "psnam holdlock nam held"
wait $holder 2>/dev/null
mpitest_wait_gone "$$.hold"
n=$((n + 1))
mpitest_job "j$n" 2 "$MPITEST_TMP/psnam" lockable nam held
mpitest_merge "after the holder was killed" psnam
grep -q "went away holding 1 lock" "$MPITEST_TMP/psnamd.log" && st=ok || st="not ok"
tap "$st" "psnamd logs the released lock"

# psnamd killed mid-epoch
job=$MPITEST_TMP/epoch
t0=$(date +%s)
MPITEST_JOB=$$.epoch MPIEXEC_TIMEOUT=90 "$MPIEXEC" -n 2 "$MPITEST_TMP/psnam" epoch nam ep \
    </dev/null >"$job.out" 2>"$job.err" &
ep=$!
for _ in $(seq 100); do
    grep -q "# epoch started" "$job.out" && break
    sleep 0.1
done
sleep 1
kill -9 "$psnamd_pid"
psnamd_pid=""
killed=$(date +%s)
wait $ep
job_rc=$?
secs=$(($(date +%s) - killed))
mpitest_wait_gone "$$.epoch"
grep "^# rank" "$job.out"
[ "$job_rc" -eq 0 ] && grep -q "^ok .*fail with an error" "$job.out" && [ $secs -le 20 ] &&
    st=ok || st="not ok"
tap "$st" "psnamd killed mid-epoch: operations fail with an error, the job ends ${secs}s later (exit $job_rc)"
[ -z "$job_left" ] && st=ok || st="not ok"
tap "$st" "no process left${job_left:+: $job_left}"
mpitest_done
