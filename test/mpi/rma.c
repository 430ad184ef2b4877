/*
 * One-sided communication over MPIDIG active messages: put/get/accumulate with fence,
 * passive target lock/flush, fetch-and-op and compare-and-swap, MPI_Win_allocate and
 * MPI_Win_create. TAP from rank 0.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int rank, size, ntest;

static void check(int ok, const char *what)
{
    int all;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s %d - %s\n", all ? "ok" : "not ok", ++ntest, what);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    enum { N = 1000 };
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0)
        printf("1..5\n");
    int right = (rank + 1) % size, left = (rank + size - 1) % size;

    /* allocate + fence: put my values into the right neighbour, get from the left */
    int *base, ok = 1;
    MPI_Win win;
    MPI_Win_allocate(N * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    for (int i = 0; i < N; i++)
        base[i] = -1;
    int src[N];
    for (int i = 0; i < N; i++)
        src[i] = rank * N + i;
    MPI_Win_fence(0, win);
    MPI_Put(src, N, MPI_INT, right, 0, N, MPI_INT, win);
    MPI_Win_fence(0, win);
    for (int i = 0; i < N; i++)
        ok &= base[i] == left * N + i;
    check(ok, "MPI_Put with fence (MPI_Win_allocate)");

    int got[N];
    MPI_Win_fence(0, win);
    MPI_Get(got, N, MPI_INT, left, 0, N, MPI_INT, win);
    MPI_Win_fence(0, win);
    ok = 1;
    for (int i = 0; i < N; i++)
        ok &= got[i] == ((left + size - 1) % size) * N + i;
    check(ok, "MPI_Get with fence");

    /* accumulate: everybody adds its rank+1 into rank 0's element 0 */
    MPI_Win_fence(0, win);
    if (rank == 0)
        base[0] = 0;
    MPI_Win_fence(0, win);
    int one = rank + 1;
    MPI_Accumulate(&one, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_SUM, win);
    MPI_Win_fence(0, win);
    check(rank != 0 || base[0] == size * (size + 1) / 2, "MPI_Accumulate (MPI_SUM)");
    MPI_Win_free(&win);

    /* passive target on a created window: fetch_and_op counter and compare_and_swap */
    long counter = 0, lock = -1;
    long mem[2] = {0, -1};
    MPI_Win_create(mem, sizeof(mem), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Barrier(MPI_COMM_WORLD);
    long inc = 1, old = -5;
    for (int i = 0; i < 10; i++) {
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
        MPI_Fetch_and_op(&inc, &old, MPI_LONG, 0, 0, MPI_SUM, win);
        MPI_Win_unlock(0, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
    MPI_Get(&counter, 1, MPI_LONG, 0, 0, 1, MPI_LONG, win);
    MPI_Win_flush(0, win);
    MPI_Win_unlock(0, win);
    check(counter == 10L * size, "MPI_Fetch_and_op under MPI_Win_lock / flush");

    /* exactly one rank wins the compare-and-swap of -1 -> rank */
    long mine = rank, cmp = -1;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
    MPI_Compare_and_swap(&mine, &cmp, &lock, MPI_LONG, 0, 1, win);
    MPI_Win_unlock(0, win);
    int won = lock == -1, winners = 0;
    MPI_Allreduce(&won, &winners, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    check(winners == 1, "MPI_Compare_and_swap: one winner");
    MPI_Win_free(&win);

    MPI_Finalize();
    return 0;
}
