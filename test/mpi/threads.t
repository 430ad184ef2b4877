#!/bin/sh
# MPI_THREAD_MULTIPLE, with 1, 2, 4 and 8 ranks
. "$(dirname "$0")/mpitest.sh"
# shellcheck disable=SC2034 # read by mpitest_run
MPICC_EXTRA=-pthread
mpitest_run threads
