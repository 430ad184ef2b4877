#!/bin/sh
# Point-to-point with device buffers (pt2pt.c) under the fake CUDA driver, whose device memory
# the CPU cannot touch: over shm, tcp and ucp (UCX shared memory) with 2 and 4 ranks, and with
# 8 ranks over the default transports. Device memory from 32 KiB on goes device to device (CUDA
# IPC between the ranks, all on this node); once more with that from 1 KiB on, and once with
# IPC off and chunked sends of device memory from 16 KiB on in chunks of 4 KiB. The counters
# show IPC used, and not used with PSP_CUDA_ENFORCE_STAGING=1. Also: without PSP_CUDA, and with
# PSP_CUDA=1 but a driver without a device, MPIX_Query_cuda_support() is 0 and the job runs.
MPITEST_NPS=${MPITEST_NPS:-2 4}
. "$(dirname "$0")/../mpi/mpitest.sh"
. "$TOP/test/cuda/cudatest.sh"
TIMEOUT=${MPITEST_TIMEOUT:-60}
cudatest_build pt2pt || mpitest_done
cudatest_transports pt2pt 1
CUDATEST_LABEL=ipc1k CUDATEST_GENV="-genv PSP_CUDA_IPC_MIN 1k" cudatest_transports pt2pt 1
# chunked sends of device memory from 16 KiB on, in 4 KiB chunks: most messages in many chunks
CUDATEST_LABEL=chunked CUDATEST_GENV="-genv PSP_CUDA_IPC 0 -genv PSP_MPI_CUDA_PIPELINE_MIN 16k -genv PSP_MPI_CUDA_PIPELINE_CHUNK 4k" \
    cudatest_transports pt2pt 1

# the counters at exit (PSP_DEBUG_STATS): device-to-device rendezvous, or none when enforced
d2d_count() { # JOB: the device-to-device rendezvous its ranks counted, summed
    sed -n 's/.*device-to-device \([0-9]*\).*/\1/p' "$MPITEST_TMP/$1.err" | awk '{ n += $1 } END { print n + 0 }'
}
for staging in 0 1; do
    mpitest_job "pt2pt.stats$staging" 2 -genv PSP_CUDA 1 -genv PSP_CUDA_ENFORCE_STAGING $staging \
        -genv PSP_DEBUG_STATS 1 -genv FAKE_CUDA_PAGEABLE_MAX 1024 "$MPITEST_TMP/pt2pt" 1
    mpitest_merge "PSP_CUDA_ENFORCE_STAGING=$staging np=2" pt2pt
    n=$(d2d_count "pt2pt.stats$staging")
    if [ "$staging" = 0 ] && [ "$n" -gt 0 ]; then
        tap ok "device memory went device to device ($n rendezvous)"
    elif [ "$staging" = 1 ] && [ "$n" -eq 0 ] && grep -q device-to-device "$MPITEST_TMP/pt2pt.stats1.err"; then
        tap ok "PSP_CUDA_ENFORCE_STAGING=1: every device message staged"
    else
        mpitest_comment "$MPITEST_TMP/pt2pt.stats$staging.err" 10
        tap "not ok" "device-to-device rendezvous with PSP_CUDA_ENFORCE_STAGING=$staging: $n"
    fi
done
mpitest_job pt2pt.off 2 "$MPITEST_TMP/pt2pt" 0
mpitest_merge "no PSP_CUDA np=2" pt2pt
mpitest_job pt2pt.nodev 2 -genv PSP_CUDA 1 -genv FAKE_CUDA_DEVICES 0 "$MPITEST_TMP/pt2pt" 0
mpitest_merge "PSP_CUDA=1, no device, np=2" pt2pt
mpitest_done
