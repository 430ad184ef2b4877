#!/bin/sh
# a sample of every collective with data checks, with 1, 2, 4 and 8 ranks (see coll.c); then
# with 4 and 8 ranks over tcp alone, where no communicator is one node's shared memory and the
# netmod takes other algorithms (recursive doubling for Allgather, MPICH's for the rest)
. "$(dirname "$0")/mpitest.sh"
mpitest_build coll || mpitest_done
for np in $NPS; do
    mpitest_job "coll.np$np" "$np" "$MPITEST_TMP/coll"
    mpitest_merge "np=$np" "coll"
done
for np in 4 8; do
    PSP_SHM=0 PSP_UCP=0 mpitest_job "coll.tcp.np$np" "$np" "$MPITEST_TMP/coll"
    mpitest_merge "tcp np=$np" "coll over tcp"
done
mpitest_done
