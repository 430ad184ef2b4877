/*
 * startup: an empty MPI program, for job start-up times and the memory an MPI needs by itself.
 *
 * MPI_Init, MPI_Finalize, nothing in between; the caller times the whole mpiexec. After
 * MPI_Finalize every rank prints its peak resident memory (VmHWM from /proc/self/status):
 *     vmhwm_kb,<rank>,<ranks>,<kB>
 * Before, rank 0 prints "# startup: <library>" (the first line of MPI_Get_library_version and
 * MPICH's device), which tells which MPI ran. Plain MPI-3; builds with any mpicc.
 * Usage: mpiexec -n N startup
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmhwm.h"

int main(int argc, char **argv)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING + 1] = "";
    const char *dev;
    int rank = -1, size = 0, len = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) {
        MPI_Get_library_version(lib, &len);
        if (len < 0 || len > MPI_MAX_LIBRARY_VERSION_STRING)
            len = 0;
        lib[len] = 0;
        dev = strstr(lib, "MPICH Device:");
        if (dev)
            dev += strlen("MPICH Device:") + strspn(dev + strlen("MPICH Device:"), " \t");
        printf("# startup: %.*s%s%.*s%s; %d ranks\n", (int)strcspn(lib, "\n,"), lib,
               dev ? " (" : "", dev ? (int)strcspn(dev, "\n \t") : 0, dev ? dev : "",
               dev ? ")" : "", size);
        fflush(stdout);
    }
    MPI_Finalize();
    printf("vmhwm_kb,%d,%d,%ld\n", rank, size, vmhwm_kb());
    return 0;
}
