#!/usr/bin/env bash
# MPICH's own test suite, its quick subset (maint/mpich-tests.quick), across 2 simulated nodes
# x 2 slots (tests with more ranks wrap around the nodes): one TAP line per test directory.
. "$(dirname "$0")/../mpi/mpitest.sh"
. "$TOP/test/cluster/lib.sh"
if [ ! -x "${MPICH_SRC:-$TOP/_build/mpich-4.0.2}/test/mpi/configure" ]; then
    echo "1..0 # SKIP no MPICH source tree in _build (maint/get-mpich.sh)"
    exit 0
fi
vc_up 2
vc_hosts node1:2 node2:2
"$TOP/maint/mpich-tests.sh" --quick --mpiexec="$CLUSTER/mpiexec-vc" >"$MPITEST_TMP/run.log" 2>&1
rc=$?
vc_mpich_tap "$MPITEST_TMP/run.log" $rc "across 2 nodes"
mpitest_done
