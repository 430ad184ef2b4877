#!/bin/sh
# Point-to-point with device buffers (pt2pt.c) under the fake CUDA driver, whose device memory
# the CPU cannot touch: over shm, tcp and ucp (UCX shared memory) with 2 and 4 ranks, and with
# 8 ranks over the default transports; once more with chunked sends of device memory from 16 KiB
# on in chunks of 4 KiB. Also: without PSP_CUDA, and with PSP_CUDA=1 but a driver
# without a device, MPIX_Query_cuda_support() is 0 and the job runs.
MPITEST_NPS=${MPITEST_NPS:-2 4}
. "$(dirname "$0")/../mpi/mpitest.sh"
. "$TOP/test/cuda/cudatest.sh"
TIMEOUT=${MPITEST_TIMEOUT:-60}
cudatest_build pt2pt || mpitest_done
cudatest_transports pt2pt 1
# chunked sends of device memory from 16 KiB on, in 4 KiB chunks: most messages in many chunks
CUDATEST_LABEL=chunked CUDATEST_GENV="-genv PSP_MPI_CUDA_PIPELINE_MIN 16k -genv PSP_MPI_CUDA_PIPELINE_CHUNK 4k" \
    cudatest_transports pt2pt 1
mpitest_job pt2pt.off 2 "$MPITEST_TMP/pt2pt" 0
mpitest_merge "no PSP_CUDA np=2" pt2pt
mpitest_job pt2pt.nodev 2 -genv PSP_CUDA 1 -genv FAKE_CUDA_DEVICES 0 "$MPITEST_TMP/pt2pt" 0
mpitest_merge "PSP_CUDA=1, no device, np=2" pt2pt
mpitest_done
