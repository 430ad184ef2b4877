#!/bin/sh
# collectives through a communicator's shared segment (coll_shm.c): results over many mixed
# rounds, a Barrier's release, no name left in /dev/shm, unmapped with the communicator; and
# the messages where the segment must not be used: PSP_MPI_COLL_SHM=0 in every process or in
# one only (the communicators it belongs to follow it), PSP_SHM=0
MPITEST_NPS=${MPITEST_NPS:-2 5 8}
. "$(dirname "$0")/mpitest.sh"
mpitest_build coll_shm || mpitest_done
prog=$MPITEST_TMP/coll_shm
# where the job's environment keeps the ranks off shared memory (check.sh's tcp-only pass, or
# every rank its own node for MPICH), the messages everywhere
expect=expect-shm one_off=expect-rank0-off
if [ "${PSP_SHM:-1}" = 0 ] || [ "${PSP_MPI_COLL_SHM:-1}" = 0 ] || [ "${MPIR_CVAR_NOLOCAL:-0}" = 1 ]; then
    expect=expect-messages one_off=expect-messages
fi
for np in $NPS; do
    mpitest_job "coll_shm.np$np" "$np" "$prog" $expect
    mpitest_merge "np=$np" coll_shm
done
mpitest_job coll_shm.off 4 -genv PSP_MPI_COLL_SHM 0 "$prog" expect-messages
mpitest_merge "np=4 PSP_MPI_COLL_SHM=0" coll_shm
mpitest_job coll_shm.one_off - -n 1 -env PSP_MPI_COLL_SHM 0 "$prog" $one_off : \
    -n 3 "$prog" $one_off
mpitest_merge "np=4, one process with PSP_MPI_COLL_SHM=0" coll_shm
mpitest_job coll_shm.tcp 4 -genv PSP_SHM 0 "$prog" expect-messages
mpitest_merge "np=4 PSP_SHM=0" coll_shm
mpitest_done
