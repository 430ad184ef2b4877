#!/usr/bin/env bash
# Soak: many short MPI jobs in a row against one long-running psgwd and psnamd, then a check
# that nothing was left behind. Outside CI (1000 jobs: ~20 min on 2 cores).
#
#   maint/soak.sh [--jobs N] [--np N]       (defaults: 1000 jobs, 4 ranks)
#
# The jobs cycle through: a ring over the default transports, over tcp alone, over ucp alone
# (where the plugin is usable), through the gateway; a persistent psnam region on psnamd
# written by one job, verified by the next and freed with `psnam free`; RMA on a shm psnam
# window; a rank killed by SIGKILL (default transports, and through the gateway); MPI_Abort
# over tcp.
# Each job must end as it should (exit 0 and every TAP line ok, or failing with hydra's
# message) within its timeout. At the end, against the state before the first job:
#  - no new file in /dev/shm, none in the psnam directory, no psnam region left on psnamd;
#  - no process of a job left (mpiexec, proxies, ranks), no new zombie, no new fd in this
#    script;
#  - psgwd's and psnamd's memory flat: resident size at the end at most 1 MiB (or 5%) above
#    what it was after the first tenth of the jobs, and their open fds as many as then.
# Prints the daemons' resident size every 10% and a summary; exits non-zero on any failure.
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prefix=${PSMPI_PREFIX:-$top/install}
jobs=1000 np=4
while [ $# -gt 0 ]; do
    case $1 in
    --jobs) jobs=${2:?}; shift ;;
    --np) np=${2:?}; shift ;;
    -h | --help) sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "soak.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
for t in mpicc mpiexec psgwd psnamd psnam pscom_info; do
    [ -x "$prefix/bin/$t" ] || { echo "soak.sh: no $prefix/bin/$t (maint/build.sh)" >&2; exit 1; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/soak.XXXXXX") || exit 1
chmod 700 "$tmp"
daemons=()
cleanup() {
    for p in "${daemons[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    [ "${SOAK_KEEP:-0}" = 1 ] || rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

mkdir "$tmp/bin"
for p in ring crash abort psnam; do
    "$prefix/bin/mpicc" -O2 -I"$top/test/mpi" -o "$tmp/bin/$p" "$top/test/mpi/$p.c" ||
        { echo "soak.sh: cannot build test/mpi/$p.c" >&2; exit 1; }
done

# the state before
shm_before=$(ls /dev/shm | sort)
zombies() { ps -eo stat= | grep -c '^Z'; }
zombies_before=$(zombies)
fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
rss_kib() { awk '$1 == "VmRSS:" { print $2 }' "/proc/$1/status" 2>/dev/null; }
self_fds_before=$(fds $$)

# the daemons, on loopback; their own files under $tmp
export PSP_PSNAM_DIR=$tmp/psnam PSP_NAM_KEY=$tmp/nam.key PSP_NAM_TIMEOUT=10
mkdir -p "$PSP_PSNAM_DIR"
start_daemon() { # NAME COMMAND...: run in the background, wait for its first output line
    local name=$1
    shift
    "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" </dev/null &
    daemons+=($!)
    for _ in $(seq 100); do [ -s "$tmp/$name.out" ] && break; sleep 0.05; done
    [ -s "$tmp/$name.out" ] || { echo "soak.sh: $name did not start:" >&2; cat "$tmp/$name.err" >&2; exit 1; }
}
start_daemon psnamd "$prefix/bin/psnamd" --listen 127.0.0.1:0 --memory 256M --foreground \
    --log "$tmp/psnamd.log"
psnamd_pid=${daemons[-1]}
export PSP_NAM_SERVER=$(cut -d' ' -f1 "$tmp/psnamd.out")
"$prefix/bin/psgwd" --new-key "$tmp/gw.key"
start_daemon psgwd "$prefix/bin/psgwd" --listen 127.0.0.1:0 --key "$tmp/gw.key" --foreground \
    --log "$tmp/psgwd.log"
psgwd_pid=${daemons[-1]}
printf 'key %s\n%s * *\n' "$tmp/gw.key" "$(cut -d' ' -f1 "$tmp/psgwd.out")" >"$tmp/gw.route"

ucp="PSP_SHM=0 PSP_TCP=0 UCX_TLS=posix,cma,self"
# shellcheck disable=SC2086
env $ucp "$prefix/bin/pscom_info" 2>/dev/null | grep -qE '^ *ucp +[0-9]+ +[^ ]+ +yes' ||
    ucp="PSP_SHM=0" # no usable ucp here: shm off, whatever else there is
echo "== $jobs jobs of $np ranks; psnamd $PSP_NAM_SERVER, psgwd $(cut -d' ' -f1 "$tmp/psgwd.out"), ucp jobs: $ucp"
tcp="PSP_SHM=0 PSP_UCP=0"
gw="PSP_SHM=0 PSP_UCP=0 PSP_GW_SERVER=$tmp/gw.route"

# job I: prints "ENV|EXPECT|PROGRAM ARGS" (EXPECT: ok = exit 0 and all TAP ok; fail = non-zero
# exit and hydra's message)
job_of() {
    local i=$1
    case $((i % 10)) in
    0) echo "|ok|ring" ;;
    1) echo "$tcp|ok|ring" ;;
    2) echo "$ucp|ok|ring" ;;
    3) echo "$gw|ok|ring" ;;
    4) echo "|ok|psnam write nam p$i" ;;
    5) echo "|ok|psnam verify nam p$((i - 1)) 0" ;; # and psnam free (below)
    6) echo "|fail|crash" ;;
    7) echo "|ok|psnam rma shm r$i" ;;
    8) echo "$tcp|fail|abort" ;;
    9) echo "$gw|fail|crash" ;;
    esac
}

failed=0 failures=""
declare -a rss_gw rss_nam
sample() { # the daemons' resident size now, in KiB
    rss_gw+=("$(rss_kib "$psgwd_pid")")
    rss_nam+=("$(rss_kib "$psnamd_pid")")
}
t0=$(date +%s)
for ((i = 0; i < jobs; i++)); do
    IFS='|' read -r envs expect cmd <<<"$(job_of "$i")"
    log=$tmp/job.log
    # shellcheck disable=SC2086 # words on purpose
    env $envs MPIEXEC_TIMEOUT=60 timeout 90 "$prefix/bin/mpiexec" -n "$np" $tmp/bin/$cmd \
        </dev/null >"$log" 2>&1
    rc=$?
    [ $((i % 10)) = 5 ] && "$prefix/bin/psnam" --server "$PSP_NAM_SERVER" free "p$((i - 1))" >>"$log" 2>&1
    ok=1
    if [ "$expect" = ok ]; then
        [ $rc -eq 0 ] && grep -q '^ok' "$log" && ! grep -q '^not ok' "$log" || ok=0
    else
        [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -qE 'BAD TERMINATION|MPI_Abort|application called' "$log" || ok=0
    fi
    if [ $ok = 0 ]; then
        failed=$((failed + 1))
        cp "$log" "$tmp/failed.$i.log"
        [ $failed -le 5 ] && {
            echo "soak.sh: job $i ($envs ${cmd%% *}, expected $expect) exit $rc:"
            tail -n 15 "$log" | sed 's/^/    /'
        }
        failures="$failures $i"
    fi
    if [ $((i + 1)) -eq $((jobs / 10)) ]; then
        gw_fds0=$(fds "$psgwd_pid") nam_fds0=$(fds "$psnamd_pid")
    fi
    if [ $(((i + 1) % (jobs / 10 > 0 ? jobs / 10 : 1))) -eq 0 ]; then
        sample
        printf '%5d jobs, %4d s, %d failed; RSS psgwd %s KiB, psnamd %s KiB\n' $((i + 1)) \
            $(($(date +%s) - t0)) $failed "${rss_gw[-1]}" "${rss_nam[-1]}"
    fi
done

status=0
check() { # DESCRIPTION CONDITION...
    local what=$1
    shift
    if "$@"; then echo "ok   - $what"; else echo "FAIL - $what"; status=1; fi
}
echo "== after $jobs jobs in $(($(date +%s) - t0)) s"
check "every job ended as expected ($failed failed:${failures:- none})" test $failed -eq 0
sleep 1 # the last job's proxies and ranks are reaped
left=$(ps -eo pid=,comm= | awk '$2 ~ /^(ring|crash|abort|psnam|mpiexec|mpiexec.hydra|hydra_pmi_proxy)$/ { print }')
check "no process of a job left${left:+: $(echo $left)}" test -z "$left"
z=$(zombies)
check "no new zombie ($zombies_before before, $z after)" test "$z" -le "$zombies_before"
new_shm=$(comm -13 <(echo "$shm_before") <(ls /dev/shm | sort) | tr '\n' ' ')
check "no new file in /dev/shm${new_shm:+: $new_shm}" test -z "$new_shm"
left_psnam=$(ls "$PSP_PSNAM_DIR" | tr '\n' ' ')
check "no file left in the psnam directory${left_psnam:+: $left_psnam}" test -z "$left_psnam"
regions=$("$prefix/bin/psnam" --server "$PSP_NAM_SERVER" list 2>&1 | grep -E ' nam ' | tr '\n' ' ')
check "no region left on psnamd${regions:+: $regions}" test -z "$regions"
check "no new fd in this script ($self_fds_before before, $(fds $$) after)" \
    test "$(fds $$)" -le "$self_fds_before"
flat() { # NAME PID FDS_THEN RSS_THEN RSS_END
    local lim=$(($4 + ($4 / 20 > 1024 ? $4 / 20 : 1024)))
    check "$1 alive, fds $3 -> $(fds "$2"), RSS $4 -> $5 KiB (limit $lim)" \
        eval 'kill -0 '"$2"' && [ "$(fds '"$2"')" -le '"$3"' ] && [ '"$5"' -le '"$lim"' ]'
}
flat psgwd "$psgwd_pid" "$gw_fds0" "${rss_gw[0]}" "${rss_gw[-1]}"
flat psnamd "$psnamd_pid" "$nam_fds0" "${rss_nam[0]}" "${rss_nam[-1]}"
if [ $status -ne 0 ]; then
    SOAK_KEEP=1
    echo "soak.sh: logs kept in $tmp (psgwd.log, psnamd.log, failed.*.log)"
fi
exit $status
