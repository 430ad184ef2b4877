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
while IFS= read -r line; do
    case $line in
    *": passed "*" / failed "*)
        d=${line%%:*}
        if echo "$line" | grep -q "failed 0 / timed out 0"; then
            tap ok "$line"
        else
            tap "not ok" "$line"
        fi
        ;;
    "  FAIL"* | "  TIMEOUT"*) echo "# $line" ;;
    *": skipped: "*) tap ok "${line%%: skipped*} # SKIP ${line#*: skipped: }" ;;
    esac
done <"$MPITEST_TMP/run.log"
[ $rc -eq 0 ] && st=ok || { st="not ok"; tail -5 "$MPITEST_TMP/run.log" | sed 's/^/# /'; }
tap "$st" "maint/mpich-tests.sh --quick across 2 nodes: exit status $rc"
mpitest_done
