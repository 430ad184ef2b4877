#!/usr/bin/env bash
# configuration: t_env.c (pscom_env_register, per-plugin thresholds) and pscom_info -c
. "$(dirname "$0")/lib.sh"
run_case env "" t_env

INFO=$BUILD/bin/pscom_info
if [ ! -x "$INFO" ]; then
    tap_ok 1 "pscom_info is built ($INFO)"
    tap_done
fi

# info VAR=value...: run pscom_info -c; stdout in $out, stderr in $err, status in $rc
info() {
    local tmp
    tmp=$(mktemp)
    out=$(env "$@" timeout 20 "$INFO" -c 2>"$tmp")
    rc=$?
    err=$(cat "$tmp")
    rm -f "$tmp"
}

# lines VAR [TEXT] < input: number of lines naming VAR that also contain TEXT (both as words)
lines() {
    grep -w -- "$1" | grep -cwF -- "${2:-$1}"
}

info
tap_ok $rc "pscom_info -c runs"
[ -z "$err" ]
tap_ok $? "pscom_info -c writes nothing to stderr"
[ -n "$err" ] && tap_diag <<<"$err"
for v in PSP_DEBUG PSP_DEBUG_OUT PSP_DEBUG_PARAM PSP_RENDEZVOUS PSP_SHM PSP_TCP \
    PSP_SHM_RENDEZVOUS PSP_TCP_RENDEZVOUS PSP_SHM_CMA; do
    [ "$(lines $v <<<"$out")" -ge 1 ]
    tap_ok $? "pscom_info -c lists $v"
done
short=$(wc -c <<<"$out")
long=$(PSP_DEBUG= timeout 20 "$INFO" -c -d 2>/dev/null | wc -c)
[ "$long" -gt "$short" ]
tap_ok $? "pscom_info -c -d adds the documentation ($short -> $long bytes)"

# malformed values: exactly one warning that names the variable and the value
for kv in PSP_DEBUG=abc PSP_DEBUG=99 PSP_DEBUG=-1 PSP_RENDEZVOUS=12q PSP_RENDEZVOUS=-4096 \
    PSP_SHM_RENDEZVOUS=lots PSP_TCP_RENDEZVOUS=1.5M PSP_SHM=maybe PSP_TCP=yes \
    PSP_SHM_CMA=perhaps PSP_DEBUG_PARAM=x PSP_POLL_PAUSE=-1 PSP_POLL_PAUSE=1001 \
    PSP_POLL_PAUSE=fast PSP_POLL_SPIN=-2 PSP_POLL_SPIN=some; do
    var=${kv%%=*} val=${kv#*=}
    info "$kv"
    n=$(lines "$var" "$val" <<<"$err")
    [ "$rc" = 0 ] && [ "$n" = 1 ]
    tap_ok $? "$kv: pscom_info -c runs and warns once, naming $var and '$val' ($n)"
    [ "$n" = 1 ] || tap_diag <<<"$err"
done

# good values: no warning, the value shows
check_value() { # VAR=value SHOWN...
    local kv=$1 var=${1%%=*} shown=0 s
    shift
    info "$kv"
    [ "$rc" = 0 ] && [ -z "$err" ]
    tap_ok $? "$kv: accepted without a warning"
    [ -n "$err" ] && tap_diag <<<"$err"
    for s in "$@"; do
        [ "$(lines "$var" "$s" <<<"$out")" -ge 1 ] && shown=1
    done
    [ $shown = 1 ]
    tap_ok $? "$kv: pscom_info -c shows it as one of: $*"
    [ $shown = 1 ] || grep -w -- "$var" <<<"$out" | tap_diag
}
check_value PSP_RENDEZVOUS=64k 65536 64k 64K
check_value PSP_RENDEZVOUS=inf inf
check_value PSP_SHM_RENDEZVOUS=8k 8192 8k 8K
check_value PSP_TCP_RENDEZVOUS=1M 1048576 1M 1m
check_value PSP_SHM=0 0
check_value PSP_SHM_CMA=0 0
check_value PSP_DEBUG=0 0
check_value PSP_POLL_PAUSE=0 0
check_value PSP_POLL_PAUSE=16 16
check_value PSP_POLL_SPIN=0 0
check_value PSP_POLL_SPIN=64 64

# PSP_DEBUG_PARAM: 1 logs the variables set, 2 all of them
info PSP_RENDEZVOUS=64k
[ "$(lines PSP_RENDEZVOUS <<<"$err")" = 0 ]
tap_ok $? "without PSP_DEBUG_PARAM nothing is logged"
info PSP_DEBUG_PARAM=1 PSP_RENDEZVOUS=64k
[ "$(lines PSP_RENDEZVOUS <<<"$err")" -ge 1 ]
tap_ok $? "PSP_DEBUG_PARAM=1 logs PSP_RENDEZVOUS, which is set"
[ "$(lines PSP_TCP_RENDEZVOUS <<<"$err")" = 0 ]
tap_ok $? "PSP_DEBUG_PARAM=1 does not log PSP_TCP_RENDEZVOUS, which is not set"
[ "$(lines PSP_RENDEZVOUS <<<"$err")" -ge 1 ] || tap_diag <<<"$err"
info PSP_DEBUG_PARAM=2
[ "$(lines PSP_TCP_RENDEZVOUS <<<"$err")" -ge 1 ] && [ "$(lines PSP_SHM_CMA <<<"$err")" -ge 1 ]
tap_ok $? "PSP_DEBUG_PARAM=2 logs every variable"

# PSP_DEBUG_OUT: log lines go to the file
logf=$(mktemp)
info PSP_DEBUG_OUT="$logf" PSP_TCP_RENDEZVOUS=12q
n=$(lines PSP_TCP_RENDEZVOUS 12q <"$logf")
[ "$n" = 1 ] && [ "$(lines PSP_TCP_RENDEZVOUS <<<"$err")" = 0 ]
tap_ok $? "PSP_DEBUG_OUT: the warning goes to the file, not to stderr"
rm -f "$logf"

tap_done
