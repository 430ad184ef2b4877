#!/bin/sh
# dynamic processes: MPI_Comm_spawn of 2 children from 1, 2, 4 and 8 parents; connect/accept
# between two halves of the parents' world (connect.t does it between two mpiexec jobs)
. "$(dirname "$0")/mpitest.sh"
mpitest_run spawn
