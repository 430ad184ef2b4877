#!/usr/bin/env bash
# The representative test/mpi set (ring, pt2pt, coll, rma, datatype, spawn, connect) across the
# nodes of a simulated cluster: 2 nodes x 2 ranks and 4 nodes x 1 and x 2 ranks, over ucp (the
# default between nodes: UCX over the nodes' network) and over tcp (PSP_UCP=0). Every connection
# any job opened is checked: shm within a node, the expected transport between nodes.
. "$(dirname "$0")/../mpi/mpitest.sh"
. "$TOP/test/cluster/lib.sh"
vc_up 4

vc_mpi_set "2 nodes x 2" ucp 4 vc_contype node1:2 node2:2
vc_mpi_set "2 nodes x 2" tcp 4 vc_contype node1:2 node2:2
vc_mpi_set "4 nodes x 1" tcp 4 vc_contype node1:1 node2:1 node3:1 node4:1
vc_mpi_set "4 nodes x 2" ucp 8 vc_contype node1:2 node2:2 node3:2 node4:2
mpitest_done
