#!/bin/sh
# hello + token ring + allreduce + self-send, with 1, 2, 4 and 8 ranks (TAP from rank 0)
. "$(dirname "$0")/mpitest.sh"
mpitest_run ring
