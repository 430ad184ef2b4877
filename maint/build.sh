#!/bin/sh
# From a fresh checkout to an installed, working MPI in one command:
#   install build dependencies (as root; otherwise they must be there already), fetch and
#   prepare MPICH (./autogen.sh), ./configure, make install, and run a 4-rank MPI job.
# Usage: maint/build.sh [--with-mpich-source=PATH] [configure options...]
set -eu

TOP=$(cd "$(dirname "$0")/.." && pwd)
cd "$TOP"
AUTOGEN_ARGS=""
CONFIGURE_ARGS=""
for arg in "$@"; do
    case $arg in
    --with-mpich-source=*) AUTOGEN_ARGS="$AUTOGEN_ARGS $arg" ;;
    *) CONFIGURE_ARGS="$CONFIGURE_ARGS $arg" ;;
    esac
done
JOBS=$(nproc 2>/dev/null || echo 2)

T0=$(date +%s)
T=$T0
step() { # print the time the previous step took, then announce the next
    now=$(date +%s)
    [ "$now" = "$T0" ] || echo "    ($((now - T)) s)"
    T=$now
    echo "==> $*"
}

step "build dependencies"
maint/install-deps.sh
step "./autogen.sh$AUTOGEN_ARGS"
# shellcheck disable=SC2086
./autogen.sh $AUTOGEN_ARGS
step "./configure$CONFIGURE_ARGS"
# shellcheck disable=SC2086
./configure $CONFIGURE_ARGS
step "make -j$JOBS install"
make -j"$JOBS" install
step "a real MPI job: mpiexec -n 4 (test/mpi/ring.c, PSP_DEBUG_CONTYPE=1)"
make hello
step "done in $(($(date +%s) - T0)) s; the MPI is in $TOP/install"
