#!/bin/sh
# partitioned communication
. "$(dirname "$0")/mpitest.sh"
mpitest_run part
