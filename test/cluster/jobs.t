#!/usr/bin/env bash
# The representative test/mpi set (ring, pt2pt, coll, rma, datatype, spawn, connect) across the
# nodes of a simulated cluster: 2 nodes x 2 ranks and 4 nodes x 1 and x 2 ranks, over ucp (the
# default between nodes: UCX over the nodes' network) and over tcp (PSP_UCP=0). Every connection
# any job opened is checked: shm within a node, the expected transport between nodes.
. "$(dirname "$0")/../mpi/mpitest.sh"
. "$TOP/test/cluster/lib.sh"
vc_up 4

TESTS=${VC_TESTS:-ring pt2pt coll rma datatype spawn connect}

# LAYOUT TRANSPORT NP HOST...: every test of $TESTS as one TAP line
layout() {
    lname=$1 via=$2 np=$3
    shift 3
    vc_hosts "$@"
    for t in $TESTS; do
        dir=$MPITEST_TMP/$lname.$via.$t
        mkdir -p "$dir"
        env=(MPITEST_MPIEXEC="$CLUSTER/mpiexec-vc" MPITEST_NPS="$np" MPITEST_KEEP=1 TMPDIR="$dir"
            PSP_DEBUG_CONTYPE=1)
        [ "$via" = tcp ] && env+=(PSP_UCP=0)
        env "${env[@]}" sh "$TOP/test/mpi/$t.t" >"$dir/tap" 2>"$dir/err"
        rc=$?
        n_ok=$(grep -c '^ok' "$dir/tap")
        n_bad=$(grep -c '^not ok' "$dir/tap")
        contype=$(vc_contype "$via" "$dir"/mpitest.*/*.err)
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

layout "2 nodes x 2" ucp 4 node1:2 node2:2
layout "2 nodes x 2" tcp 4 node1:2 node2:2
layout "4 nodes x 1" tcp 4 node1:1 node2:1 node3:1 node4:1
layout "4 nodes x 2" ucp 8 node1:2 node2:2 node3:2 node4:2
mpitest_done
