# Shared by the test/mpi/*.t scripts: build a C test with the installed mpicc and run it.
# PSMPI_PREFIX: the installation (default: <checkout>/install). NP: ranks (default 4).
TOP=$(cd "$(dirname "$0")/../.." && pwd)
PREFIX=${PSMPI_PREFIX:-$TOP/install}
OUT=${PSMPI_TEST_BUILD:-$TOP/_build/test-mpi}
NP=${NP:-4}
# this machine may have other MPIs installed: use ours explicitly
MPICC=$PREFIX/bin/mpicc
MPIEXEC=$PREFIX/bin/mpiexec

mpitest_run() { # name [mpiexec args...]: compile test/mpi/<name>.c, run it, TAP on stdout
    name=$1
    shift
    if [ ! -x "$MPICC" ] || [ ! -x "$MPIEXEC" ]; then
        echo "1..0 # SKIP no MPI installed in $PREFIX (run make install)"
        exit 0
    fi
    mkdir -p "$OUT"
    # shellcheck disable=SC2086
    if ! "$MPICC" -Wall -Wextra -O2 ${MPICC_EXTRA:-} -o "$OUT/$name" "$TOP/test/mpi/$name.c" >&2; then
        echo "1..1"
        echo "not ok 1 - $name.c compiles"
        exit 1
    fi
    # a hang must not block the suite: hydra kills the job after MPIEXEC_TIMEOUT seconds
    MPIEXEC_TIMEOUT=${MPIEXEC_TIMEOUT:-120} exec "$MPIEXEC" -n "$NP" "$@" "$OUT/$name"
}
