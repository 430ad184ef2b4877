/*
 * The last rank dies from SIGKILL while the others wait in a receive from it (with one rank,
 * rank 0 dies). abort.t checks that the job ends at once, failing, with a message, cleaned up.
 */
#include <mpi.h>
#include <signal.h>
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
        raise(SIGKILL);
    }
    MPI_Recv(&v, 1, MPI_INT, size - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("rank %d: not reached\n", rank);
    MPI_Finalize();
    return 0;
}
