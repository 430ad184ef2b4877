/*
 * RMA and partitioned communication with device memory (PSP_CUDA=1, the fake driver): windows
 * made with MPI_Win_create over device memory, origin buffers on the device, in every
 * synchronisation mode (fence, post/start/complete/wait, lock/unlock, lock_all with flush):
 * Put, Get, Accumulate, Get_accumulate, Fetch_and_op, Compare_and_swap; also a host window with
 * device origins and the reverse. Then MPI_Psend_init/MPI_Precv_init on device buffers.
 */
#include <string.h>
#include "../mpi/tap_mpi.h"
#include "cuda_test.h"

#define N 1000

static int rank, size, left, right;

static int val(int r, int i)
{
    return r * 1009 + i + 1;
}

static void *buf_ints(int dev, int n, int r)
{
    int *h = malloc(sizeof(int) * n);
    for (int i = 0; i < n; i++)
        h[i] = r < 0 ? 0 : val(r, i);
    if (!dev)
        return h;
    void *d = dev_alloc(sizeof(int) * n);
    to_dev(d, h, sizeof(int) * n);
    free(h);
    return d;
}

static int *read_ints(int dev, const void *b, int n)
{
    int *h = malloc(sizeof(int) * n);
    if (dev)
        from_dev(h, b, sizeof(int) * n);
    else
        memcpy(h, b, sizeof(int) * n);
    return h;
}

static void release(int dev, void *b)
{
    if (dev)
        dev_free(b);
    else
        free(b);
}

static void set_ints(int dev, void *b, int n, int r)
{
    void *t = buf_ints(0, n, r);
    if (dev)
        to_dev(b, t, sizeof(int) * n);
    else
        memcpy(b, t, sizeof(int) * n);
    free(t);
}

/* wdev: the window's memory on the device; odev: the origin buffers */
static void rma_modes(int wdev, int odev)
{
    int ok = 1, *h;
    void *base = buf_ints(wdev, N, rank);
    MPI_Win win;
    MPI_Win_create(base, sizeof(int) * N, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    void *o = buf_ints(odev, N, rank), *g = buf_ints(odev, N, -1);

    /* fence: put our values into the right neighbour's second half, get the left's first half */
    MPI_Win_fence(0, win);
    MPI_Put((int *)o + N / 2, N / 2, MPI_INT, right, N / 2, N / 2, MPI_INT, win);
    MPI_Get(g, N / 2, MPI_INT, left, 0, N / 2, MPI_INT, win);
    MPI_Win_fence(0, win);
    h = read_ints(wdev, base, N);
    for (int i = N / 2; i < N; i++)
        ok &= h[i] == val(left, i);
    free(h);
    h = read_ints(odev, g, N / 2);
    for (int i = 0; i < N / 2; i++)
        ok &= h[i] == val(left, i);
    free(h);
    check(ok, "fence: Put and Get");

    /* accumulate: everybody adds its values to rank 0's window */
    ok = 1;
    set_ints(wdev, base, N, -1);
    MPI_Win_fence(0, win);
    MPI_Accumulate(o, N, MPI_INT, 0, 0, N, MPI_INT, MPI_SUM, win);
    MPI_Win_fence(0, win);
    if (rank == 0) {
        h = read_ints(wdev, base, N);
        for (int i = 0; i < N; i++) {
            int s = 0;
            for (int r = 0; r < size; r++)
                s += val(r, i);
            ok &= h[i] == s;
        }
        free(h);
    }
    check(ok, "fence: Accumulate (MPI_SUM) from every rank");

    /* post/start/complete/wait on the ring: put into the right neighbour */
    ok = 1;
    set_ints(wdev, base, N, -1);
    MPI_Group world, gl, gr;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &left, &gl);
    MPI_Group_incl(world, 1, &right, &gr);
    MPI_Win_post(gl, 0, win);
    MPI_Win_start(gr, 0, win);
    MPI_Put(o, N, MPI_INT, right, 0, N, MPI_INT, win);
    MPI_Win_complete(win);
    MPI_Win_wait(win);
    h = read_ints(wdev, base, N);
    for (int i = 0; i < N; i++)
        ok &= h[i] == val(left, i);
    free(h);
    MPI_Group_free(&gl);
    MPI_Group_free(&gr);
    MPI_Group_free(&world);
    check(ok, "post/start/complete/wait: Put");

    /* lock/unlock: Get_accumulate, Fetch_and_op, Compare_and_swap on the right neighbour */
    ok = 1;
    set_ints(wdev, base, N, rank);
    MPI_Barrier(MPI_COMM_WORLD);
    void *one = buf_ints(odev, 1, -1), *res = buf_ints(odev, 1, -1), *cmp = buf_ints(odev, 1, -1);
    set_ints(odev, one, 1, -1);
    int v = 5;
    if (odev)
        to_dev(one, &v, sizeof(int));
    else
        *(int *)one = v;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win);
    MPI_Get_accumulate(o, 10, MPI_INT, g, 10, MPI_INT, right, 0, 10, MPI_INT, MPI_SUM, win);
    MPI_Fetch_and_op(one, res, MPI_INT, right, 20, MPI_SUM, win);
    MPI_Win_unlock(right, win);
    h = read_ints(odev, g, 10);
    for (int i = 0; i < 10; i++)
        ok &= h[i] == val(right, i);
    free(h);
    h = read_ints(odev, res, 1);
    ok &= h[0] == val(right, 20);
    free(h);
    /* compare-and-swap: index 30 holds val(right, 30); swap in 77 */
    int want = val(right, 30), seventy7 = 77;
    if (odev) {
        to_dev(cmp, &want, sizeof(int));
        to_dev(one, &seventy7, sizeof(int));
    } else {
        *(int *)cmp = want;
        *(int *)one = seventy7;
    }
    MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win);
    MPI_Compare_and_swap(one, cmp, res, MPI_INT, right, 30, win);
    MPI_Win_unlock(right, win);
    h = read_ints(odev, res, 1);
    ok &= h[0] == want;
    free(h);
    MPI_Barrier(MPI_COMM_WORLD);
    h = read_ints(wdev, base, N);
    for (int i = 0; i < 10; i++)
        ok &= h[i] == val(rank, i) + val(left, i);
    ok &= h[20] == val(rank, 20) + 5 && h[30] == 77;
    free(h);
    check(ok, "lock/unlock: Get_accumulate, Fetch_and_op, Compare_and_swap");

    /* lock_all + flush: put into the left neighbour, flush, read it back with Get */
    ok = 1;
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock_all(0, win);
    MPI_Put(o, N, MPI_INT, left, 0, N, MPI_INT, win);
    MPI_Win_flush(left, win);
    set_ints(odev, g, N, -1);
    MPI_Get(g, N, MPI_INT, left, 0, N, MPI_INT, win);
    MPI_Win_flush(left, win);
    MPI_Win_unlock_all(win);
    h = read_ints(odev, g, N);
    for (int i = 0; i < N; i++)
        ok &= h[i] == val(rank, i);
    free(h);
    check(ok, "lock_all + flush: Put, Get");

    MPI_Win_free(&win);
    release(wdev, base);
    release(odev, o);
    release(odev, g);
    release(odev, one);
    release(odev, res);
    release(odev, cmp);
}

static void partitioned(int parts)
{
    int ok = 1, n = 4096;
    void *s = buf_ints(1, parts * n, rank), *r = buf_ints(1, parts * n, -1);
    MPI_Request sreq, rreq;
    MPI_Psend_init(s, parts, n, MPI_INT, right, 5, MPI_COMM_WORLD, MPI_INFO_NULL, &sreq);
    MPI_Precv_init(r, parts, n, MPI_INT, left, 5, MPI_COMM_WORLD, MPI_INFO_NULL, &rreq);
    for (int round = 0; round < 2; round++) {
        MPI_Start(&rreq);
        MPI_Start(&sreq);
        for (int p = parts - 1; p >= 0; p--)
            MPI_Pready(p, sreq);
        MPI_Wait(&sreq, MPI_STATUS_IGNORE);
        MPI_Wait(&rreq, MPI_STATUS_IGNORE);
        int *h = read_ints(1, r, parts * n);
        for (int i = 0; i < parts * n; i++)
            ok &= h[i] == val(left, i);
        free(h);
        set_ints(1, r, parts * n, -1);
    }
    MPI_Request_free(&sreq);
    MPI_Request_free(&rreq);
    release(1, s);
    release(1, r);
    char what[80];
    snprintf(what, sizeof(what), "partitioned, %d partitions of %d ints, device -> device", parts,
             n);
    check(ok, what);
}

int main(int argc, char **argv)
{
    cuda_test_init();
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    left = (rank + size - 1) % size;
    right = (rank + 1) % size;
    rma_modes(1, 1);
    rma_modes(0, 1);
    rma_modes(1, 0);
    partitioned(1);
    partitioned(8);
    MPI_Finalize();
    if (rank == 0)
        printf("1..%d\n", tap_ntest);
    return 0;
}
