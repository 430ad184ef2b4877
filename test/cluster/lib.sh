# Shared by the test/cluster/*.t scripts (bash, sourced after test/mpi/mpitest.sh): a simulated
# cluster for the test (vcluster), jobs started on it (mpiexec-vc), and the transport check.
#
#   vc_require               skip the whole test unless root and namespaces are there (run
#                            when this file is sourced)
#   vc_build NAME            build test/cluster/NAME.c with the installed mpicc, else fail
#   vc_up N [--nets SPEC]    a cluster of its own for this test (VCLUSTER=<test name>),
#                            removed when the test exits however it exits
#   vc_hosts node1:2 ...     write a hydra hostfile, set VC_HOSTFILE
#   vc_contype EXPECT FILE.. check every CONNECT line of PSP_DEBUG_CONTYPE=1 output: shm
#                            between processes of one node, EXPECT between nodes; prints a
#                            summary and returns 1 on any other transport
#   vc_mpi_set NAME VIA NP CHECK HOST...  the test/mpi set ($VC_TESTS, default ring pt2pt coll
#                            rma datatype spawn connect) on these hosts, over VIA (ucp, or tcp:
#                            PSP_UCP=0), each test one TAP line; CHECK VIA FILE... checks the
#                            connections (vc_contype or a test's own)
#   vc_mpich_tap LOG RC WHAT MPICH's quick subset's log (maint/mpich-tests.sh) as TAP lines
CLUSTER=$TOP/test/cluster
VC=$CLUSTER/vcluster
MPIEXEC=$CLUSTER/mpiexec-vc # mpitest_job's jobs start on node1 and span VC_HOSTFILE's nodes
export VCLUSTER=${VCLUSTER:-$(basename "$0" .t | tr -cd 'a-z0-9' | cut -c1-12)}

vc_require() {
    why=""
    if [ "$(id -u)" != 0 ]; then
        why="needs root (network namespaces, bridges)"
    elif ! command -v unshare >/dev/null || ! command -v nsenter >/dev/null ||
        ! command -v ip >/dev/null; then
        why="needs unshare, nsenter (util-linux) and ip (iproute2)"
    elif ! unshare --net --uts --ipc --mount --propagation private sh -c \
        'ip link add vcprobe0 type veth peer name vcprobe1 && ip link add vcprobe2 type bridge &&
         mount -t tmpfs tmpfs /dev/shm && mount -t sysfs sysfs /sys' >/dev/null 2>&1; then
        # what a node needs, tried in a namespace that vanishes with the probe (a container
        # may allow namespaces but not veth pairs or mounts)
        why="this machine does not allow namespaces with veth pairs, bridges and mounts"
    fi
    if [ -n "$why" ]; then
        echo "1..0 # SKIP the simulated cluster $why"
        exit 0
    fi
}

vc_up() {
    trap '"$VC" down >/dev/null 2>&1' EXIT
    trap 'exit 1' HUP INT PIPE TERM
    if ! "$VC" up "$@" >"$MPITEST_TMP/vc.up" 2>&1; then
        sed 's/^/# /' "$MPITEST_TMP/vc.up"
        echo "Bail out! vcluster up $* failed"
        exit 1
    fi
    [ "${MPITEST_KEEP:-0}" = 1 ] || trap '"$VC" down >/dev/null 2>&1; rm -rf "$MPITEST_TMP"' EXIT
}

vc_hosts() {
    VC_HOSTFILE=$MPITEST_TMP/hosts.$(echo "$*" | tr ' :' '_-')
    printf '%s\n' "$@" >"$VC_HOSTFILE"
    export VC_HOSTFILE
}

# "<PSP:r0000000> CONNECT r0000000 to r0000003 (10.250.1.2:36099, node2 pid 21367) from node1
# pid 21356 via tcp": a process's connection to itself is loop, within a node shm
vc_contype() {
    want=$1
    shift
    cat "$@" 2>/dev/null | awk -v want="$want" '
        / CONNECT .* from [^ ]+ pid [0-9]+ via [a-z]+$/ {
            via = $NF; from = $(NF - 4); fpid = $(NF - 2)
            match($0, /, [^ ]+ pid [0-9]+\)/)
            split(substr($0, RSTART + 2, RLENGTH - 3), p, " ")
            to = p[1]; tpid = p[3]
            n++
            ex = fpid == tpid ? "loop" : from == to ? "shm" : want
            if (fpid != tpid) pairs[fpid < tpid ? fpid " " tpid : tpid " " fpid] = 1
            if (from != to) inter++
            if (via != ex) { bad++; if (bad <= 3) print "# expected " ex ": " $0 }
        }
        END {
            np = 0; for (k in pairs) np++
            printf "# %d connections (%d between nodes) of %d process pairs, %d not as expected\n", n, inter, np, bad
            exit (bad > 0 || n == 0)
        }'
}

vc_mpi_set() {
    local lname=$1 via=$2 np=$3 check=$4 t dir rc n_ok n_bad contype ct env
    shift 4
    vc_hosts "$@"
    for t in ${VC_TESTS:-ring pt2pt coll rma datatype spawn connect}; do
        dir=$MPITEST_TMP/$lname.$via.$t
        mkdir -p "$dir"
        env=(MPITEST_MPIEXEC="$CLUSTER/mpiexec-vc" MPITEST_NPS="$np" MPITEST_KEEP=1 TMPDIR="$dir"
            PSP_DEBUG_CONTYPE=1)
        [ "$via" = tcp ] && env+=(PSP_UCP=0)
        env "${env[@]}" sh "$TOP/test/mpi/$t.t" >"$dir/tap" 2>"$dir/err"
        rc=$?
        n_ok=$(grep -c '^ok' "$dir/tap")
        n_bad=$(grep -c '^not ok' "$dir/tap")
        contype=$("$check" "$via" "$dir"/mpitest.*/*.err)
        ct=$?
        echo "$contype"
        if [ $rc -eq 0 ] && [ "$n_bad" -eq 0 ] && [ "$n_ok" -gt 0 ] && [ $ct -eq 0 ]; then
            tap ok "$lname over $via: $t ($n_ok TAP lines ok), $(echo "$contype" | tail -1 | cut -c3-)"
        else
            grep '^not ok' "$dir/tap" | head -5 | sed 's/^/# /'
            tail -5 "$dir/err" | sed 's/^/# /'
            tap "not ok" "$lname over $via: $t (status $rc, $n_bad not ok)"
        fi
    done
}

vc_mpich_tap() {
    local log=$1 rc=$2 what=$3 line st
    while IFS= read -r line; do
        case $line in
        *": passed "*" / failed "*)
            if echo "$line" | grep -q "failed 0 / timed out 0"; then
                tap ok "$line"
            else
                tap "not ok" "$line"
            fi
            ;;
        "  FAIL"* | "  TIMEOUT"*) echo "# $line" ;;
        *": skipped: "*) tap ok "${line%%: skipped*} # SKIP ${line#*: skipped: }" ;;
        esac
    done <"$log"
    [ "$rc" -eq 0 ] && st=ok || { st="not ok"; tail -5 "$log" | sed 's/^/# /'; }
    tap "$st" "maint/mpich-tests.sh --quick $what: exit status $rc"
}

vc_build() {
    mpitest_build_with "$MPICC" "$1" "../cluster/$1.c" -O2 -Wall -Wextra || mpitest_done
}

vc_require
