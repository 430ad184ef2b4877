#!/bin/sh
# The Fortran bindings, built with our wrappers and run with 1, 2 and 4 ranks (TAP from rank 0):
#   fortran_f08.f90  use mpi_f08 (mpifort)
#   fortran_mpi.f90  use mpi     (mpifort)
#   fortran_f77.f    include 'mpif.h', fixed form (mpif77, and again with mpif90)
# Skips when the installation has no mpifort (configured with --disable-fortran).
. "$(dirname "$0")/mpitest.sh"
NPS=${MPITEST_NPS:-1 2 4}
if [ ! -x "$PREFIX/bin/mpifort" ]; then
    echo "1..0 # SKIP no $PREFIX/bin/mpifort (MPI built with --disable-fortran)"
    exit 0
fi
# NAME WRAPPER SOURCE: build with $PREFIX/bin/WRAPPER, run with every NP
fortran_test() {
    mkdir -p "$MPITEST_TMP/$1.mod" # each build its own module directory (-J)
    if [ ! -x "$PREFIX/bin/$2" ]; then
        tap "not ok" "$PREFIX/bin/$2 is installed"
        return
    fi
    mpitest_build_with "$PREFIX/bin/$2" "$1" "$3" -O2 -Wall -J "$MPITEST_TMP/$1.mod" || return
    for np in $NPS; do
        mpitest_job "$1.np$np" "$np" "$MPITEST_TMP/$1"
        mpitest_merge "$2 $3 np=$np" "$1"
    done
}
fortran_test f08 mpifort fortran_f08.f90
fortran_test mpi mpifort fortran_mpi.f90
fortran_test f77 mpif77 fortran_f77.f
fortran_test f77_90 mpif90 fortran_f77.f
mpitest_done
