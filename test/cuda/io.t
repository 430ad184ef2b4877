#!/bin/sh
# MPI-IO from and to device memory (io.c) under the fake CUDA driver, whose device memory the
# CPU (and the kernel) cannot touch: over shm, tcp and ucp with 2 and 4 ranks, and with 8
# ranks over the default transports, on a file in the test's temporary directory. Skips when
# the installation has no MPI-IO.
MPITEST_NPS=${MPITEST_NPS:-2 4}
. "$(dirname "$0")/../mpi/mpitest.sh"
printf '#include <mpi.h>\nint main(void) { MPI_File f; return MPI_File_open(MPI_COMM_SELF, "x", 0, MPI_INFO_NULL, &f); }\n' \
    >"$MPITEST_TMP/has_io.c"
if ! "$MPICC" -o "$MPITEST_TMP/has_io" "$MPITEST_TMP/has_io.c" >/dev/null 2>&1; then
    echo "1..0 # SKIP no MPI-IO in $PREFIX (MPI built with --disable-romio)"
    exit 0
fi
. "$TOP/test/cuda/cudatest.sh"
TIMEOUT=${MPITEST_TIMEOUT:-60}
cudatest_build io || mpitest_done
mkdir -p "$MPITEST_TMP/files"
cudatest_transports io "$MPITEST_TMP/files"
mpitest_done
