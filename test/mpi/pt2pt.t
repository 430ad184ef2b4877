#!/bin/sh
# point-to-point semantics and message sizes over the native pscom path, 1, 2, 4 and 8 ranks
. "$(dirname "$0")/mpitest.sh"
mpitest_run pt2pt
