#!/bin/sh
# one-sided communication (MPIDIG over pscom active messages)
. "$(dirname "$0")/mpitest.sh"
mpitest_run rma
