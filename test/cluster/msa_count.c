/*
 * MSA collectives on MPI_COMM_WORLD across real nodes: LOOPS (argv[1], default 50) calls each
 * of Barrier, Bcast (root 0), Reduce (root 0) and Allreduce of one int, results checked.
 * MPIX_COMM_TYPE_MODULE must give as many communicators as there are modules. msa.t compares
 * the inter-module messages (PSP_DEBUG_STATS) with what the algorithms should send.
 * TAP from rank 0.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, size, loops = argc > 1 ? atoi(argv[1]) : 50, bad = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    MPI_Comm mod;
    int mod_rank, is_leader, n_modules;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPIX_COMM_TYPE_MODULE, 0, MPI_INFO_NULL, &mod);
    MPI_Comm_rank(mod, &mod_rank);
    is_leader = mod_rank == 0;
    MPI_Allreduce(&is_leader, &n_modules, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Comm_free(&mod);

    for (int i = 0; i < loops; i++) {
        int v = rank == 0 ? 1000 + i : -1, sum = -1, all = -1;
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
        bad += v != 1000 + i;
        MPI_Reduce(&rank, &sum, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
        bad += rank == 0 && sum != size * (size - 1) / 2;
        MPI_Allreduce(&rank, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        bad += all != size * (size - 1) / 2;
    }
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("1..2\n# modules %d\n", n_modules);
        printf("ok 1 - MPIX_COMM_TYPE_MODULE: %d modules\n", n_modules);
        printf("%s 2 - %d x Barrier, Bcast, Reduce, Allreduce: %d wrong results\n",
               bad ? "not ok" : "ok", loops, bad);
    }
    MPI_Finalize();
    return 0;
}
