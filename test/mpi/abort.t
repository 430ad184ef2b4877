#!/bin/sh
# MPI_Abort and a killed rank end the whole job quickly, with a failing exit status
. "$(dirname "$0")/mpitest.sh"
echo "1..2"
n=0
for prog in abort crash; do
    n=$((n + 1))
    if [ ! -x "$MPICC" ]; then
        echo "ok $n # SKIP no MPI installed in $PREFIX"
        continue
    fi
    mkdir -p "$OUT"
    "$MPICC" -O2 -o "$OUT/$prog" "$TOP/test/mpi/$prog.c" >&2 || { echo "not ok $n - $prog.c compiles"; continue; }
    start=$(date +%s)
    MPIEXEC_TIMEOUT=60 "$MPIEXEC" -n 4 "$OUT/$prog" >"$OUT/$prog.out" 2>&1
    rc=$?
    secs=$(($(date +%s) - start))
    sed 's/^/# /' "$OUT/$prog.out" | tail -n 5
    if [ $rc -ne 0 ] && [ $secs -lt 30 ] && ! grep -q 'not reached' "$OUT/$prog.out"; then
        echo "ok $n - $prog: job ended (exit $rc) after ${secs}s"
    else
        echo "not ok $n - $prog: exit $rc after ${secs}s"
    fi
done
