#!/bin/sh
# point-to-point semantics over the native pscom path (TAP from rank 0)
. "$(dirname "$0")/mpitest.sh"
mpitest_run pt2pt
