#!/bin/sh
# dynamic processes: spawn, connect/accept (2 parents + 2 children)
. "$(dirname "$0")/mpitest.sh"
# shellcheck disable=SC2034 # read by mpitest_run
NP=2
mpitest_run spawn
