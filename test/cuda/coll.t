#!/bin/sh
# Every collective with device send and receive buffers (coll.c)
# under the fake CUDA driver, whose device memory the CPU cannot touch: over shm, tcp and ucp
# (UCX shared memory) with 2 and 4 ranks, and with 8 ranks over the default transports.
# Without the check for page-locked staging: MPICH's algorithms copy results to the device
# from their own temporary buffers, which are ordinary host memory (docs/user-guide.md#cuda).
MPITEST_NPS=${MPITEST_NPS:-2 4}
. "$(dirname "$0")/../mpi/mpitest.sh"
. "$TOP/test/cuda/cudatest.sh"
TIMEOUT=${MPITEST_TIMEOUT:-120}
cudatest_build coll || mpitest_done
CUDATEST_PAGEABLE_MAX= cudatest_transports coll
mpitest_done
