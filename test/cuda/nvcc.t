#!/bin/sh
# The real-GPU check's program (gpu_check.cu) still compiles with nvcc against the installed
# MPI, where the CUDA toolkit is installed (no GPU needed); skips without nvcc.
TOP=$(cd "$(dirname "$0")/../.." && pwd)
exec bash "$TOP/test/cuda/gpu-check.sh" --prefix "${PSMPI_PREFIX:-$TOP/install}" --build-only
