/*
 * Drop-in check, compiled by dropin.t with Debian's mpicc.mpich (libmpich-dev), not ours:
 *   dropin LIBDIR
 * Which MPI library did the dynamic loader give us? It must be ours (ch4:pscom, mapped from
 * LIBDIR, with libpscom), and it must communicate. TAP from rank 0.
 */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap_mpi.h"

static int rank, size;

/* the file this process mapped whose name contains `name`, from /proc/self/maps */
static int mapped(const char *name, char *path, size_t len)
{
    char line[PATH_MAX + 128];
    FILE *f = fopen("/proc/self/maps", "r");
    int found = 0;
    while (f && !found && fgets(line, sizeof(line), f)) {
        char *p = strchr(line, '/');
        if (p && strstr(p, name)) {
            p[strcspn(p, "\n")] = '\0';
            snprintf(path, len, "%s", p);
            found = 1;
        }
    }
    if (f)
        fclose(f);
    return found;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0)
        printf("1..4\n");

    char version[MPI_MAX_LIBRARY_VERSION_STRING] = "", *dev;
    int len;
    MPI_Get_library_version(version, &len);
    dev = strstr(version, "MPICH Device:");
    if (rank == 0 && dev)
        printf("# %.*s\n", (int)strcspn(dev, "\n"), dev);
    check(dev && strstr(dev, "ch4:pscom") != NULL,
          "MPI_Get_library_version: MPICH Device ch4:pscom (ours)");

    /* /proc/self/maps names the real file, symlinks resolved */
    char lib[PATH_MAX] = "", dir[PATH_MAX] = "";
    int ok = (mapped("/libmpi.so", lib, sizeof(lib)) || mapped("/libmpich.so", lib, sizeof(lib))) &&
             argc > 1 && realpath(argv[1], dir) != NULL;
    size_t dl = strlen(dir);
    ok = ok && strncmp(lib, dir, dl) == 0 && lib[dl] == '/';
    if (rank == 0)
        printf("# MPI library mapped: %s\n", lib[0] ? lib : "(none found)");
    check(ok, "the MPI library is mapped from the LIBDIR given");
    char pscom[PATH_MAX] = "";
    check(mapped("/libpscom.so", pscom, sizeof(pscom)), "libpscom is loaded");

    /* communication: a 1 MiB message around the ring plus an allreduce */
    enum { N = 1 << 18 };
    int *s = malloc(N * sizeof(int)), *r = malloc(N * sizeof(int)), sum = -1;
    int to = (rank + 1) % size, from = (rank + size - 1) % size;
    for (int i = 0; i < N; i++)
        s[i] = rank * N + i;
    MPI_Sendrecv(s, N, MPI_INT, to, 0, r, N, MPI_INT, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    ok = sum == size * (size - 1) / 2;
    for (int i = 0; i < N; i++)
        ok &= r[i] == from * N + i;
    free(s);
    free(r);
    check(ok, "1 MiB around the ring and an allreduce");
    MPI_Finalize();
    return 0;
}
