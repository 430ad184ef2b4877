# lib.sh - sourced by the .t scripts of test/pscom: runs the compiled test programs under the
# transport settings and merges their TAP output into one stream for prove.
#
# Environment: BUILD (default: <repo>/build; the programs are in $BUILD/test/pscom),
# T_TIMEOUT (seconds a program's processes may run, default 45; timeout(1) kills the whole
# job 20 s later), T_LOGDIR (stderr of every run, default $BUILD/test/pscom/logs).

set -u
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-$TOP/build}
TBIN=$BUILD/test/pscom
T_LOGDIR=${T_LOGDIR:-$TBIN/logs}
export T_TIMEOUT=${T_TIMEOUT:-45}
JOB_TIMEOUT=$((T_TIMEOUT + 20))
export PSP_SIGQUIT=${PSP_SIGQUIT:-1} # a hung program's processes dump their state (tu_run)
mkdir -p "$T_LOGDIR"

# Transport settings for two- and many-process programs: "label|VAR=value ...". T_TRANSPORT
# tells the program which transport every connection must use, T_RNDV the forced threshold.
# The ucp entries (UCX over its tcp, then its shared memory transports) are skipped where the
# ucp plugin is not built or UCX does not work (see transport_unavailable).
MATRIX=(
    "default|T_TRANSPORT=shm"
    "tcp|PSP_SHM=0 PSP_UCP=0 T_TRANSPORT=tcp"
    "shm-only|PSP_TCP=0 T_TRANSPORT=shm"
    "rndv|PSP_RENDEZVOUS=4096 T_TRANSPORT=shm T_RNDV=4096"
    "shm-nocma|PSP_SHM_RENDEZVOUS=1000 PSP_SHM_CMA=0 T_TRANSPORT=shm T_RNDV=1000"
    "tcp-rndv|PSP_SHM=0 PSP_UCP=0 PSP_TCP_RENDEZVOUS=4096 T_TRANSPORT=tcp T_RNDV=4096"
    "ucp-tcp|PSP_SHM=0 PSP_TCP=0 UCX_TLS=tcp T_TRANSPORT=ucp"
    "ucp-sm|PSP_SHM=0 PSP_TCP=0 UCX_TLS=posix,cma,self T_TRANSPORT=ucp"
)

# gw: every connection through a gateway daemon on loopback ($BUILD/bin/psgwd, one per test
# script, stopped when it exits); a route file that sends every pair through it
if [ -x "$BUILD/bin/psgwd" ]; then
    _gw_dir=$(mktemp -d "$T_LOGDIR/gw.XXXXXX")
    "$BUILD/bin/psgwd" --new-key "$_gw_dir/key"
    "$BUILD/bin/psgwd" --listen 127.0.0.1:0 --key "$_gw_dir/key" --foreground \
        >"$_gw_dir/out" 2>"$_gw_dir/log" </dev/null &
    _gw_pid=$!
    trap 'kill $_gw_pid 2>/dev/null; wait $_gw_pid 2>/dev/null; rm -rf "$_gw_dir"' EXIT
    for _ in $(seq 100); do grep -q " pid " "$_gw_dir/out" && break; sleep 0.05; done
    printf 'key %s\n%s * *\n' "$_gw_dir/key" "$(cut -d' ' -f1 "$_gw_dir/out")" >"$_gw_dir/route"
    MATRIX+=("gw|PSP_SHM=0 PSP_UCP=0 PSP_GW_SERVER=$_gw_dir/route T_TRANSPORT=gw")
fi

. "$TOP/test/tap.sh" # tap_ok, tap_skip, tap_diag, to_both, tap_done

# transport_unavailable "VAR=value ...": if T_TRANSPORT there names a plugin that is loaded at
# run time (ucp, gw), print why pscom_info says it cannot be used under these settings and
# succeed; fail (print nothing) when it can, or for the built-in ones. Cached per setting.
declare -A _unavail
transport_unavailable() {
    local envs=$1 t line
    [[ " $envs " =~ \ T_TRANSPORT=(ucp|gw)\  ]] || return 1
    t=${BASH_REMATCH[1]}
    if [ -z "${_unavail[$envs]+set}" ]; then
        # shellcheck disable=SC2086 # envs are words on purpose
        line=$(env $envs timeout 20 "$BUILD/bin/pscom_info" 2>/dev/null | grep -E "^ +$t ")
        if [ -z "$line" ]; then
            _unavail[$envs]="pscom_info ($BUILD/bin/pscom_info) does not list $t"
        elif [[ $line =~ ^\ +$t\ +[0-9]+\ +[A-Z_]+=[0-9]+\ +yes\  ]]; then
            _unavail[$envs]=""
        else
            _unavail[$envs]="$t plugin not available:$(sed -E 's/^ +([^ ]+ +){5}/ /' <<<"$line")"
        fi
    fi
    [ -n "${_unavail[$envs]}" ] && echo "${_unavail[$envs]}"
}


# run_case LABEL "VAR=value ..." PROGRAM [ARGS...]: run one test program under timeout with
# these variables; its results become ours, renumbered, prefixed with [LABEL].
run_case() {
    local label=$1 envs=$2 prog=$3
    shift 3
    local log="$T_LOGDIR/$prog${*:+.${*// /.}}.$label.log" out rc line plan=-1 seen=0 inner_failed=0
    if [ ! -x "$TBIN/$prog" ]; then
        tap_ok 1 "[$label] $prog is built ($TBIN/$prog)"
        return
    fi
    local why
    if why=$(transport_unavailable "$envs"); then
        tap_skip "[$label] $prog${*:+ $*}" "$why"
        return
    fi
    # shellcheck disable=SC2086 # envs are words on purpose
    out=$(env $envs timeout -k 5 "$JOB_TIMEOUT" "$TBIN/$prog" "$@" 2>"$log")
    rc=$?
    while IFS= read -r line; do
        if [[ $line =~ ^(not\ )?ok\ [0-9]+( -)?\ ?(.*)$ ]]; then
            seen=$((seen + 1))
            if [ -n "${BASH_REMATCH[1]}" ]; then
                inner_failed=$((inner_failed + 1))
                tap_ok 1 "[$label] ${BASH_REMATCH[3]}"
            else
                tap_ok 0 "[$label] ${BASH_REMATCH[3]}"
            fi
        elif [[ $line =~ ^1\.\.([0-9]+)$ ]]; then
            plan=${BASH_REMATCH[1]}
        elif [[ $line == \#* ]]; then
            echo "$line"
        elif [ -n "$line" ]; then
            echo "# $line"
        fi
    done <<<"$out"
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        tap_ok 1 "[$label] $prog $* finished within ${JOB_TIMEOUT}s (timed out)"
    elif [ "$rc" != 0 ] && [ "$inner_failed" = 0 ]; then
        tap_ok 1 "[$label] $prog $* exited with status $rc"
    elif [ "$plan" != "$seen" ]; then
        tap_ok 1 "[$label] $prog $* ran its whole plan ($seen of $plan)"
    fi
    if [ "$rc" != 0 ] || [ "$inner_failed" != 0 ]; then
        {
            echo "[$label] stderr of $prog (last 40 lines of $log):"
            tail -n 40 "$log"
        } | tap_diag | to_both
    fi
}

# run_matrix PROGRAM [ARGS...]: run_case under every MATRIX setting
run_matrix() {
    local m
    for m in "${MATRIX[@]}"; do
        run_case "${m%%|*}" "${m#*|}" "$@"
    done
}

# run_some "LABEL ..." PROGRAM [ARGS...]: run_case under the named MATRIX settings
run_some() {
    local labels=" $1 " m
    shift
    for m in "${MATRIX[@]}"; do
        [[ $labels == *" ${m%%|*} "* ]] && run_case "${m%%|*}" "${m#*|}" "$@"
    done
}
