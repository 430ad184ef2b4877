/*
 * The last rank calls MPI_Abort(MPI_COMM_WORLD, 7) while the others wait in a receive from it
 * that never comes (with one rank, rank 0 aborts). abort.t checks exit status, message, cleanup.
 */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, size, v;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == size - 1) {
        usleep(200000); /* the others are blocked in MPI_Recv by now */
        MPI_Abort(MPI_COMM_WORLD, 7);
    }
    MPI_Recv(&v, 1, MPI_INT, size - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("rank %d: not reached\n", rank);
    MPI_Finalize();
    return 0;
}
