#!/bin/sh
# dynamic processes: MPI_Comm_spawn of 2 children from 1, 2, 4 and 8 parents; connect/accept
# between two halves of the parents' world (connect.t does it between two mpiexec jobs)
. "$(dirname "$0")/mpitest.sh"
# starting 5 more processes per job is slow on a loaded 2-core machine: allow more time
TIMEOUT=${MPITEST_TIMEOUT:-60}
mpitest_run spawn
