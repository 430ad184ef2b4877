#!/bin/sh
# PSNAM windows on one node, both manifestations: jobs in a row that write, free, attach,
# verify and accumulate; every RMA operation and synchronisation; psnam free; the error cases
# (missing region, size and rank-count mismatch, bad info, full memory, another user, a
# corrupted or truncated region, psnamd not running, psnamd restarted with and without
# --backing). shm segments go to a directory of our own (PSP_PSNAM_DIR), psnamd listens on
# loopback, the key file is ours (PSP_NAM_KEY).
. "$(dirname "$0")/mpitest.sh"
PSNAMD=$PREFIX/bin/psnamd
PSNAM=$PREFIX/bin/psnam
if [ ! -x "$PSNAMD" ] || [ ! -x "$PSNAM" ]; then
    echo "1..0 # SKIP no psnamd/psnam in $PREFIX/bin (make install)"
    exit 0
fi
mpitest_build psnam || mpitest_done

NP=${PSNAM_NP:-4}
export PSP_PSNAM_DIR="$MPITEST_TMP/shm" PSP_NAM_KEY="$MPITEST_TMP/key" PSP_NAM_TIMEOUT=10
mkdir -p "$PSP_PSNAM_DIR"
chmod 700 "$MPITEST_TMP"
PROG=$MPITEST_TMP/psnam
n=0

run() { # NP LABEL ARGS...: one job, merged into the TAP
    n=$((n + 1))
    np=$1 label=$2
    shift 2
    mpitest_job "j$n" "$np" "$PROG" "$@"
    mpitest_merge "$label" psnam
}

psnamd_start() { # [OPTIONS...]: psnamd on a free loopback port; sets PSP_NAM_SERVER, pid
    : >"$MPITEST_TMP/psnamd.out"
    "$PSNAMD" --listen 127.0.0.1:0 --memory 256M --foreground --log "$MPITEST_TMP/psnamd.log" \
        "$@" >"$MPITEST_TMP/psnamd.out" 2>&1 </dev/null &
    psnamd_pid=$!
    i=0
    while [ ! -s "$MPITEST_TMP/psnamd.out" ] && [ $i -lt 100 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    PSP_NAM_SERVER=$(cut -d' ' -f1 "$MPITEST_TMP/psnamd.out")
    export PSP_NAM_SERVER
    kill -0 "$psnamd_pid" 2>/dev/null && [ -n "$PSP_NAM_SERVER" ]
}

psnamd_stop() { # SIGTERM, and the exit status
    kill -TERM "$psnamd_pid" 2>/dev/null
    wait "$psnamd_pid"
}

if psnamd_start; then
    tap ok "psnamd listens on $PSP_NAM_SERVER"
else
    mpitest_comment "$MPITEST_TMP/psnamd.out"
    tap "not ok" "psnamd starts"
    mpitest_done
fi
trap 'kill -9 $psnamd_pid 2>/dev/null; rm -rf "$MPITEST_TMP"' EXIT

# garbage: random bytes on the port, a pscom program that speaks another protocol
port=${PSP_NAM_SERVER##*:}
bash -c "head -c 65536 /dev/urandom >/dev/tcp/127.0.0.1/$port; printf 'PSCOM\\0\\0\\0' >/dev/tcp/127.0.0.1/$port" \
    2>/dev/null
PSP_SHM=0 PSP_UCP=0 timeout 5 "$PREFIX/bin/pscom_pp" --sizes 8 "$PSP_NAM_SERVER@psnamd" \
    >/dev/null 2>&1
sleep 0.5
kill -0 "$psnamd_pid" 2>/dev/null && grep -q "malformed request" "$MPITEST_TMP/psnamd.log" &&
    tap ok "psnamd survives garbage and another protocol, logs the malformed request" ||
    {
        # its log, and its stderr (where a fatal error or a sanitizer's report goes), and how
        # it ended
        mpitest_comment "$MPITEST_TMP/psnamd.log"
        mpitest_comment "$MPITEST_TMP/psnamd.out"
        kill -0 "$psnamd_pid" 2>/dev/null || { wait "$psnamd_pid"; echo "# psnamd exit status $?"; }
        tap "not ok" "psnamd survives garbage"
    }

for m in shm nam; do
    # three jobs in a row on one region, then psnam free, then attach fails
    run "$NP" "$m write" write $m persist
    run "$NP" "$m 2nd job" verify $m persist 0
    run "$NP" "$m 3rd job" verify $m persist 1
    if [ $m = shm ]; then
        out=$("$PSNAM" list 2>&1)
        echo "$out" | sed 's/^/# /'
        echo "$out" | grep -q "^persist  *shm .* $NP/$NP " && tap ok "psnam list: the shm region, $NP segments" ||
            tap "not ok" "psnam list: the shm region, $NP segments"
        "$PSNAM" info persist >"$MPITEST_TMP/info" 2>&1 && grep -c "segment" "$MPITEST_TMP/info" | grep -qx "$NP" &&
            tap ok "psnam info: one line per segment" || tap "not ok" "psnam info: one line per segment"
        "$PSNAM" free persist | sed 's/^/# /'
    else
        out=$("$PSNAM" --server "$PSP_NAM_SERVER" list 2>&1)
        echo "$out" | sed 's/^/# /'
        echo "$out" | grep -q "^persist  *nam .* $NP " && tap ok "psnam --server list: the nam region" ||
            tap "not ok" "psnam --server list: the nam region"
        "$PSNAM" --server "$PSP_NAM_SERVER" info persist >"$MPITEST_TMP/info" 2>&1 &&
            grep -q "persistent" "$MPITEST_TMP/info" && tap ok "psnam --server info" ||
            tap "not ok" "psnam --server info"
        "$PSNAM" --server "$PSP_NAM_SERVER" free persist | sed 's/^/# /'
    fi
    run "$NP" "$m after psnam free" expect MPI_ERR_NO_SUCH_FILE 0 psnam_manifestation=$m \
        psnam_name=persist psnam_attach=true
    # all of RMA, and the atomics across ranks
    run "$NP" "$m rma" rma $m rma1
    run 2 "$m rma np=2" rma $m rma2
    run "$NP" "$m counter" counter $m ctr 200
    run "$NP" "$m exclusive" exclusive $m excl 100
    run 2 "$m 16 MiB" big $m big 16
    # errors
    run "$NP" "$m missing region" expect MPI_ERR_NO_SUCH_FILE 0 psnam_manifestation=$m \
        psnam_name=nothere psnam_attach=true
    run 2 "$m write for the mismatches" write $m mm
    run 2 "$m size mismatch" expect MPI_ERR_SIZE 8 psnam_manifestation=$m psnam_name=mm \
        psnam_attach=true
    run 3 "$m rank count mismatch" expect MPI_ERR_SIZE 0 psnam_manifestation=$m psnam_name=mm \
        psnam_attach=true
    run 2 "$m create over an existing one" expect MPI_ERR_FILE_EXISTS 64 \
        psnam_manifestation=$m psnam_name=mm
    run 2 "$m bad name" expect MPI_ERR_INFO_VALUE 64 psnam_manifestation=$m "psnam_name=a/b"
    run 2 "$m bad boolean" expect MPI_ERR_INFO_VALUE 64 psnam_manifestation=$m psnam_name=x \
        psnam_persistent=maybe
    run 2 "$m unknown psnam key" expect MPI_ERR_INFO_KEY 64 psnam_manifestation=$m \
        psnam_name=x psnam_persitent=true
    if [ $m = shm ]; then
        "$PSNAM" free mm | sed 's/^/# /'
    else
        "$PSNAM" --server "$PSP_NAM_SERVER" free mm | sed 's/^/# /'
    fi
done
run 2 "unknown manifestation" expect MPI_ERR_INFO_VALUE 64 psnam_manifestation=disk psnam_name=x
run 2 "name without manifestation" expect MPI_ERR_INFO_VALUE 64 psnam_name=x

# shm: corrupted and truncated segments, full directory, another user
run 2 "shm write for damage" write shm dmg
printf 'XX' | dd of="$PSP_PSNAM_DIR/psnam.dmg.1" bs=1 seek=100 conv=notrunc 2>/dev/null
run 2 "shm corrupted header" expect MPI_ERR_IO 0 psnam_manifestation=shm psnam_name=dmg \
    psnam_attach=true
"$PSNAM" free dmg >/dev/null
run 2 "shm write for truncation" write shm trunc
truncate -s 5000 "$PSP_PSNAM_DIR/psnam.trunc.0"
run 2 "shm truncated segment" expect MPI_ERR_IO 0 psnam_manifestation=shm psnam_name=trunc \
    psnam_attach=true
"$PSNAM" free trunc >/dev/null
if [ "$(id -u)" = 0 ] && mkdir -p "$MPITEST_TMP/small" &&
    mount -t tmpfs -o size=1m tmpfs "$MPITEST_TMP/small" 2>/dev/null; then
    PSP_PSNAM_DIR=$MPITEST_TMP/small run 2 "shm directory full" expect MPI_ERR_NO_SPACE 4194304 \
        psnam_manifestation=shm psnam_name=huge
    umount "$MPITEST_TMP/small"
else
    tap ok "shm directory full # SKIP needs root to mount a small tmpfs"
fi
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    run 2 "shm write for another user" write shm mine
    chmod 755 "$MPITEST_TMP" "$PSP_PSNAM_DIR" "$MPITEST_TMP/psnam"
    n=$((n + 1))
    mpitest_job "j$n" 2 setpriv --reuid=nobody --regid=nogroup --clear-groups \
        env PSP_NAM_KEY="/tmp/psnam-nobody-$$.key" "$PROG" expect MPI_ERR_ACCESS 0 \
        psnam_manifestation=shm psnam_name=mine psnam_attach=true
    mpitest_merge "shm another user (nobody)" psnam
    # nam: nobody's key is not the owner's
    run 2 "nam write for another user" write nam mine
    n=$((n + 1))
    mpitest_job "j$n" 2 setpriv --reuid=nobody --regid=nogroup --clear-groups \
        env PSP_NAM_KEY="/tmp/psnam-nobody-$$.key" "$PROG" expect MPI_ERR_ACCESS 0 \
        psnam_manifestation=nam psnam_name=mine psnam_attach=true
    mpitest_merge "nam another user (nobody)" psnam
    rm -f "/tmp/psnam-nobody-$$.key"
    chmod 700 "$MPITEST_TMP"
else
    tap ok "another user refused # SKIP needs root and setpriv"
fi
run 2 "nam larger than --memory" expect MPI_ERR_NO_SPACE 268435456 psnam_manifestation=nam \
    psnam_name=huge
# psnamd stopped (SIGSTOP) mid-epoch: no answer; the operations fail after PSP_NAM_TIMEOUT
n=$((n + 1))
job=$MPITEST_TMP/j$n
PSP_NAM_TIMEOUT=3 MPITEST_JOB=$$.stop MPIEXEC_TIMEOUT=60 "$MPIEXEC" -n 2 "$PROG" epoch nam ep \
    </dev/null >"$job.out" 2>"$job.err" &
ep=$!
i=0
while ! grep -q "# epoch started" "$job.out" 2>/dev/null && [ $i -lt 100 ]; do
    sleep 0.1
    i=$((i + 1))
done
sleep 0.5
kill -STOP "$psnamd_pid"
t0=$(date +%s)
wait $ep
job_rc=$?
secs=$(($(date +%s) - t0))
kill -CONT "$psnamd_pid"
mpitest_wait_gone "$$.stop"
grep "^# rank" "$job.out" | head -2
[ "$job_rc" -eq 0 ] && grep -q "^ok .*fail with an error" "$job.out" && [ $secs -le 15 ] &&
    tap ok "psnamd stopped mid-epoch: operations fail after PSP_NAM_TIMEOUT=3, the job ends ${secs}s later" ||
    tap "not ok" "psnamd stopped mid-epoch: operations fail after PSP_NAM_TIMEOUT=3 (exit $job_rc, ${secs}s)"
# psnamd restarts: without --backing the region is gone, with it the data stays
if psnamd_stop; then tap ok "psnamd exits 0 on SIGTERM"; else tap "not ok" "psnamd exits 0 on SIGTERM"; fi
grep -q "SIGTERM: exiting" "$MPITEST_TMP/psnamd.log" && tap ok "psnamd logs its exit" ||
    tap "not ok" "psnamd logs its exit"
run 2 "nam psnamd not running" expect MPI_ERR_OTHER 64 psnam_manifestation=nam psnam_name=x
psnamd_start || tap "not ok" "psnamd restarts"
run 2 "nam restart without --backing: region gone" expect MPI_ERR_NO_SUCH_FILE 0 \
    psnam_manifestation=nam psnam_name=mine psnam_attach=true
psnamd_stop
mkdir -p "$MPITEST_TMP/backing"
psnamd_start --backing "$MPITEST_TMP/backing" || tap "not ok" "psnamd starts with --backing"
run 2 "nam --backing write" write nam kept
psnamd_stop
psnamd_start --backing "$MPITEST_TMP/backing" || tap "not ok" "psnamd restarts with --backing"
run 2 "nam --backing: data after a restart" verify nam kept 0
# free --all: every region of ours goes
"$PSNAM" --server "$PSP_NAM_SERVER" free --all | sed 's/^/# /'
[ -z "$("$PSNAM" --server "$PSP_NAM_SERVER" list | sed 1d)" ] && [ -z "$(ls "$MPITEST_TMP/backing")" ] &&
    tap ok "psnam --server free --all: no region left, backing files removed" ||
    tap "not ok" "psnam --server free --all: no region left, backing files removed"
psnamd_stop
run 2 "shm for free --all" write shm all1
"$PSNAM" free --all | sed 's/^/# /'
[ -z "$(ls "$PSP_PSNAM_DIR")" ] && tap ok "psnam free --all: no segment file left" ||
    tap "not ok" "psnam free --all: no segment file left"
"$PSNAM" info nosuch >/dev/null 2>&1
[ $? = 1 ] && tap ok "psnam info of a missing region: exit status 1" ||
    tap "not ok" "psnam info of a missing region: exit status 1"
"$PSNAM" free 'bad/name' >/dev/null 2>&1
[ $? = 2 ] && tap ok "psnam with a bad region name: exit status 2" ||
    tap "not ok" "psnam with a bad region name: exit status 2"
mpitest_done
