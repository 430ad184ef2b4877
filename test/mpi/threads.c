/*
 * MPI_THREAD_MULTIPLE: two threads per rank exchange messages with the neighbours at the
 * same time, on different tags and on a duplicated communicator; then each thread runs
 * collectives and rendezvous-size messages on a communicator of its own. Any number of ranks.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

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

/* each thread: collectives on its own communicator, and 256 KiB (rendezvous) messages around
 * the ring with ANY_SOURCE receives on thread 0's side */
static void *worker2(void *arg)
{
    enum { BIG = 64 * 1024, ROUNDS = 10 };
    int t = *(int *)arg, bad = 0;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int *s = malloc(BIG * sizeof(int)), *r = malloc(BIG * sizeof(int));
    for (int i = 0; i < ROUNDS; i++) {
        int sum = -1, b = rank == size - 1 ? i * 10 + t : -1;
        MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, comms[t]);
        MPI_Bcast(&b, 1, MPI_INT, size - 1, comms[t]);
        bad += sum != size * (size - 1) / 2 || b != i * 10 + t;
        for (int k = 0; k < BIG; k++)
            s[k] = rank + i + t + k;
        MPI_Request rq;
        MPI_Status st;
        MPI_Isend(s, BIG, MPI_INT, right, 100 + t, comms[t], &rq);
        if (t == 0)
            MPI_Recv(r, BIG, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, comms[t], &st);
        else
            MPI_Recv(r, BIG, MPI_INT, left, 100 + t, comms[t], &st);
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
        bad += st.MPI_SOURCE != left || st.MPI_TAG != 100 + t;
        for (int k = 0; k < BIG; k += 97)
            bad += r[k] != left + i + t + k;
    }
    free(s);
    free(r);
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
        printf("1..3\n");
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

    /* now each thread on a communicator of its own */
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[0]);
    for (int t = 0; t < 2; t++) {
        arg[t] = t;
        pthread_create(&th[t], NULL, worker2, &arg[t]);
    }
    for (int t = 0; t < 2; t++)
        pthread_join(th[t], NULL);
    ok = arg[0] == 0 && arg[1] == 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s 3 - two threads: collectives on their own communicators, 256 KiB messages, "
               "ANY_SOURCE\n",
               all ? "ok" : "not ok");
    MPI_Comm_free(&comms[0]);
    MPI_Comm_free(&comms[1]);
    MPI_Finalize();
    return 0;
}
