#!/bin/sh
# MPI-IO (ROMIO) with 1, 2 and 4 ranks on a file in the test's temporary directory: collective
# writes of each rank's block, collective reads through vector and subarray file views,
# nonblocking and shared-file-pointer I/O, get/set_size, delete (io.c; TAP from rank 0).
# Skips when the installation has no MPI-IO (configured with --disable-romio).
. "$(dirname "$0")/mpitest.sh"
NPS=${MPITEST_NPS:-1 2 4}
# without ROMIO, mpi.h still declares MPI_File_open, but it does not link
printf '#include <mpi.h>\nint main(void) { MPI_File f; return MPI_File_open(MPI_COMM_SELF, "x", 0, MPI_INFO_NULL, &f); }\n' \
    >"$MPITEST_TMP/has_io.c"
if ! "$MPICC" -o "$MPITEST_TMP/has_io" "$MPITEST_TMP/has_io.c" >/dev/null 2>&1; then
    echo "1..0 # SKIP no MPI-IO in $PREFIX: MPI_File_open does not link (MPI built with --disable-romio)"
    exit 0
fi
mpitest_build io || mpitest_done
mkdir -p "$MPITEST_TMP/files"
for np in $NPS; do
    mpitest_job "io.np$np" "$np" "$MPITEST_TMP/io" "$MPITEST_TMP/files"
    mpitest_merge "np=$np" io
done
mpitest_done
