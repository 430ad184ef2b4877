/*
 * One-sided communication over MPIDIG active messages, in every synchronization mode: fence
 * (with assertions), post/start/complete/wait (and test), lock shared/exclusive, lock_all with
 * every flush variant, request-based operations, MPI_Win_sync on a shared window; windows from
 * MPI_Win_create, _allocate, _create_dynamic and _allocate_shared; put/get/accumulate/
 * get_accumulate/fetch_and_op/compare_and_swap, up to 2 MiB. Any number of ranks. TAP from
 * rank 0.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "tap_mpi.h"

static int rank, size;

/* the distinct ranks among left and right neighbour (one rank: itself) */
static void neighbours(MPI_Group *g)
{
    int right = (rank + 1) % size, left = (rank + size - 1) % size, r[2] = {left, right};
    MPI_Group world;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, left == right ? 1 : 2, r, g);
    MPI_Group_free(&world);
}

static void test_pscw(void)
{
    /* generalized active target: every rank exposes its window to its neighbours and puts
     * into both of them; the second round polls MPI_Win_test instead of MPI_Win_wait */
    enum { M = 100 };
    int right = (rank + 1) % size, left = (rank + size - 1) % size, ok = 1;
    int mem[2 * M], src[M];
    MPI_Win win;
    MPI_Group g;
    neighbours(&g);
    MPI_Win_create(mem, sizeof(mem), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 2 * M; i++)
            mem[i] = -1;
        for (int i = 0; i < M; i++)
            src[i] = round * 1000000 + rank * M + i;
        MPI_Barrier(MPI_COMM_WORLD); /* nobody puts before everybody reset its window */
        MPI_Win_post(g, 0, win);
        MPI_Win_start(g, 0, win);
        MPI_Put(src, M, MPI_INT, right, 0, M, MPI_INT, win); /* into right's lower half */
        MPI_Put(src, M, MPI_INT, left, M, M, MPI_INT, win);  /* into left's upper half */
        MPI_Win_complete(win);
        if (round == 0) {
            MPI_Win_wait(win);
        } else {
            int flag = 0;
            while (!flag)
                MPI_Win_test(win, &flag);
        }
        for (int i = 0; i < M; i++) {
            ok &= mem[i] == round * 1000000 + left * M + i;
            ok &= mem[M + i] == round * 1000000 + right * M + i;
        }
    }
    MPI_Win_free(&win);
    MPI_Group_free(&g);
    check(ok, "post/start/complete/wait and MPI_Win_test with both neighbours");
}

static void test_exclusive(void)
{
    /* read-modify-write with plain get + put: correct only if the exclusive locks exclude */
    enum { ITER = 20 };
    int *base, ok = 1, last = size - 1;
    MPI_Win win;
    MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    *base = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < ITER; i++) {
        for (int t = 0; t < 2; t++) {
            int target = t ? last : 0, v = -1;
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, target, 0, win);
            MPI_Get(&v, 1, MPI_INT, target, 0, 1, MPI_INT, win);
            MPI_Win_flush(target, win);
            v++;
            MPI_Put(&v, 1, MPI_INT, target, 0, 1, MPI_INT, win);
            MPI_Win_unlock(target, win);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win); /* local load in an epoch of our own */
    int expect = (size == 1 ? 2 : 1) * ITER * size;
    if (rank == 0 || rank == last)
        ok &= *base == expect;
    MPI_Win_unlock(rank, win);
    MPI_Win_free(&win);
    check(ok, "MPI_LOCK_EXCLUSIVE: get + flush + put increments from every rank, none lost");
}

static void test_lock_all(void)
{
    /* passive target on all ranks at once, with every flush variant */
    int *base, ok = 1;
    MPI_Win win;
    MPI_Win_allocate(2 * size * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base,
                     &win);
    for (int i = 0; i < 2 * size; i++)
        base[i] = -1;
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock_all(0, win);
    int v = rank, w = rank + 1000;
    for (int t = 0; t < size; t++) {
        MPI_Put(&v, 1, MPI_INT, t, rank, 1, MPI_INT, win);
        MPI_Win_flush_local(t, win); /* v may change now */
    }
    v = -7;
    MPI_Win_flush_all(win);
    for (int t = 0; t < size; t++)
        MPI_Put(&w, 1, MPI_INT, t, size + rank, 1, MPI_INT, win);
    MPI_Win_flush_local_all(win);
    w = -7;
    for (int t = 0; t < size; t++)
        MPI_Win_flush(t, win);
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win);
    for (int i = 0; i < size; i++)
        ok &= base[i] == i && base[size + i] == i + 1000;
    MPI_Win_unlock(rank, win);
    MPI_Win_free(&win);
    check(ok, "lock_all/unlock_all with flush, flush_all, flush_local, flush_local_all");
}

static void test_request_ops(void)
{
    /* request-based operations under lock_all */
    enum { M = 64 };
    int right = (rank + 1) % size, left = (rank + size - 1) % size, ok = 1;
    int *base, src[M], got[M], old = -1, one = 1;
    MPI_Win win;
    MPI_Win_allocate((M + 1) * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base,
                     &win);
    for (int i = 0; i < M; i++)
        base[i] = rank * M + i;
    base[M] = 0;
    for (int i = 0; i < M; i++)
        src[i] = -(rank * M + i);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Request rq[3];
    MPI_Status st[3];
    MPI_Win_lock_all(0, win);
    MPI_Rget(got, M, MPI_INT, left, 0, M, MPI_INT, win, &rq[0]);
    MPI_Wait(&rq[0], &st[0]);
    for (int i = 0; i < M; i++)
        ok &= got[i] == left * M + i;
    MPI_Win_flush_all(win);
    MPI_Barrier(MPI_COMM_WORLD); /* everybody has read before anybody overwrites */
    MPI_Rput(src, M, MPI_INT, right, 0, M, MPI_INT, win, &rq[0]);
    MPI_Raccumulate(&one, 1, MPI_INT, 0, M, 1, MPI_INT, MPI_SUM, win, &rq[1]);
    MPI_Rget_accumulate(&one, 1, MPI_INT, &old, 1, MPI_INT, size - 1, M, 1, MPI_INT, MPI_SUM, win,
                        &rq[2]);
    MPI_Waitall(3, rq, st);
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    ok &= old >= 0 && old < 2 * size;
    MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win);
    for (int i = 0; i < M; i++)
        ok &= base[i] == -(left * M + i);
    if (rank == 0 || rank == size - 1)
        ok &= base[M] == (size == 1 ? 2 : 1) * size;
    MPI_Win_unlock(rank, win);
    MPI_Win_free(&win);
    check(ok, "MPI_Rget / MPI_Rput / MPI_Raccumulate / MPI_Rget_accumulate");
}

static void test_acc_ops(void)
{
    /* accumulate ops, get_accumulate with MPI_NO_OP and MPI_REPLACE, derived target type,
     * and a 2 MiB put/get (rendezvous size) with fence assertions */
    enum { BIG = 512 * 1024 };
    int ok = 1, right = (rank + 1) % size, left = (rank + size - 1) % size, *base;
    MPI_Win win;
    MPI_Win_allocate((BIG + 16) * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base,
                     &win);
    for (int i = 0; i < BIG + 16; i++)
        base[i] = 0;
    MPI_Win_fence(MPI_MODE_NOPRECEDE, win);
    int r = rank, out = -1;
    MPI_Accumulate(&r, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_MAX, win);
    MPI_Accumulate(&r, 1, MPI_INT, 0, 1, 1, MPI_INT, MPI_MIN, win);
    MPI_Accumulate(&r, 1, MPI_INT, 0, 2, 1, MPI_INT, MPI_BOR, win);
    MPI_Win_fence(0, win);
    if (rank == 0) {
        int bor = 0;
        for (int i = 0; i < size; i++)
            bor |= i;
        ok &= base[0] == size - 1 && base[1] == 0 && base[2] == bor;
    }
    MPI_Win_fence(0, win);
    MPI_Get_accumulate(NULL, 0, MPI_INT, &out, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_NO_OP, win);
    MPI_Win_fence(0, win);
    ok &= out == size - 1;
    if (rank == 0)
        base[3] = 0;
    MPI_Win_fence(0, win);
    int mark = 100 + rank;
    out = -1;
    MPI_Get_accumulate(&mark, 1, MPI_INT, &out, 1, MPI_INT, right, 3, 1, MPI_INT, MPI_REPLACE, win);
    MPI_Win_fence(0, win);
    ok &= base[3] == 100 + left;
    ok &= out == 0; /* the old value */

    /* strided target: every other int of base[4..15] gets my rank added */
    MPI_Datatype every2;
    MPI_Type_vector(6, 1, 2, MPI_INT, &every2);
    MPI_Type_commit(&every2);
    int six[6] = {1, 1, 1, 1, 1, 1};
    MPI_Win_fence(0, win);
    MPI_Accumulate(six, 6, MPI_INT, right, 4, 1, every2, MPI_SUM, win);
    MPI_Win_fence(0, win);
    for (int i = 0; i < 12; i++)
        ok &= base[4 + i] == (i % 2 == 0);
    MPI_Type_free(&every2);

    /* 2 MiB put to the right, get it back from the left's window */
    int *src = malloc(BIG * sizeof(int)), *got = malloc(BIG * sizeof(int));
    for (int i = 0; i < BIG; i++)
        src[i] = rank ^ (i * 3);
    MPI_Win_fence(MPI_MODE_NOSTORE, win); /* no local stores since the last fence */
    MPI_Put(src, BIG, MPI_INT, right, 16, BIG, MPI_INT, win);
    MPI_Win_fence(MPI_MODE_NOSTORE | MPI_MODE_NOPUT, win); /* and only gets until the next */
    for (int i = 0; i < BIG; i++)
        ok &= base[16 + i] == (left ^ (i * 3));
    MPI_Get(got, BIG, MPI_INT, left, 16, BIG, MPI_INT, win);
    MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
    int ll = (left + size - 1) % size;
    for (int i = 0; i < BIG; i++)
        ok &= got[i] == (ll ^ (i * 3));
    free(src);
    free(got);
    MPI_Win_free(&win);
    check(ok, "accumulate MAX/MIN/BOR, get_accumulate NO_OP/REPLACE, strided target, 2 MiB "
              "put/get, fence assertions");
}

static void test_dynamic(void)
{
    /* MPI_Win_create_dynamic: attach memory, publish its address, put into the right's */
    enum { M = 1000 };
    int right = (rank + 1) % size, left = (rank + size - 1) % size, ok = 1;
    int *mem = malloc(M * sizeof(int)), src[M];
    MPI_Win win;
    MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_attach(win, mem, M * sizeof(int));
    for (int i = 0; i < M; i++) {
        mem[i] = -1;
        src[i] = rank * M + i;
    }
    MPI_Aint mine, *addr = malloc(size * sizeof(MPI_Aint));
    MPI_Get_address(mem, &mine);
    MPI_Allgather(&mine, 1, MPI_AINT, addr, 1, MPI_AINT, MPI_COMM_WORLD);
    MPI_Win_fence(0, win);
    MPI_Put(src, M, MPI_INT, right, addr[right], M, MPI_INT, win);
    MPI_Win_fence(0, win);
    for (int i = 0; i < M; i++)
        ok &= mem[i] == left * M + i;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, left, 0, win);
    int got = -1;
    MPI_Get(&got, 1, MPI_INT, left, MPI_Aint_add(addr[left], 5 * sizeof(int)), 1, MPI_INT, win);
    MPI_Win_unlock(left, win);
    ok &= got == ((left + size - 1) % size) * M + 5;
    MPI_Win_fence(0, win);
    MPI_Win_detach(win, mem);
    MPI_Win_free(&win);
    free(addr);
    free(mem);
    check(ok, "MPI_Win_create_dynamic + MPI_Win_attach: put with fence, get under lock");
}

static void test_shared(void)
{
    /* MPI_Win_allocate_shared on the node: load/store into the neighbour's segment */
    MPI_Comm node;
    int nrank, nsize, ok = 1, *mine, *theirs;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &nrank);
    MPI_Comm_size(node, &nsize);
    MPI_Win win;
    MPI_Win_allocate_shared(100 * sizeof(int), sizeof(int), MPI_INFO_NULL, node, &mine, &win);
    int next = (nrank + 1) % nsize, prev = (nrank + nsize - 1) % nsize, disp;
    MPI_Aint sz;
    MPI_Win_shared_query(win, next, &sz, &disp, &theirs);
    ok &= sz == 100 * sizeof(int) && disp == sizeof(int);
    MPI_Win_lock_all(0, win);
    for (int i = 0; i < 100; i++)
        theirs[i] = nrank * 100 + i; /* plain stores into the next rank's memory */
    MPI_Win_sync(win);
    MPI_Barrier(node);
    MPI_Win_sync(win);
    for (int i = 0; i < 100; i++)
        ok &= mine[i] == prev * 100 + i;
    MPI_Win_unlock_all(win);
    MPI_Win_free(&win);
    MPI_Comm_free(&node);
    check(ok, "MPI_Win_allocate_shared + MPI_Win_shared_query: stores into the neighbour, "
              "MPI_Win_sync");
}

int main(int argc, char **argv)
{
    enum { N = 1000 };
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0)
        printf("1..12\n");
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

    test_pscw();
    test_exclusive();
    test_lock_all();
    test_request_ops();
    test_acc_ops();
    test_dynamic();
    test_shared();
    MPI_Finalize();
    return 0;
}
