#!/bin/sh
# hello + token ring + allreduce + self-send with mpiexec -n 4 (TAP from rank 0)
. "$(dirname "$0")/mpitest.sh"
mpitest_run ring
