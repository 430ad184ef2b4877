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

vc_build() {
    mpitest_build_with "$MPICC" "$1" "../cluster/$1.c" -O2 -Wall -Wextra || mpitest_done
}

vc_require
