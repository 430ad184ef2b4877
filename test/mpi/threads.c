/*
 * MPI_THREAD_MULTIPLE: two threads per rank exchange messages with the neighbours at the
 * same time, on different tags and on a duplicated communicator.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

enum { ITER = 500 };
static int rank, size;
static MPI_Comm comms[2];

static void *worker(void *arg)
{
    int t = *(int *)arg, bad = 0;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (int i = 0; i < ITER; i++) {
        int out = rank * ITER + i, in = -1;
        MPI_Sendrecv(&out, 1, MPI_INT, right, t, &in, 1, MPI_INT, left, t, comms[t],
                     MPI_STATUS_IGNORE);
        bad += in != left * ITER + i;
    }
    *(int *)arg = bad;
    return NULL;
}

int main(int argc, char **argv)
{
    int provided, ok = 1, all;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0)
        printf("1..2\n");
    ok = provided == MPI_THREAD_MULTIPLE;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s 1 - MPI_THREAD_MULTIPLE provided (%d)\n", all ? "ok" : "not ok", provided);

    comms[0] = MPI_COMM_WORLD;
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    pthread_t th[2];
    int arg[2] = {0, 1};
    for (int t = 0; t < 2; t++)
        pthread_create(&th[t], NULL, worker, &arg[t]);
    for (int t = 0; t < 2; t++)
        pthread_join(th[t], NULL);
    ok = arg[0] == 0 && arg[1] == 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s 2 - two threads exchanging %d messages each\n", all ? "ok" : "not ok", ITER);
    MPI_Comm_free(&comms[1]);
    MPI_Finalize();
    return 0;
}
