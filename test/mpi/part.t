#!/bin/sh
# partitioned communication (MPI 4), with 1, 2, 4 and 8 ranks
. "$(dirname "$0")/mpitest.sh"
mpitest_run part
