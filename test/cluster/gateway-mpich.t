#!/usr/bin/env bash
# MPICH's own test suite, its quick subset (maint/mpich-tests.quick), through the gateway:
# node1 on network a, node3 on b, psgwd on node5 (on both); 2 slots each, tests with more
# ranks wrap around. Every message between the two nodes goes through psgwd. One TAP line per
# test directory.
. "$(dirname "$0")/../mpi/mpitest.sh"
. "$TOP/test/cluster/lib.sh"
if [ ! -x "${MPICH_SRC:-$TOP/_build/mpich-4.0.2}/test/mpi/configure" ]; then
    echo "1..0 # SKIP no MPICH source tree in _build (maint/get-mpich.sh)"
    exit 0
fi
vc_up 5 --nets a,a,b,b,a+b
vc_hosts node1:2 node3:2
export VC_HEAD=node5 # hydra's node: it reaches both networks
KEY=$MPITEST_TMP/job.key
"$PREFIX/bin/psgwd" --new-key "$KEY"
"$VC" exec node5 env PSP_UCP=0 "$PREFIX/bin/psgwd" --listen 10.250.1.5:7000,10.250.2.5:7000 --key "$KEY" \
    --log "$MPITEST_TMP/gw.log" >"$MPITEST_TMP/gw.out" || {
    echo "Bail out! psgwd did not start: $(cat "$MPITEST_TMP/gw.out")"
    exit 1
}
gw=$(sed -n 's/.* pid \([0-9]*\)$/\1/p' "$MPITEST_TMP/gw.out")
trap 'kill "$gw" 2>/dev/null; "$VC" down >/dev/null 2>&1; [ "${MPITEST_KEEP:-0}" = 1 ] || rm -rf "$MPITEST_TMP"' EXIT
printf 'key %s\n10.250.1.5:7000,10.250.2.5:7000 node[12] node[34]\n' "$KEY" >"$MPITEST_TMP/route"
export PSP_GW_SERVER=$MPITEST_TMP/route
"$TOP/maint/mpich-tests.sh" --quick --mpiexec="$CLUSTER/mpiexec-vc" >"$MPITEST_TMP/run.log" 2>&1
rc=$?
vc_mpich_tap "$MPITEST_TMP/run.log" $rc "through the gateway (node1 on a, node3 on b)"
kill -TERM "$gw" 2>/dev/null
sleep 1
grep "closing (forwarded" "$MPITEST_TMP/gw.log" | tail -1 | sed 's/^/# /'
mpitest_done
