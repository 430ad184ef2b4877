#!/bin/sh
# late receivers (late.c): floods of blocking sends at a rank that sleeps, one-to-one and
# 3-to-one with MPI_ANY_SOURCE, 8 B to 1 MiB; 2 and 4 ranks
MPITEST_NPS=${MPITEST_NPS:-2 4}
. "$(dirname "$0")/mpitest.sh"
mpitest_run late
