#!/bin/sh
# Many ranks on one (oversubscribed) machine: 64 ranks in a ring open at most 2 connections
# each (on-demand connections, counted by PSP_DEBUG_STATS); all-to-all with 64 and 128 ranks
# completes with correct data under every transport: default, shm only, tcp only, ucp over
# UCX's tcp and over UCX's shared memory (the ucp ones only where pscom_info lists ucp as
# usable), and no rank reports a connection lost as the ranks exit. PSP_DEBUG_CONTYPE shows
# that every pair of ranks used the transport asked for:
# 128 ranks make 8128 shm connections, more than the kernel's default shmmni (4096 SysV
# segments), yet none falls back, because shm connections share segments (PSP_SHM_ARENA).
# SCALE_NPS="64 128" (the default) names the all-to-all sizes: SCALE_NPS=256 is the check of
# 256 ranks (about 5 minutes on 2 CPUs, outside CI). Above 64 ranks only the transports of
# SCALE_BIG (default: "default tcp", the kernel's limits on shm segments and on file
# descriptors) run: ucp over UCX takes 25-30 s per job of 128 ranks here and has no limit of
# its own there; SCALE_BIG=all runs every transport at every size.
. "$(dirname "$0")/mpitest.sh"
TIMEOUT=${MPITEST_TIMEOUT:-120}
# It forces each transport itself: under an outer selection (check.sh's tcp-only pass) the
# default's expected transport is unknown, and the same jobs would only run twice.
for var in PSP_SHM PSP_TCP PSP_UCP UCX_TLS; do
    if eval "[ -n \"\${$var+set}\" ]"; then
        echo "1..0 # SKIP $var is set: scale.t selects every transport itself"
        exit 0
    fi
done
mpitest_build scale || mpitest_done

PSP_DEBUG_STATS=1 mpitest_job scale.ring64 64 "$MPITEST_TMP/scale" ring
mpitest_merge "np=64" "scale ring"
opened=$(sed -n 's/.*stats: connections opened \([0-9]*\).*/\1/p' "$job.err")
nlines=$(printf '%s\n' "$opened" | grep -c .)
most=$(printf '%s\n' "$opened" | sort -n | tail -n 1)
if [ "$nlines" -eq 64 ] && [ "${most:-99}" -le 2 ]; then
    tap ok "np=64: ring: every rank opened at most 2 connections (most: $most)"
else
    mpitest_comment "$job.err" 6
    tap "not ok" "np=64: ring: connections opened per rank: $nlines reports, most ${most:-none} (want 64 reports, <= 2)"
fi

# label|transport every pair must use|settings
TRANSPORTS='default|shm|
shm|shm|PSP_TCP=0 PSP_UCP=0
tcp|tcp|PSP_SHM=0 PSP_UCP=0
ucp-tcp|ucp|PSP_SHM=0 PSP_TCP=0 UCX_TLS=tcp
ucp-sm|ucp|PSP_SHM=0 PSP_TCP=0 UCX_TLS=posix,cma,self'

# SETTINGS: why the ucp plugin cannot be used under them (pscom_info), else nothing and fail
ucp_unavailable() {
    # shellcheck disable=SC2086 # settings are words on purpose
    line=$(env $1 timeout 20 "$PREFIX/bin/pscom_info" 2>/dev/null | grep -E '^ +ucp ')
    if [ -z "$line" ]; then
        echo "pscom_info ($PREFIX/bin/pscom_info) does not list ucp"
    elif ! printf '%s\n' "$line" | grep -Eq '^ +ucp +[0-9]+ +[A-Z_]+=[0-9]+ +yes '; then
        echo "ucp plugin not available:$(printf '%s\n' "$line" | sed -E 's/^ +([^ ]+ +){5}/ /')"
    else
        return 1
    fi
}

# NP LABEL WANT SETTINGS: alltoall under these settings (passed to every rank with -genv),
# then check the PSP_DEBUG_CONTYPE lines: every pair of ranks connected, all via WANT (a rank's
# connection to itself, for the message it sends itself, via loop; with ucp alone via ucp, as
# UCX then matches MPI's messages, PSP_UCP_TAG)
a2a() {
    np=$1 label=$2 want=$3 settings=$4
    if [ "$want" = ucp ] && why=$(ucp_unavailable "$settings"); then
        tap ok "np=$np: scale alltoall [$label] # SKIP $why"
        return
    fi
    set -- -n "$np" -genv PSP_DEBUG_CONTYPE 1
    for kv in $settings; do
        set -- "$@" -genv "${kv%%=*}" "${kv#*=}"
    done
    mpitest_job "scale.a2a$np.$label" - "$@" "$MPITEST_TMP/scale" alltoall
    mpitest_merge "np=$np" "scale alltoall [$label]"
    # "<PSP:r0000003> CONNECT r0000003 to r0000007 (...) via shm": one per side
    # shellcheck disable=SC2046 # two numbers
    set -- $(awk -v want="$want" '
        / CONNECT r[0-9]+ to r[0-9]+ / && $3 == $5 && $NF != "loop" && !(want == "ucp" && $NF == "ucp") { self_other++ }
        / CONNECT r[0-9]+ to r[0-9]+ / && $3 != $5 {
            if ($NF != want) { other++; if (other <= 3) print "# " $0 > "/dev/stderr" }
            pair[$3 < $5 ? $3 " " $5 : $5 " " $3] = 1
        }
        END { n = 0; for (p in pair) n++; print n, other + self_other }' "$job.err")
    if [ "$1" -eq $((np * (np - 1) / 2)) ] && [ "$2" -eq 0 ]; then
        tap ok "np=$np: [$label] all $1 pairs of ranks connected via $want"
    else
        tap "not ok" "np=$np: [$label] $1 of $((np * (np - 1) / 2)) pairs connected, $2 connections not via $want"
    fi
    # a job that ends well reports no connection lost on the way out (ranks exit one by one)
    bad=$(grep -E ' lost: |Assertion' "$job.err" | head -n 3)
    if [ -z "$bad" ]; then
        tap ok "np=$np: [$label] no connection reported lost, no assertion"
    else
        printf '%s\n' "$bad" | sed 's/^/# /'
        tap "not ok" "np=$np: [$label] a connection reported lost or an assertion failed"
    fi
}

big=" ${SCALE_BIG:-default tcp} "
for np in ${SCALE_NPS:-64 128}; do
    # a redirect, not a pipe: the loop must count its TAP lines in this shell
    while IFS='|' read -r label want settings; do
        case "$np:$big" in
        *" all "* | *" $label "*) a2a "$np" "$label" "$want" "$settings" ;;
        *) [ "$np" -gt 64 ] || a2a "$np" "$label" "$want" "$settings" ;;
        esac
    done <<EOF
$TRANSPORTS
EOF
done
mpitest_done
