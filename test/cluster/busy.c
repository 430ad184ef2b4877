/*
 * Keeps every rank busy for SECONDS (argv[1], default 20): a ring exchange of 64 KiB with both
 * neighbours and an Allreduce that checks it and decides, on rank 0's clock, whether to go on.
 * failure.t breaks a rank, a node or a link meanwhile; a stopped rank only delays it.
 * Prints TAP from rank 0: the loops run, and that every exchange carried the right data.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define N (64 * 1024 / sizeof(int))

int main(int argc, char **argv)
{
    static int out[N], in[N];
    int rank, size, bad = 0;
    long loops = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double secs = argc > 1 ? atof(argv[1]) : 20.0, t0 = MPI_Wtime();
    char host[64];
    gethostname(host, sizeof(host));
    printf("# rank %d of %d on %s pid %d\n", rank, size, host, (int)getpid());
    fflush(stdout);
    int go = 1;
    while (go) {
        int next = (rank + 1) % size, prev = (rank + size - 1) % size;
        for (size_t i = 0; i < N; i++)
            out[i] = (int)(rank * 1000 + loops + i);
        MPI_Sendrecv(out, N, MPI_INT, next, 0, in, N, MPI_INT, prev, 0, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        for (size_t i = 0; i < N; i++)
            bad += in[i] != (int)(prev * 1000 + loops + i);
        loops++;
        int v[2] = {bad, rank == 0 && MPI_Wtime() - t0 < secs};
        MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        bad = v[0];
        go = v[1];
    }
    if (rank == 0) {
        printf("1..2\nok 1 - %ld exchanges in %.1f s\n", loops, MPI_Wtime() - t0);
        printf("%s 2 - every exchange carried the right data (%d wrong)\n", bad ? "not ok" : "ok",
               bad);
    }
    MPI_Finalize();
    return 0;
}
