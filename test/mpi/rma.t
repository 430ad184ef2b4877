#!/bin/sh
# one-sided communication in every synchronization mode (MPIDIG over pscom active messages)
. "$(dirname "$0")/mpitest.sh"
mpitest_run rma
