/*
 * Bcast, Reduce or Allreduce (MPI_DOUBLE, MPI_SUM, root 0) in a loop: time per call (the
 * slowest rank's average). Run it under MSA pretend modules with PSP_DEBUG_STATS=1 to get the
 * inter-module messages per call from the statistic (test/bench/msa_coll.sh does both, with
 * PSP_MSA_AWARE_COLLOPS=0 and 1).
 *   msa_coll bcast|reduce|allreduce BYTES ITERATIONS
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 4) {
        if (rank == 0)
            fprintf(stderr, "usage: msa_coll bcast|reduce|allreduce BYTES ITERATIONS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *coll = argv[1];
    int count = atoi(argv[2]) / (int)sizeof(double), iters = atoi(argv[3]);
    double *a = calloc(count + 1, sizeof(double)), *b = calloc(count + 1, sizeof(double));
    int which = !strcmp(coll, "bcast") ? 0 : !strcmp(coll, "reduce") ? 1 : 2;

    for (int phase = 0; phase < 2; phase++) { /* warm-up (also builds the hierarchy), timed */
        int n = phase ? iters : iters / 10 + 1;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < n; i++) {
            if (which == 0)
                MPI_Bcast(a, count, MPI_DOUBLE, 0, MPI_COMM_WORLD);
            else if (which == 1)
                MPI_Reduce(a, b, count, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            else
                MPI_Allreduce(a, b, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        }
        double t = (MPI_Wtime() - t0) / n, tmax;
        MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (phase && rank == 0)
            printf("%s bytes=%zu ranks=%d iterations=%d calls=%d us_per_call=%.2f\n", coll,
                   count * sizeof(double), size, iters, iters + iters / 10 + 1, tmax * 1e6);
    }
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
