#!/bin/sh
# The configuration table inside an MPI process (envtable.c: pscom_env_print after MPI_Init,
# the netmod's rows included) has the same variables, defaults and help texts as
# maint/env-table.sh, which ps_environment(7) and the documentation test are made from.
. "$(dirname "$0")/mpitest.sh"
if [ ! -f "$PREFIX/include/pscom.h" ] || [ ! -x "$PREFIX/bin/pscom_info" ]; then
    echo "1..0 # SKIP no pscom.h or pscom_info in $PREFIX"
    exit 0
fi
# mpitest_build puts the flags before the source: -lpscom must not be dropped as unneeded
mpitest_build envtable -I"$PREFIX/include" -L"$PREFIX/lib" -Wl,--no-as-needed -lpscom || mpitest_done

# NAME|DEFAULT|HELP per variable, sorted (the order of the groups differs: plugins are loaded
# on first use in an MPI process, all at once by pscom_info)
rows() {
    awk '/^PSP_/ { if (n) print n "|" d "|" h; n = $1; d = $0; sub(/.*# default /, "", d); h = ""; next }
         /^    / { h = substr($0, 5) }
         END { if (n) print n "|" d "|" h }' | sort
}
unset_psp=$(env | sed -n 's/^\(PSP_[A-Za-z0-9_]*\)=.*/-u \1/p')
# shellcheck disable=SC2086 # one -u NAME per PSP_* variable
env $unset_psp MPIEXEC_TIMEOUT="$TIMEOUT" timeout $((TIMEOUT + 15)) "$MPIEXEC" -n 1 \
    "$MPITEST_TMP/envtable" </dev/null >"$MPITEST_TMP/mpi.txt" 2>"$MPITEST_TMP/mpi.err"
rc=$?
if [ "$rc" = 0 ] && grep -q '^PSP_MPI_SCHED_YIELD ' "$MPITEST_TMP/mpi.txt"; then
    tap "ok" "an MPI process prints its table, the netmod's rows included"
else
    mpitest_comment "$MPITEST_TMP/mpi.err"
    tap "not ok" "an MPI process prints its table, the netmod's rows included (exit status $rc)"
    mpitest_done
fi
if "$TOP/maint/env-table.sh" "$PREFIX/bin/pscom_info" >"$MPITEST_TMP/table.txt" 2>"$MPITEST_TMP/table.err"; then
    rows <"$MPITEST_TMP/mpi.txt" >"$MPITEST_TMP/mpi.rows"
    rows <"$MPITEST_TMP/table.txt" >"$MPITEST_TMP/table.rows"
    if cmp -s "$MPITEST_TMP/mpi.rows" "$MPITEST_TMP/table.rows"; then
        tap "ok" "maint/env-table.sh has the MPI process's $(wc -l <"$MPITEST_TMP/mpi.rows") variables, defaults and help texts"
    else
        diff "$MPITEST_TMP/table.rows" "$MPITEST_TMP/mpi.rows" | sed 's/^/# /' | head -20
        tap "not ok" "maint/env-table.sh has the MPI process's variables, defaults and help texts (< table, > MPI process)"
    fi
else
    mpitest_comment "$MPITEST_TMP/table.err"
    tap "not ok" "maint/env-table.sh runs with $PREFIX/bin/pscom_info"
fi
mpitest_done
