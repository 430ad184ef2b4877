/*
 * Collectives with device send and receive buffers (PSP_CUDA=1, the fake driver: device memory
 * the CPU cannot touch). Every collective of MPI, blocking, nonblocking and persistent, with
 * MPI_IN_PLACE where MPI has it, small (the netmod's own shortcuts) and large (MPICH's
 * algorithms); reductions with a builtin and a user-defined operation; MPI_Reduce_local.
 * Results are copied back to the host and checked.
 */
#include <string.h>
#include "../mpi/tap_mpi.h"
#include "cuda_test.h"

static int rank, size;

/* value rank r contributes at index i */
static int val(int r, int i)
{
    return r * 100003 + i * 7 + 1;
}

/* n ints on the device, element i = val(r, i) (r < 0: all -1) */
static int *dev_ints(int n, int r)
{
    int *h = malloc(sizeof(int) * (n ? n : 1));
    for (int i = 0; i < n; i++)
        h[i] = r < 0 ? -1 : val(r, i);
    int *d = dev_alloc(sizeof(int) * (n ? n : 1));
    to_dev(d, h, sizeof(int) * n);
    free(h);
    return d;
}

static int *host_copy(const int *d, int n)
{
    int *h = malloc(sizeof(int) * (n ? n : 1));
    from_dev(h, d, sizeof(int) * n);
    return h;
}

/* sum over ranks 0..upto-1 of val(r, i) */
static int sum_upto(int upto, int i)
{
    int s = 0;
    for (int r = 0; r < upto; r++)
        s += val(r, i);
    return s;
}

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int i = 0; i < *len; i++)
        ((int *)inout)[i] += ((int *)in)[i];
}

static void test_bcast(int n, int nb)
{
    int ok = 1;
    int step = size > 2 ? size - 1 : 1; /* the first and the last rank */
    for (int root = 0; root < size; root += step) {
        int *d = dev_ints(n, rank == root ? root : -1);
        if (nb) {
            MPI_Request req;
            MPI_Ibcast(d, n, MPI_INT, root, MPI_COMM_WORLD, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        } else {
            MPI_Bcast(d, n, MPI_INT, root, MPI_COMM_WORLD);
        }
        int *h = host_copy(d, n);
        for (int i = 0; i < n; i++)
            ok &= h[i] == val(root, i);
        free(h);
        dev_free(d);
    }
    char what[64];
    snprintf(what, sizeof(what), "%s of %d ints", nb ? "MPI_Ibcast" : "MPI_Bcast", n);
    check(ok, what);
}

/* mode 0 blocking, 1 nonblocking, 2 persistent (started twice, the data changed between) */
static void test_allreduce(int n, int in_place, int mode, MPI_Op op)
{
    int ok = 1;
    int *s = dev_ints(n, rank), *r = in_place ? s : dev_ints(n, -1);
    const void *sb = in_place ? MPI_IN_PLACE : s;
    if (mode == 0) {
        MPI_Allreduce(sb, r, n, MPI_INT, op, MPI_COMM_WORLD);
    } else if (mode == 1) {
        MPI_Request req;
        MPI_Iallreduce(sb, r, n, MPI_INT, op, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else {
        MPI_Request req;
        MPI_Allreduce_init(sb, r, n, MPI_INT, op, MPI_COMM_WORLD, MPI_INFO_NULL, &req);
        for (int round = 0; round < 2; round++) {
            int *h = malloc(sizeof(int) * n);
            for (int i = 0; i < n; i++)
                h[i] = val(rank, i) + round;
            to_dev(s, h, sizeof(int) * n);
            free(h);
            MPI_Start(&req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            int *res = host_copy(r, n);
            for (int i = 0; i < n; i++)
                ok &= res[i] == sum_upto(size, i) + size * round;
            free(res);
        }
        MPI_Request_free(&req);
    }
    if (mode != 2) {
        int *h = host_copy(r, n);
        for (int i = 0; i < n; i++)
            ok &= h[i] == sum_upto(size, i);
        free(h);
    }
    dev_free(s);
    if (!in_place)
        dev_free(r);
    char what[128];
    snprintf(what, sizeof(what), "%s%s of %d ints%s, %s op",
             mode == 0   ? "MPI_Allreduce"
             : mode == 1 ? "MPI_Iallreduce"
                         : "MPI_Allreduce_init",
             mode == 2 ? " started twice" : "", n, in_place ? " in place" : "",
             op == MPI_SUM ? "builtin" : "user-defined");
    check(ok, what);
}

static void test_reduce_scan(int n)
{
    int ok = 1, root = size - 1;
    int *s = dev_ints(n, rank), *r = dev_ints(n, -1), *h;
    MPI_Reduce(s, r, n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD);
    if (rank == root) {
        h = host_copy(r, n);
        for (int i = 0; i < n; i++)
            ok &= h[i] == sum_upto(size, i);
        free(h);
    }
    MPI_Scan(s, r, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    h = host_copy(r, n);
    for (int i = 0; i < n; i++)
        ok &= h[i] == sum_upto(rank + 1, i);
    free(h);
    MPI_Exscan(s, r, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank > 0) {
        h = host_copy(r, n);
        for (int i = 0; i < n; i++)
            ok &= h[i] == sum_upto(rank, i);
        free(h);
    }
    /* in place at the root */
    int *ip = dev_ints(n, rank);
    MPI_Reduce(rank == root ? MPI_IN_PLACE : ip, rank == root ? ip : NULL, n, MPI_INT, MPI_SUM,
               root, MPI_COMM_WORLD);
    if (rank == root) {
        h = host_copy(ip, n);
        for (int i = 0; i < n; i++)
            ok &= h[i] == sum_upto(size, i);
        free(h);
    }
    /* MPI_Reduce_local: both on the device */
    int *a = dev_ints(n, 1), *b = dev_ints(n, 2);
    MPI_Reduce_local(a, b, n, MPI_INT, MPI_SUM);
    h = host_copy(b, n);
    for (int i = 0; i < n; i++)
        ok &= h[i] == val(1, i) + val(2, i);
    free(h);
    dev_free(a);
    dev_free(b);
    dev_free(ip);
    dev_free(s);
    dev_free(r);
    char what[96];
    snprintf(what, sizeof(what),
             "MPI_Reduce (also in place), Scan, Exscan, Reduce_local of %d ints", n);
    check(ok, what);
}

/* size blocks of n ints on the device: block q holds val(q, off + i) */
static int blocks_ok(const int *d, int n, int off)
{
    int ok = 1, *h = host_copy(d, n * size);
    for (int q = 0; q < size; q++)
        for (int i = 0; i < n; i++)
            ok &= h[q * n + i] == val(q, off + i);
    free(h);
    return ok;
}

/* block b of rank r's send data for rank d: n ints val(r, d * n + i) */
static void test_gather_family(int n, int nb)
{
    int ok = 1, root = 0;
    int *s = dev_ints(n * size, rank), *r = dev_ints(n * size, -1), *h;
    MPI_Request req;
    /* allgather: block q = rank q's first n values */
    if (nb) {
        MPI_Iallgather(s, n, MPI_INT, r, n, MPI_INT, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else {
        MPI_Allgather(s, n, MPI_INT, r, n, MPI_INT, MPI_COMM_WORLD);
    }
    ok &= blocks_ok(r, n, 0);
    /* alltoall: block q of ours = block rank of q's */
    if (nb) {
        MPI_Ialltoall(s, n, MPI_INT, r, n, MPI_INT, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else {
        MPI_Alltoall(s, n, MPI_INT, r, n, MPI_INT, MPI_COMM_WORLD);
    }
    ok &= blocks_ok(r, n, rank * n);
    /* gather and scatter at root */
    dev_set(r, 0, sizeof(int) * n * size);
    MPI_Gather(s, n, MPI_INT, r, n, MPI_INT, root, MPI_COMM_WORLD);
    if (rank == root)
        ok &= blocks_ok(r, n, 0);
    int *sc = dev_ints(n, -1);
    MPI_Scatter(s, n, MPI_INT, sc, n, MPI_INT, root, MPI_COMM_WORLD);
    h = host_copy(sc, n);
    for (int i = 0; i < n; i++)
        ok &= h[i] == val(root, rank * n + i);
    free(h);
    dev_free(sc);
    /* allgather in place */
    int *ip = dev_ints(n * size, rank);
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ip, n, MPI_INT, MPI_COMM_WORLD);
    h = host_copy(ip, n * size);
    for (int q = 0; q < size; q++)
        for (int i = 0; i < n; i++)
            ok &= h[q * n + i] == val(q, q * n + i);
    free(h);
    dev_free(ip);
    dev_free(s);
    dev_free(r);
    char what[96];
    snprintf(what, sizeof(what),
             "%sAllgather (also in place), %sAlltoall, Gather, Scatter, %d ints", nb ? "I" : "",
             nb ? "I" : "", n);
    check(ok, what);
}

/* size blocks of n ints at displacements rd, each followed by a gap that stays -1: block q
   holds val(q, rank * n + i) (what alltoall(v/w) gives) */
static int gapped_ok(const int *d, int n, const int *rd)
{
    int ok = 1, *h = host_copy(d, size * (n + 1));
    for (int q = 0; q < size; q++) {
        for (int i = 0; i < n; i++)
            ok &= h[rd[q] + i] == val(q, rank * n + i);
        ok &= h[rd[q] + n] == -1;
    }
    free(h);
    return ok;
}

/* v and w variants: rank q sends q+1 blocks... of n ints each */
static void test_v_family(int n)
{
    int ok = 1, root = size - 1;
    int *counts = malloc(sizeof(int) * size), *displs = malloc(sizeof(int) * size);
    int *wd = malloc(sizeof(int) * size);
    MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * size);
    int total = 0;
    for (int q = 0; q < size; q++) {
        counts[q] = n * (q + 1);
        displs[q] = total; /* a gap of one int after each block */
        wd[q] = displs[q] * (int)sizeof(int);
        types[q] = MPI_INT;
        total += counts[q] + 1;
    }
    int *s = dev_ints(n * size, rank), *r = dev_ints(total, -1), *h;
    MPI_Allgatherv(s, counts[rank], MPI_INT, r, counts, displs, MPI_INT, MPI_COMM_WORLD);
    h = host_copy(r, total);
    for (int q = 0; q < size; q++) {
        for (int i = 0; i < counts[q]; i++)
            ok &= h[displs[q] + i] == val(q, i);
        ok &= h[displs[q] + counts[q]] == -1; /* the gap stays */
    }
    free(h);
    dev_set(r, 0xff, sizeof(int) * total);
    MPI_Gatherv(s, counts[rank], MPI_INT, r, counts, displs, MPI_INT, root, MPI_COMM_WORLD);
    if (rank == root) {
        h = host_copy(r, total);
        for (int q = 0; q < size; q++) {
            for (int i = 0; i < counts[q]; i++)
                ok &= h[displs[q] + i] == val(q, i);
            ok &= h[displs[q] + counts[q]] == -1;
        }
        free(h);
    }
    int *sc = dev_ints(counts[rank], -1);
    int *src = dev_ints(total, root);
    MPI_Scatterv(src, counts, displs, MPI_INT, sc, counts[rank], MPI_INT, root, MPI_COMM_WORLD);
    h = host_copy(sc, counts[rank]);
    for (int i = 0; i < counts[rank]; i++)
        ok &= h[i] == val(root, displs[rank] + i);
    free(h);
    /* alltoallv / alltoallw: n ints to each, placed with gaps */
    int *sc2 = malloc(sizeof(int) * size), *sd2 = malloc(sizeof(int) * size);
    int *sdw = malloc(sizeof(int) * size);
    for (int q = 0; q < size; q++) {
        sc2[q] = n;
        sd2[q] = q * n;
        sdw[q] = sd2[q] * (int)sizeof(int);
    }
    int *rv = dev_ints(size * (n + 1), -1);
    int *rd = malloc(sizeof(int) * size), *rdw = malloc(sizeof(int) * size);
    for (int q = 0; q < size; q++) {
        rd[q] = q * (n + 1);
        rdw[q] = rd[q] * (int)sizeof(int);
    }
    MPI_Alltoallv(s, sc2, sd2, MPI_INT, rv, sc2, rd, MPI_INT, MPI_COMM_WORLD);
    ok &= gapped_ok(rv, n, rd);
    dev_set(rv, 0xff, sizeof(int) * size * (n + 1));
    MPI_Alltoallw(s, sc2, sdw, types, rv, sc2, rdw, types, MPI_COMM_WORLD);
    ok &= gapped_ok(rv, n, rd);
    /* reduce_scatter(_block): block q (n ints) of the sum goes to rank q */
    int *rs = dev_ints(n, -1), *rcounts = malloc(sizeof(int) * size);
    for (int q = 0; q < size; q++)
        rcounts[q] = n;
    MPI_Reduce_scatter(s, rs, rcounts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    h = host_copy(rs, n);
    for (int i = 0; i < n; i++)
        ok &= h[i] == sum_upto(size, rank * n + i);
    free(h);
    dev_set(rs, 0, sizeof(int) * n);
    MPI_Reduce_scatter_block(s, rs, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    h = host_copy(rs, n);
    for (int i = 0; i < n; i++)
        ok &= h[i] == sum_upto(size, rank * n + i);
    free(h);
    dev_free(rs);
    dev_free(rv);
    dev_free(sc);
    dev_free(src);
    dev_free(s);
    dev_free(r);
    free(counts), free(displs), free(wd), free(types), free(sc2), free(sd2), free(sdw), free(rd);
    free(rdw), free(rcounts);
    char what[128];
    snprintf(what, sizeof(what),
             "Allgatherv, Gatherv, Scatterv, Alltoallv, Alltoallw (gaps kept), Reduce_scatter"
             "(_block), %d ints",
             n);
    check(ok, what);
}

static void test_neighbor(int n)
{
    int ok = 1, periods = 1;
    MPI_Comm ring;
    MPI_Cart_create(MPI_COMM_WORLD, 1, &size, &periods, 0, &ring);
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    int *s = dev_ints(n, rank), *r = dev_ints(2 * n, -1);
    MPI_Neighbor_allgather(s, n, MPI_INT, r, n, MPI_INT, ring);
    int *h = host_copy(r, 2 * n);
    for (int i = 0; i < n; i++)
        ok &= h[i] == val(left, i) && h[n + i] == val(right, i);
    free(h);
    MPI_Request req;
    dev_set(r, 0, sizeof(int) * 2 * n);
    MPI_Ineighbor_allgather(s, n, MPI_INT, r, n, MPI_INT, ring, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    h = host_copy(r, 2 * n);
    for (int i = 0; i < n; i++)
        ok &= h[i] == val(left, i) && h[n + i] == val(right, i);
    free(h);
    dev_free(s);
    dev_free(r);
    MPI_Comm_free(&ring);
    char what[64];
    snprintf(what, sizeof(what), "MPI_(I)Neighbor_allgather on a ring, %d ints", n);
    check(ok, what);
}

int main(int argc, char **argv)
{
    cuda_test_init();
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Op usum;
    MPI_Op_create(user_sum, 1, &usum);

    static const int ns[] = {1, 2000, 300000};
    for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++) {
        int n = ns[k];
        test_bcast(n, 0);
        test_bcast(n, 1);
        for (int in_place = 0; in_place < 2; in_place++)
            for (int mode = 0; mode < 3; mode++)
                test_allreduce(n, in_place, mode, MPI_SUM);
        test_allreduce(n, 0, 0, usum);
        test_reduce_scan(n);
        if (n <= 2000) {
            test_gather_family(n, 0);
            test_gather_family(n, 1);
            test_v_family(n);
            test_neighbor(n);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    check(1, "MPI_Barrier");
    MPI_Op_free(&usum);
    MPI_Finalize();
    if (rank == 0)
        printf("1..%d\n", tap_ntest);
    return 0;
}
