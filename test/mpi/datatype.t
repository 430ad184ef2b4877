#!/bin/sh
# derived datatypes, one element .. > 1 MiB, with 1, 2, 4 and 8 ranks (see datatype.c)
. "$(dirname "$0")/mpitest.sh"
mpitest_run datatype
