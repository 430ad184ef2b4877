#!/bin/sh
# a sample of every collective with data checks, with 1, 2, 4 and 8 ranks (see coll.c)
. "$(dirname "$0")/mpitest.sh"
mpitest_run coll
