/*
 * A sample of every collective with data checks, for any number of ranks: blocking, then the
 * nonblocking variants all in flight at once, persistent ones, neighborhood collectives on a
 * cartesian topology, and a sample again on a split communicator (ranks reversed).
 * One TAP line per group, printed by rank 0; every check is ANDed over all ranks.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tap_mpi.h"

static int wrank;

static int val(int r, int i)
{
    return r * 1000 + i;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* all ranks run on one host in this suite */
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int test_barrier(MPI_Comm comm)
{
    /* nobody leaves before the last one (rank 0, 50 ms late) has entered */
    int rank, ok = 1;
    MPI_Comm_rank(comm, &rank);
    for (int nb = 0; nb < 2; nb++) {
        double entered = 0, left;
        MPI_Barrier(comm);
        if (rank == 0) {
            struct timespec d = {0, 50 * 1000 * 1000};
            nanosleep(&d, NULL);
            entered = now();
        }
        if (nb) {
            MPI_Request rq;
            MPI_Ibarrier(comm, &rq);
            MPI_Wait(&rq, MPI_STATUS_IGNORE);
        } else {
            MPI_Barrier(comm);
        }
        left = now();
        MPI_Bcast(&entered, 1, MPI_DOUBLE, 0, comm);
        ok &= left >= entered;
    }
    return ok;
}

static int test_bcast(MPI_Comm comm)
{
    /* from every root; small, 64 KiB (the netmod's tree on up to 8 ranks,
       PSP_MPI_BCAST_TREE_MAX) and 1 MiB (MPICH's scatter and allgather) */
    int rank, size, ok = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    const int counts[3] = {10, 16 * 1024, 256 * 1024};
    int *buf = malloc(counts[2] * sizeof(int));
    for (int c = 0; c < 3; c++) {
        for (int root = 0; root < size; root++) {
            for (int i = 0; i < counts[c]; i++)
                buf[i] = rank == root ? val(root, i) : -1;
            MPI_Bcast(buf, counts[c], MPI_INT, root, comm);
            for (int i = 0; i < counts[c]; i++)
                ok &= buf[i] == val(root, i);
        }
    }
    free(buf);
    return ok;
}

static int test_gather_scatter(MPI_Comm comm)
{
    enum { K = 10 };
    int rank, size, ok = 1, root;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    root = size - 1;
    int mine[K], *all = malloc(size * K * sizeof(int)), *cnt = malloc(size * sizeof(int)),
                 *dsp = malloc(size * sizeof(int));
    /* gather */
    for (int i = 0; i < K; i++)
        mine[i] = val(rank, i);
    MPI_Gather(mine, K, MPI_INT, all, K, MPI_INT, root, comm);
    if (rank == root)
        for (int r = 0; r < size; r++)
            for (int i = 0; i < K; i++)
                ok &= all[r * K + i] == val(r, i);
    /* gatherv: rank r contributes r % K + 1 ints, stored back to front */
    for (int r = 0, d = size * K; r < size; r++) {
        cnt[r] = r % K + 1;
        d -= cnt[r];
        dsp[r] = d;
    }
    for (int i = 0; i < size * K; i++)
        all[i] = -1;
    MPI_Gatherv(mine, cnt[rank], MPI_INT, all, cnt, dsp, MPI_INT, root, comm);
    if (rank == root)
        for (int r = 0; r < size; r++)
            for (int i = 0; i < cnt[r]; i++)
                ok &= all[dsp[r] + i] == val(r, i);
    /* scatter from rank 0 */
    for (int i = 0; i < size * K; i++)
        all[i] = val(i / K, i % K);
    memset(mine, 0xff, sizeof(mine));
    MPI_Scatter(all, K, MPI_INT, mine, K, MPI_INT, 0, comm);
    for (int i = 0; i < K; i++)
        ok &= mine[i] == val(rank, i);
    /* scatterv with the gatherv layout, root = last */
    for (int r = 0; r < size; r++)
        for (int i = 0; i < cnt[r]; i++)
            all[dsp[r] + i] = val(r, i);
    memset(mine, 0xff, sizeof(mine));
    MPI_Scatterv(all, cnt, dsp, MPI_INT, mine, cnt[rank], MPI_INT, root, comm);
    for (int i = 0; i < K; i++)
        ok &= mine[i] == (i < cnt[rank] ? val(rank, i) : -1);
    free(all);
    free(cnt);
    free(dsp);
    return ok;
}

static int test_allgather(MPI_Comm comm)
{
    enum { K = 7 };
    int rank, size, ok = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int mine[K], *all = malloc(size * K * sizeof(int)), *cnt = malloc(size * sizeof(int)),
                 *dsp = malloc(size * sizeof(int));
    for (int i = 0; i < K; i++)
        mine[i] = val(rank, i);
    MPI_Allgather(mine, K, MPI_INT, all, K, MPI_INT, comm);
    for (int i = 0; i < size * K; i++)
        ok &= all[i] == val(i / K, i % K);
    /* in place */
    for (int i = 0; i < size * K; i++)
        all[i] = i / K == rank ? val(rank, i % K) : -1;
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, K, MPI_INT, comm);
    for (int i = 0; i < size * K; i++)
        ok &= all[i] == val(i / K, i % K);
    /* allgatherv: r % K + 1 ints from rank r, packed in rank order */
    for (int r = 0, d = 0; r < size; r++) {
        cnt[r] = r % K + 1;
        dsp[r] = d;
        d += cnt[r];
    }
    for (int i = 0; i < size * K; i++)
        all[i] = -1;
    MPI_Allgatherv(mine, cnt[rank], MPI_INT, all, cnt, dsp, MPI_INT, comm);
    for (int r = 0; r < size; r++)
        for (int i = 0; i < cnt[r]; i++)
            ok &= all[dsp[r] + i] == val(r, i);
    free(all);
    free(cnt);
    free(dsp);
    return ok;
}

/* alltoall data: block for rank `to` from rank `from`, element i */
static int a2a(int from, int to, int i)
{
    return from * 10000 + to * 100 + i;
}

static int test_alltoall(MPI_Comm comm)
{
    enum { K = 5 };
    int rank, size, ok = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int *s = malloc(size * K * sizeof(int)), *r = malloc(size * K * sizeof(int));
    int *sc = malloc(size * sizeof(int)), *sd = malloc(size * sizeof(int));
    int *rc = malloc(size * sizeof(int)), *rd = malloc(size * sizeof(int));
    for (int j = 0; j < size; j++)
        for (int i = 0; i < K; i++)
            s[j * K + i] = a2a(rank, j, i);
    MPI_Alltoall(s, K, MPI_INT, r, K, MPI_INT, comm);
    for (int j = 0; j < size; j++)
        for (int i = 0; i < K; i++)
            ok &= r[j * K + i] == a2a(j, rank, i);
    /* MPI_IN_PLACE, and a receive layout of every other int (the gaps stay as they were) */
    for (int j = 0; j < size; j++)
        for (int i = 0; i < K; i++)
            r[j * K + i] = a2a(rank, j, i);
    MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, K, MPI_INT, comm);
    for (int j = 0; j < size; j++)
        for (int i = 0; i < K; i++)
            ok &= r[j * K + i] == a2a(j, rank, i);
    MPI_Datatype every2, every2_1;
    MPI_Type_vector(K, 1, 2, MPI_INT, &every2_1);
    MPI_Type_create_resized(every2_1, 0, 2 * K * (MPI_Aint)sizeof(int), &every2);
    MPI_Type_commit(&every2);
    int *g = malloc(size * 2 * K * sizeof(int));
    for (int i = 0; i < size * 2 * K; i++)
        g[i] = -7;
    MPI_Alltoall(s, K, MPI_INT, g, 1, every2, comm);
    for (int j = 0; j < size; j++)
        for (int i = 0; i < K; i++)
            ok &= g[j * 2 * K + 2 * i] == a2a(j, rank, i) && g[j * 2 * K + 2 * i + 1] == -7;
    free(g);
    MPI_Type_free(&every2);
    MPI_Type_free(&every2_1);
    /* alltoallv: rank r sends (r + j) % K + 1 ints to rank j */
    for (int j = 0, d = 0, e = 0; j < size; j++) {
        sc[j] = (rank + j) % K + 1;
        rc[j] = (j + rank) % K + 1;
        sd[j] = d;
        rd[j] = e;
        d += K;
        e += rc[j];
    }
    for (int i = 0; i < size * K; i++)
        r[i] = -1;
    MPI_Alltoallv(s, sc, sd, MPI_INT, r, rc, rd, MPI_INT, comm);
    for (int j = 0; j < size; j++)
        for (int i = 0; i < rc[j]; i++)
            ok &= r[rd[j] + i] == a2a(j, rank, i);
    /* alltoallw: K ints to every rank, sent as a 1-int-stride vector of K, received as one
     * contiguous type of K ints, byte displacements */
    MPI_Datatype vec, contig;
    MPI_Type_vector(K, 1, 1, MPI_INT, &vec);
    MPI_Type_contiguous(K, MPI_INT, &contig);
    MPI_Type_commit(&vec);
    MPI_Type_commit(&contig);
    MPI_Datatype *st = malloc(size * sizeof(MPI_Datatype)),
                 *rt = malloc(size * sizeof(MPI_Datatype));
    for (int j = 0; j < size; j++) {
        sc[j] = 1;
        rc[j] = 1;
        sd[j] = (size - 1 - j) * K * (int)sizeof(int); /* send blocks from the back */
        rd[j] = j * K * (int)sizeof(int);
        st[j] = vec;
        rt[j] = contig;
        for (int i = 0; i < K; i++)
            s[(size - 1 - j) * K + i] = a2a(rank, j, i);
    }
    for (int i = 0; i < size * K; i++)
        r[i] = -1;
    MPI_Alltoallw(s, sc, sd, st, r, rc, rd, rt, comm);
    for (int j = 0; j < size; j++)
        for (int i = 0; i < K; i++)
            ok &= r[j * K + i] == a2a(j, rank, i);
    MPI_Type_free(&vec);
    MPI_Type_free(&contig);
    free(st);
    free(rt);
    free(s);
    free(r);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    return ok;
}

/* a non-commutative user op on 2x2 integer matrices (stored a b c d): inout = in x inout */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    int *a = in, *b = inout;
    for (int k = 0; k < *len; k++, a += 4, b += 4) {
        int c[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3], a[2] * b[0] + a[3] * b[2],
                    a[2] * b[1] + a[3] * b[3]};
        memcpy(b, c, sizeof(c));
    }
}

static void rank_matrix(int r, int *m) /* [[1, r+1], [r%3, 1]]: the order of products matters */
{
    m[0] = 1;
    m[1] = r + 1;
    m[2] = r % 3;
    m[3] = 1;
}

static int test_reduce(MPI_Comm comm)
{
    int rank, size, ok = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    /* int SUM to every root */
    for (int root = 0; root < size; root++) {
        int v[3] = {rank, 1, -rank}, s[3] = {-1, -1, -1};
        MPI_Reduce(v, s, 3, MPI_INT, MPI_SUM, root, comm);
        if (rank == root)
            ok &= s[0] == size * (size - 1) / 2 && s[1] == size && s[2] == -s[0];
    }
    /* in place at every root, 2000 ints: MPICH 4.0.2's node-aware composition handed a root's
       MPI_IN_PLACE on to a reduce where it was not the root, which then copied from it */
    int *big = malloc(2000 * sizeof(int));
    for (int root = 0; root < size; root++) {
        for (int i = 0; i < 2000; i++)
            big[i] = rank + i;
        MPI_Reduce(rank == root ? MPI_IN_PLACE : big, rank == root ? big : NULL, 2000, MPI_INT,
                   MPI_SUM, root, comm);
        if (rank == root)
            for (int i = 0; i < 2000; i += 333)
                ok &= big[i] == size * i + size * (size - 1) / 2;
    }
    free(big);
    /* double MAX/MIN, long long PROD, unsigned BAND, MAXLOC at root 0 */
    double d = rank * 1.5, dmax = -1, dmin = -1;
    MPI_Reduce(&d, &dmax, 1, MPI_DOUBLE, MPI_MAX, 0, comm);
    MPI_Reduce(&d, &dmin, 1, MPI_DOUBLE, MPI_MIN, 0, comm);
    long long p = rank % 2 ? 2 : 1, prod = 0;
    MPI_Reduce(&p, &prod, 1, MPI_LONG_LONG, MPI_PROD, 0, comm);
    unsigned u = ~(1u << rank % 32), band = 0; /* % 32: more ranks than bits clear them all */
    MPI_Reduce(&u, &band, 1, MPI_UNSIGNED, MPI_BAND, 0, comm);
    struct {
        double v;
        int r;
    } in = {(double)((rank * 5) % size), rank}, out = {-1, -1};
    MPI_Reduce(&in, &out, 1, MPI_DOUBLE_INT, MPI_MAXLOC, 0, comm);
    if (rank == 0) {
        ok &= dmax == (size - 1) * 1.5 && dmin == 0;
        ok &= prod == 1LL << (size / 2);
        ok &= band == (size >= 32 ? 0u : ~((1u << size) - 1));
        /* the largest value, lowest rank holding it */
        double best = -1;
        int who = -1;
        for (int r = 0; r < size; r++)
            if ((r * 5) % size > best)
                best = (r * 5) % size, who = r;
        ok &= out.v == best && out.r == who;
    }
    /* non-commutative user op: the product must be in rank order */
    MPI_Op op;
    MPI_Op_create(matmul, 0, &op);
    MPI_Datatype mat;
    MPI_Type_contiguous(4, MPI_INT, &mat);
    MPI_Type_commit(&mat);
    int m[4], res[4] = {0}, expect[4] = {1, 0, 0, 1};
    rank_matrix(rank, m);
    MPI_Reduce(m, res, 1, mat, op, size - 1, comm);
    for (int r = size - 1; r >= 0; r--) { /* expect = m0 x m1 x ... x m(size-1) */
        int mr[4];
        rank_matrix(r, mr);
        matmul(mr, expect, &(int){1}, NULL);
    }
    if (rank == size - 1)
        ok &= memcmp(res, expect, sizeof(res)) == 0;
    /* MPI_Reduce_local */
    int a[2] = {1, 2}, b[2] = {10, 20};
    MPI_Reduce_local(a, b, 2, MPI_INT, MPI_SUM);
    ok &= b[0] == 11 && b[1] == 22;
    MPI_Type_free(&mat);
    MPI_Op_free(&op);
    return ok;
}

static int test_allreduce(MPI_Comm comm)
{
    int rank, size, ok = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int isum = -1;
    MPI_Allreduce(&rank, &isum, 1, MPI_INT, MPI_SUM, comm);
    ok &= isum == size * (size - 1) / 2;
    float f = (float)rank, fmin = -1;
    MPI_Allreduce(&f, &fmin, 1, MPI_FLOAT, MPI_MIN, comm);
    ok &= fmin == 0;
    unsigned char c = (unsigned char)(1u << (rank % 8)), cor = 0;
    MPI_Allreduce(&c, &cor, 1, MPI_UNSIGNED_CHAR, MPI_BOR, comm);
    ok &= cor == (size >= 8 ? 0xff : (1u << size) - 1);
    int l = rank != 1, land = -1, lor = -1, bx = -1;
    MPI_Allreduce(&l, &land, 1, MPI_INT, MPI_LAND, comm);
    MPI_Allreduce(&l, &lor, 1, MPI_INT, MPI_LOR, comm);
    MPI_Allreduce(&rank, &bx, 1, MPI_INT, MPI_BXOR, comm);
    int x = 0;
    for (int r = 0; r < size; r++)
        x ^= r;
    ok &= land == (size < 2) && lor == 1 && bx == x;
    struct {
        int v, r;
    } in = {-rank, rank}, out;
    MPI_Allreduce(&in, &out, 1, MPI_2INT, MPI_MINLOC, comm);
    ok &= out.v == -(size - 1) && out.r == size - 1;
    /* in place, 100000 doubles (800 KB: the large-message algorithm) */
    enum { N = 100000 };
    double *v = malloc(N * sizeof(double));
    for (int i = 0; i < N; i++)
        v[i] = rank + i;
    MPI_Allreduce(MPI_IN_PLACE, v, N, MPI_DOUBLE, MPI_SUM, comm);
    for (int i = 0; i < N; i++)
        ok &= v[i] == size * (size - 1) / 2.0 + (double)size * i;
    free(v);
    /* in place with MPI_MAX on long */
    long lm = rank * 3;
    MPI_Allreduce(MPI_IN_PLACE, &lm, 1, MPI_LONG, MPI_MAX, comm);
    ok &= lm == (size - 1) * 3L;
    return ok;
}

/* The communicator of world ranks 0..n-1 (MPI_COMM_NULL on the others) and our rank in it. */
static MPI_Comm first_ranks(int n, int *rank)
{
    MPI_Comm c;
    MPI_Comm_split(MPI_COMM_WORLD, wrank < n ? 0 : MPI_UNDEFINED, wrank, &c);
    if (c != MPI_COMM_NULL)
        MPI_Comm_rank(c, rank);
    return c;
}

/* Allreduce on every communicator size 1..world: of few bytes (the ranks above the largest
   power of two take the fold), around the netmod's small-message limit (1 KiB), and larger
   (on 3-8 ranks the netmod's reduce-scatter and allgather, block sizes that differ by one
   element, and past its 1 MiB segment a last segment of fewer elements than ranks), every rank
   getting the same bits of a floating point sum. */
static int test_allreduce_sizes(void)
{
    int wsize, ok = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    for (int n = 1; n <= wsize; n++) {
        int rank;
        MPI_Comm c = first_ranks(n, &rank);
        if (c == MPI_COMM_NULL)
            continue;
        enum { MAXC = 131075 }; /* 1 MiB of doubles and 3 */
        static const int counts[] = {0, 1, 3, 127, 128, 129, 300, 1000, 4099, MAXC};
        double *in = malloc(MAXC * sizeof(double)), *out = malloc(MAXC * sizeof(double));
        double *first = malloc(MAXC * sizeof(double));
        long long *li = malloc(MAXC * sizeof(long long)), *lo = malloc(MAXC * sizeof(long long));
        for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
            int cnt = counts[k];
            for (int i = 0; i < cnt; i++) {
                in[i] = 1.0 / (rank + 1 + i) + 1e-9 * rank; /* rounding depends on order */
                li[i] = (long long)rank * 1000 + i;
                lo[i] = -1;
                out[i] = -1;
            }
            MPI_Allreduce(in, out, cnt, MPI_DOUBLE, MPI_SUM, c);
            memcpy(first, out, sizeof(double) * (size_t)cnt);
            MPI_Bcast(first, cnt, MPI_DOUBLE, 0, c);
            ok &= memcmp(first, out, sizeof(double) * (size_t)cnt) == 0;
            for (int i = 0; i < cnt; i++) {
                double e = 0;
                for (int r = 0; r < n; r++)
                    e += 1.0 / (r + 1 + i) + 1e-9 * r;
                ok &= out[i] > e - 1e-9 && out[i] < e + 1e-9;
            }
            MPI_Allreduce(li, lo, cnt, MPI_LONG_LONG, MPI_MAX, c);
            for (int i = 0; i < cnt; i++)
                ok &= lo[i] == (long long)(n - 1) * 1000 + i;
            MPI_Allreduce(MPI_IN_PLACE, li, cnt, MPI_LONG_LONG, MPI_SUM, c);
            for (int i = 0; i < cnt; i++)
                ok &= li[i] == (long long)n * (n - 1) / 2 * 1000 + (long long)n * i;
        }
        free(in);
        free(out);
        free(first);
        free(li);
        free(lo);
        MPI_Comm_free(&c);
    }
    return ok;
}

/* Allreduce on 2 ranks, where the netmod takes every size (its own reduction loops, the user's
   send buffer sent as it is, segments of 1 MiB): every builtin type and operation it has a loop
   for, and some it has none for, must give bit for bit what the C expression gives for our
   data and the partner's (mine OP theirs; MAX as mine > theirs ? mine : theirs, MPICH's
   MPL_MAX, with NaNs in the data), in place or not, for counts around the vector blocks, the
   eager limit and the segment size. MPI_Reduce_local must agree (MPICH 4.0.2 compared unsigned
   integers as signed ones: maint/patches/0009). */
static void fill(void *buf, MPI_Datatype dt, int count, int rank, int salt)
{
    for (int i = 0; i < count; i++) {
        long v = (long)((i * 2654435761u + (unsigned)rank * 40503u + (unsigned)salt) % 2001) - 1000;
        if (dt == MPI_DOUBLE)
            ((double *)buf)[i] = i % 97 == 5 ? __builtin_nan("") : v / 7.0 + rank * 1e-9;
        else if (dt == MPI_FLOAT)
            ((float *)buf)[i] = i % 89 == 3 ? __builtin_nanf("") : (float)v / 3.0f;
        else if (dt == MPI_INT || dt == MPI_INT32_T)
            ((int *)buf)[i] = (int)((unsigned)v * 2147483u + (unsigned)rank);
        else if (dt == MPI_UNSIGNED)
            ((unsigned *)buf)[i] = (unsigned)v * 4000037u;
        else if (dt == MPI_LONG || dt == MPI_INT64_T)
            ((long *)buf)[i] = v * 9007199254740993L + rank;
        else if (dt == MPI_UNSIGNED_LONG)
            ((unsigned long *)buf)[i] = (unsigned long)v * 0x9e3779b97f4a7c15ul;
        else if (dt == MPI_SHORT)
            ((short *)buf)[i] = (short)(v * 31);
    }
}

/* out = mine OP theirs in plain C; integer sums and products wrap (unsigned arithmetic) */
/* (clang-format cannot lay out else-chains that span macros) */
/* clang-format off */
#define REF_LOOP(T, EXPR)                                                                        \
    for (int i = 0; i < n; i++) {                                                                \
        T x = ((const T *)mine)[i], y = ((const T *)theirs)[i];                                  \
        ((T *)out)[i] = (T)(EXPR);                                                               \
    }
#define REF_ARITH(T, UT)                                                                         \
    if (op == MPI_SUM)                                                                           \
        REF_LOOP(T, (UT)x + (UT)y)                                                               \
    else if (op == MPI_PROD)                                                                     \
        REF_LOOP(T, (UT)x * (UT)y)                                                               \
    else if (op == MPI_MAX)                                                                      \
        REF_LOOP(T, x > y ? x : y)                                                               \
    else if (op == MPI_MIN)                                                                      \
        REF_LOOP(T, x < y ? x : y)
#define REF_INT(T, UT)                                                                           \
    REF_ARITH(T, UT)                                                                             \
    else if (op == MPI_BAND)                                                                     \
        REF_LOOP(T, x & y)                                                                       \
    else if (op == MPI_BOR)                                                                      \
        REF_LOOP(T, x | y)                                                                       \
    else if (op == MPI_BXOR)                                                                     \
        REF_LOOP(T, x ^ y)                                                                       \
    else if (op == MPI_LAND)                                                                     \
        REF_LOOP(T, x && y)
/* clang-format on */

static void reference(void *out, const void *mine, const void *theirs, int n, MPI_Datatype dt,
                      MPI_Op op)
{
    if (dt == MPI_DOUBLE) {
        REF_ARITH(double, double)
    } else if (dt == MPI_FLOAT) {
        REF_ARITH(float, float)
    } else if (dt == MPI_INT || dt == MPI_INT32_T) {
        REF_INT(int, unsigned)
    } else if (dt == MPI_UNSIGNED) {
        REF_INT(unsigned, unsigned)
    } else if (dt == MPI_LONG || dt == MPI_INT64_T) {
        REF_INT(long, unsigned long)
    } else if (dt == MPI_UNSIGNED_LONG) {
        REF_INT(unsigned long, unsigned long)
    } else if (dt == MPI_SHORT) {
        REF_INT(short, unsigned short)
    }
}

static int test_allreduce_two(void)
{
    int rank, ok = 1;
    MPI_Comm c = first_ranks(2, &rank);
    if (c == MPI_COMM_NULL)
        return 1;
    int n;
    MPI_Comm_size(c, &n);
    if (n < 2) {
        MPI_Comm_free(&c);
        return 1;
    }
    static const MPI_Datatype types[] = {MPI_DOUBLE,   MPI_FLOAT,   MPI_INT,
                                         MPI_UNSIGNED, MPI_LONG,    MPI_UNSIGNED_LONG,
                                         MPI_INT32_T,  MPI_INT64_T, MPI_SHORT};
    static const MPI_Op ops[] = {MPI_SUM,  MPI_PROD, MPI_MAX,  MPI_MIN,
                                 MPI_BAND, MPI_BOR,  MPI_BXOR, MPI_LAND};
    enum { SEG = 1 << 20, BIG = 2 * (SEG / 8) + 3 }; /* doubles: two segments and a bit */
    static const int counts[] = {1, 17, 1000, 40000, BIG};
    size_t cap = (size_t)BIG * 8;
    char *mine = malloc(cap), *theirs = malloc(cap), *want = malloc(cap), *got = malloc(cap);
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        int tsize;
        MPI_Type_size(types[t], &tsize);
        int flt = types[t] == MPI_DOUBLE || types[t] == MPI_FLOAT;
        for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
            int bitwise = o >= 4;
            if (flt && bitwise)
                continue;
            for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
                int cnt = counts[k];
                /* the largest count for a few pairs only: the suite runs on 2 cores */
                if (cnt == BIG && !(o == 0 && (t == 0 || t == 2)) && !(o == 2 && t == 1))
                    continue;
                if ((size_t)cnt * (size_t)tsize > cap)
                    continue;
                size_t len = (size_t)cnt * (size_t)tsize;
                fill(theirs, types[t], cnt, 1 - rank, (int)(t * 8 + o));
                fill(mine, types[t], cnt, rank, (int)(t * 8 + o));
                reference(want, mine, theirs, cnt, types[t], ops[o]);
                if (cnt < 1000) { /* MPICH's own reduction, for the small counts */
                    memcpy(got, mine, len);
                    MPI_Reduce_local(theirs, got, cnt, types[t], ops[o]);
                    if (memcmp(got, want, len) != 0) {
                        if (ok)
                            printf("# rank %d: MPI_Reduce_local of %d elements (type %zu, op %zu) "
                                   "differs from C\n",
                                   wrank, cnt, t, o);
                        ok = 0;
                    }
                }
                memset(got, 0x5a, len);
                int in_place = k % 2;
                if (in_place) {
                    memcpy(got, mine, len);
                    MPI_Allreduce(MPI_IN_PLACE, got, cnt, types[t], ops[o], c);
                } else {
                    MPI_Allreduce(mine, got, cnt, types[t], ops[o], c);
                }
                if (memcmp(got, want, len) != 0) {
                    if (ok)
                        printf("# rank %d: Allreduce of %d elements (type %zu, op %zu%s) differs "
                               "from C\n",
                               wrank, cnt, t, o, in_place ? ", in place" : "");
                    ok = 0;
                }
            }
        }
    }
    free(mine);
    free(theirs);
    free(want);
    free(got);
    MPI_Comm_free(&c);
    return ok;
}

/* Allgather on up to 8 ranks, where the netmod sends every block straight to every rank: eager
   and rendezvous sizes, in place, and layouts that differ between the two sides and between the
   ranks (a strided send or receive type against a contiguous one of the same signature). */
static int allgather_case(MPI_Comm c, int rank, int size, int n, int send_strided, int recv_strided,
                          int in_place)
{
    int ok = 1;
    /* strided: every other int of 2n */
    MPI_Datatype vec;
    MPI_Type_vector(n, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    int *sbuf = malloc(sizeof(int) * 2 * (size_t)n + 1);
    int *rbuf = malloc(sizeof(int) * 2 * (size_t)size * (size_t)n + 1);
    for (int i = 0; i < 2 * n; i++)
        sbuf[i] = send_strided && (i & 1) ? -7 : val(rank, send_strided ? i / 2 : i);
    for (int i = 0; i < 2 * size * n; i++)
        rbuf[i] = -1;
    /* receive block b, element i: at b * n + i, or strided at 2 * (b * n + i): a vector of n
       ints has the extent of 2n - 1 ints, resized to 2n for the receive side */
    int rstride = recv_strided ? 2 : 1;
    MPI_Datatype rvec;
    MPI_Type_create_resized(vec, 0, (MPI_Aint)(2 * (size_t)n * sizeof(int)), &rvec);
    MPI_Type_commit(&rvec);
    if (in_place) {
        for (int i = 0; i < n; i++)
            rbuf[rstride * (rank * n + i)] = val(rank, i);
        MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rbuf, recv_strided ? 1 : n,
                      recv_strided ? rvec : MPI_INT, c);
    } else {
        MPI_Allgather(sbuf, send_strided ? 1 : n, send_strided ? vec : MPI_INT, rbuf,
                      recv_strided ? 1 : n, recv_strided ? rvec : MPI_INT, c);
    }
    MPI_Type_free(&rvec);
    for (int b = 0; b < size; b++)
        for (int i = 0; i < n; i++)
            ok &= rbuf[rstride * (b * n + i)] == val(b, i);
    if (!ok)
        printf("# rank %d: Allgather on %d ranks, %d ints, send %s, receive %s%s: wrong data\n",
               wrank, size, n, send_strided ? "strided" : "contiguous",
               recv_strided ? "strided" : "contiguous", in_place ? ", in place" : "");
    MPI_Type_free(&vec);
    free(sbuf);
    free(rbuf);
    return ok;
}

static int test_allgather_few(void)
{
    int wsize, ok = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    for (int size = 2; size <= wsize && size <= 8; size++) {
        int rank, n;
        MPI_Comm c = first_ranks(size, &rank);
        if (c == MPI_COMM_NULL)
            continue;
        MPI_Comm_size(c, &n);
        static const int counts[] = {1, 7, 3000, 40000};
        for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
            int cnt = counts[k];
            ok &= allgather_case(c, rank, n, cnt, 0, 0, 0);
            ok &= allgather_case(c, rank, n, cnt, 0, 0, 1);
            ok &= allgather_case(c, rank, n, cnt, 1, 0, 0);
            ok &= allgather_case(c, rank, n, cnt, 0, 1, 0);
            ok &= allgather_case(c, rank, n, cnt, 0, 1, 1);
            ok &= allgather_case(c, rank, n, cnt, rank == 0, rank == 1, 0); /* per rank */
        }
        /* nothing to gather */
        int x = 5;
        MPI_Allgather(&x, 0, MPI_INT, &x, 0, MPI_INT, c);
        ok &= x == 5;
        /* rank 0 sends one int less than a block: it may report it, nobody may hang, the
           others' blocks arrive whole and the communicator stays usable */
        int sb[2] = {1, 2}, rb[16];
        MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
        MPI_Allgather(sb, rank == 0 ? 1 : 2, MPI_INT, rb, 2, MPI_INT, c);
        for (int b = 1; b < n; b++)
            ok &= rb[2 * b] == 1 && rb[2 * b + 1] == 2;
        ok &= MPI_Barrier(c) == MPI_SUCCESS;
        MPI_Comm_free(&c);
    }
    return ok;
}

/* Alltoall of large blocks on up to 8 ranks (the netmod's, every send started at once):
   eager and rendezvous sizes, also in place */
static int test_alltoall_large(MPI_Comm comm)
{
    int rank, size, ok = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    static const int counts[] = {3000, 20000};
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        int K = counts[k];
        int *s = malloc((size_t)size * K * sizeof(int)),
            *r = malloc((size_t)size * K * sizeof(int));
        for (int j = 0; j < size; j++)
            for (int i = 0; i < K; i++) {
                s[j * K + i] = a2a(rank, j, i);
                r[j * K + i] = -1;
            }
        MPI_Alltoall(s, K, MPI_INT, r, K, MPI_INT, comm);
        for (int j = 0; j < size; j++)
            for (int i = 0; i < K; i++)
                ok &= r[j * K + i] == a2a(j, rank, i);
        MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, s, K, MPI_INT, comm);
        for (int j = 0; j < size; j++)
            for (int i = 0; i < K; i++)
                ok &= s[j * K + i] == a2a(j, rank, i);
        free(s);
        free(r);
    }
    return ok;
}

/* Barrier and Bcast on every communicator size 1..world, Bcast from every root around the
   netmod's small-message limit (12 KiB; on up to 8 ranks its tree goes on to 64 KiB) and the
   shm rendezvous sizes (32 KiB on an oversubscribed node), and a Bcast whose counts differ between
   the ranks: every non-root must report it (MPI_ERRORS_RETURN), nobody may hang. */
static int bcast_mismatch(MPI_Comm c, int rank, int root_count, int other_count)
{
    int buf[4000] = {0}, err = MPI_Bcast(buf, rank == 0 ? root_count : other_count, MPI_INT, 0, c);
    return rank == 0 || err != MPI_SUCCESS;
}

static int test_small_sizes(void)
{
    int wsize, ok = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    int *buf = malloc(8200 * sizeof(int));
    for (int n = 1; n <= wsize; n++) {
        int rank;
        MPI_Comm c = first_ranks(n, &rank);
        if (c == MPI_COMM_NULL)
            continue;
        /* the last rank enters 5 ms late; nobody may leave before */
        double entered = 0;
        MPI_Barrier(c);
        if (rank == n - 1) {
            struct timespec d = {0, 5 * 1000 * 1000};
            nanosleep(&d, NULL);
            entered = now();
        }
        MPI_Barrier(c);
        double left = now();
        MPI_Bcast(&entered, 1, MPI_DOUBLE, n - 1, c);
        ok &= left >= entered;
        static const int counts[] = {0, 1, 3, 3071, 3072, 3073, 8191, 8192, 8193};
        for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
            for (int root = 0; root < n; root++) {
                for (int i = 0; i < counts[k]; i++)
                    buf[i] = rank == root ? val(root + n, i) : -1;
                buf[counts[k]] = -2; /* nothing past the count is written */
                MPI_Bcast(buf, counts[k], MPI_INT, root, c);
                for (int i = 0; i < counts[k]; i++)
                    ok &= buf[i] == val(root + n, i);
                ok &= buf[counts[k]] == -2;
            }
        }
        /* one signature, two layouts: 12 ints, a vector of 2 x 6 of stride 8 on odd ranks */
        MPI_Datatype vec;
        MPI_Type_vector(2, 6, 8, MPI_INT, &vec);
        MPI_Type_commit(&vec);
        for (int root = 0; root < n; root++) {
            int v[16], odd = rank & 1;
            for (int i = 0; i < 16; i++)
                v[i] = -1;
            for (int i = 0; i < 12 && rank == root; i++)
                v[odd ? i + (i / 6) * 2 : i] = val(root, i);
            MPI_Bcast(v, odd ? 1 : 12, odd ? vec : MPI_INT, root, c);
            for (int i = 0; i < 16; i++) {
                int k = odd ? (i % 8 < 6 ? i - (i / 8) * 2 : -1) : (i < 12 ? i : -1);
                ok &= v[i] == (k < 0 ? -1 : val(root, k));
            }
        }
        MPI_Type_free(&vec);
        /* the same beyond 12 KiB: 6000 ints, 2 x 3000 of stride 3008 on odd ranks (the packed
           copy on the heap, the layouts differing between the ranks) */
        MPI_Type_vector(2, 3000, 3008, MPI_INT, &vec);
        MPI_Type_commit(&vec);
        for (int root = 0; root < n; root++) {
            int odd = rank & 1;
            for (int i = 0; i < 6016; i++)
                buf[i] = -1;
            for (int i = 0; i < 6000 && rank == root; i++)
                buf[odd ? i + (i / 3000) * 8 : i] = val(root, i);
            MPI_Bcast(buf, odd ? 1 : 6000, odd ? vec : MPI_INT, root, c);
            for (int i = 0; i < 6000; i++)
                ok &= buf[odd ? i + (i / 3000) * 8 : i] == val(root, i);
            ok &= buf[odd ? 6008 : 6000] == -1;
        }
        MPI_Type_free(&vec);
        if (n > 1) {
            MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
            ok &= bcast_mismatch(c, rank, 1, 10);      /* the root sends less */
            ok &= bcast_mismatch(c, rank, 10, 1);      /* the root sends more */
            ok &= bcast_mismatch(c, rank, 2000, 3000); /* of several parts, both */
            ok &= bcast_mismatch(c, rank, 3000, 2000);
            MPI_Barrier(c); /* still usable afterwards */
        }
        MPI_Comm_free(&c);
    }
    free(buf);
    return ok;
}

static int test_reduce_scatter_scan(MPI_Comm comm)
{
    int rank, size, ok = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    /* reduce_scatter: rank r gets r + 1 sums; element i of rank r's block is sum over
     * ranks q of (q + base + i), base = the block's offset */
    int n = size * (size + 1) / 2;
    int *s = malloc(n * sizeof(int)), *cnt = malloc(size * sizeof(int));
    int *r = malloc((size > 3 ? size : 3) * sizeof(int));
    for (int i = 0; i < n; i++)
        s[i] = rank + i;
    for (int q = 0; q < size; q++)
        cnt[q] = q + 1;
    MPI_Reduce_scatter(s, r, cnt, MPI_INT, MPI_SUM, comm);
    int base = rank * (rank + 1) / 2, tri = size * (size - 1) / 2;
    for (int i = 0; i < rank + 1; i++)
        ok &= r[i] == tri + size * (base + i);
    /* reduce_scatter_block: 3 each */
    int *sb = malloc(3 * size * sizeof(int));
    for (int i = 0; i < 3 * size; i++)
        sb[i] = rank * i;
    MPI_Reduce_scatter_block(sb, r, 3, MPI_INT, MPI_SUM, comm);
    for (int i = 0; i < 3; i++)
        ok &= r[i] == tri * (3 * rank + i);
    /* scan and exscan */
    int one = rank + 1, sc = -1, ex = -1;
    MPI_Scan(&one, &sc, 1, MPI_INT, MPI_SUM, comm);
    ok &= sc == (rank + 1) * (rank + 2) / 2;
    MPI_Exscan(&one, &ex, 1, MPI_INT, MPI_SUM, comm);
    if (rank > 0) /* undefined on rank 0 */
        ok &= ex == rank * (rank + 1) / 2;
    double dm = rank % 2 ? -rank : rank, dsc;
    MPI_Scan(&dm, &dsc, 1, MPI_DOUBLE, MPI_MAX, comm);
    ok &= dsc == (rank % 2 ? rank - 1 : rank);
    free(s);
    free(r);
    free(cnt);
    free(sb);
    return ok;
}

static int test_nonblocking(MPI_Comm comm)
{
    /* eleven nonblocking collectives in flight at once, completed by one waitall */
    enum { K = 4, NREQ = 11 };
    int rank, size, ok = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Request rq[NREQ];
    MPI_Status st[NREQ];
    int bc[K], mine[K], *gat = malloc(size * K * sizeof(int)), sca[K];
    int *all = malloc(size * K * sizeof(int)), *a2s = malloc(size * K * sizeof(int));
    int *a2r = malloc(size * K * sizeof(int)), *src = malloc(size * K * sizeof(int));
    int red = -1, ared = -1, rsb[K], scn = -1, exs = -1;
    int *rsbs = malloc(size * K * sizeof(int));
    for (int i = 0; i < K; i++) {
        bc[i] = rank == 0 ? val(0, i) : -1;
        mine[i] = val(rank, i);
    }
    for (int i = 0; i < size * K; i++) {
        src[i] = val(i / K, i % K);
        a2s[i] = a2a(rank, i / K, i % K);
        rsbs[i] = i;
    }
    int n = 0;
    MPI_Ibarrier(comm, &rq[n++]);
    MPI_Ibcast(bc, K, MPI_INT, 0, comm, &rq[n++]);
    MPI_Igather(mine, K, MPI_INT, gat, K, MPI_INT, size - 1, comm, &rq[n++]);
    MPI_Iscatter(src, K, MPI_INT, sca, K, MPI_INT, 0, comm, &rq[n++]);
    MPI_Iallgather(mine, K, MPI_INT, all, K, MPI_INT, comm, &rq[n++]);
    MPI_Ialltoall(a2s, K, MPI_INT, a2r, K, MPI_INT, comm, &rq[n++]);
    MPI_Ireduce(&rank, &red, 1, MPI_INT, MPI_SUM, 0, comm, &rq[n++]);
    MPI_Iallreduce(&rank, &ared, 1, MPI_INT, MPI_MAX, comm, &rq[n++]);
    MPI_Ireduce_scatter_block(rsbs, rsb, K, MPI_INT, MPI_SUM, comm, &rq[n++]);
    MPI_Iscan(&rank, &scn, 1, MPI_INT, MPI_SUM, comm, &rq[n++]);
    MPI_Iexscan(&rank, &exs, 1, MPI_INT, MPI_SUM, comm, &rq[n++]);
    MPI_Waitall(n, rq, st);
    for (int i = 0; i < K; i++) {
        ok &= bc[i] == val(0, i) && sca[i] == val(rank, i);
        ok &= rsb[i] == size * (rank * K + i);
    }
    for (int i = 0; i < size * K; i++) {
        if (rank == size - 1)
            ok &= gat[i] == val(i / K, i % K);
        ok &= all[i] == val(i / K, i % K);
        ok &= a2r[i] == a2a(i / K, rank, i % K);
    }
    if (rank == 0)
        ok &= red == size * (size - 1) / 2;
    ok &= ared == size - 1 && scn == rank * (rank + 1) / 2;
    if (rank > 0)
        ok &= exs == rank * (rank - 1) / 2;
    free(gat);
    free(all);
    free(a2s);
    free(a2r);
    free(src);
    free(rsbs);
    return ok;
}

static int test_nonblocking_v(MPI_Comm comm)
{
    /* the v/w variants and reduce_scatter, nonblocking */
    int rank, size, ok = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int *cnt = malloc(size * sizeof(int)), *dsp = malloc(size * sizeof(int));
    int *all = malloc(size * sizeof(int)), *gv = malloc(size * sizeof(int));
    int *s = malloc(size * sizeof(int)), *r = malloc(size * sizeof(int));
    int *rs = malloc(size * sizeof(int)), rsr = -1, sv = -1;
    MPI_Datatype *ty = malloc(size * sizeof(MPI_Datatype));
    int *bdsp = malloc(size * sizeof(int)), *idsp = malloc(size * sizeof(int));
    for (int q = 0; q < size; q++) {
        cnt[q] = 1;
        idsp[q] = q;
        dsp[q] = size - 1 - q; /* reversed placement */
        bdsp[q] = q * (int)sizeof(int);
        ty[q] = MPI_INT;
        s[q] = a2a(rank, q, 0);
        rs[q] = rank + q;
        all[q] = gv[q] = r[q] = -1;
    }
    int me = val(rank, 0);
    MPI_Request rq[6];
    MPI_Status st[6];
    MPI_Igatherv(&me, 1, MPI_INT, gv, cnt, dsp, MPI_INT, 0, comm, &rq[0]);
    int *sc = malloc(size * sizeof(int));
    for (int q = 0; q < size; q++)
        sc[size - 1 - q] = val(q, 1);
    MPI_Iscatterv(sc, cnt, dsp, MPI_INT, &sv, 1, MPI_INT, 0, comm, &rq[1]);
    MPI_Iallgatherv(&me, 1, MPI_INT, all, cnt, dsp, MPI_INT, comm, &rq[2]);
    MPI_Ialltoallv(s, cnt, idsp, MPI_INT, r, cnt, dsp, MPI_INT, comm, &rq[3]);
    int *r2 = malloc(size * sizeof(int));
    MPI_Ialltoallw(s, cnt, bdsp, ty, r2, cnt, bdsp, ty, comm, &rq[4]);
    MPI_Ireduce_scatter(rs, &rsr, cnt, MPI_INT, MPI_SUM, comm, &rq[5]);
    MPI_Waitall(6, rq, st);
    for (int q = 0; q < size; q++) {
        if (rank == 0)
            ok &= gv[size - 1 - q] == val(q, 0);
        ok &= all[size - 1 - q] == val(q, 0);
        ok &= r[size - 1 - q] == a2a(q, rank, 0);
        ok &= r2[q] == a2a(q, rank, 0);
    }
    ok &= sv == val(rank, 1);
    ok &= rsr == size * (size - 1) / 2 + size * rank;
    free(cnt);
    free(dsp);
    free(all);
    free(gv);
    free(s);
    free(r);
    free(r2);
    free(rs);
    free(sc);
    free(ty);
    free(bdsp);
    free(idsp);
    return ok;
}

static int test_persistent(MPI_Comm comm)
{
    /* MPI 4 persistent collectives: started three times with new data */
    int rank, size, ok = 1, in, out, b[3];
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Request rq[2];
    MPI_Status st[2];
    MPI_Allreduce_init(&in, &out, 1, MPI_INT, MPI_SUM, comm, MPI_INFO_NULL, &rq[0]);
    MPI_Bcast_init(b, 3, MPI_INT, size - 1, comm, MPI_INFO_NULL, &rq[1]);
    for (int it = 0; it < 3; it++) {
        in = rank * it;
        for (int i = 0; i < 3; i++)
            b[i] = rank == size - 1 ? it * 10 + i : -1;
        MPI_Startall(2, rq);
        MPI_Waitall(2, rq, st);
        ok &= out == it * size * (size - 1) / 2;
        for (int i = 0; i < 3; i++)
            ok &= b[i] == it * 10 + i;
    }
    MPI_Request_free(&rq[0]);
    MPI_Request_free(&rq[1]);
    return ok;
}

static int test_neighbor(void)
{
    /* 2-d non-periodic cart (edge neighbours are MPI_PROC_NULL: their blocks stay untouched).
     * Neighbour order: dim 0 -, dim 0 +, dim 1 -, dim 1 +. */
    int size, dims[2] = {0, 0}, periods[2] = {0, 0}, ok = 1, rank;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Dims_create(size, 2, dims);
    MPI_Comm cart;
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 1, &cart);
    MPI_Comm_rank(cart, &rank);
    int nb[4];
    MPI_Cart_shift(cart, 0, 1, &nb[0], &nb[1]);
    MPI_Cart_shift(cart, 1, 1, &nb[2], &nb[3]);
    int g[4], a[4], s[4], gv[4], av[4], aw[4], ig[4], ia[4];
    int cnt[4] = {1, 1, 1, 1}, dsp[4] = {3, 2, 1, 0};
    MPI_Datatype ty[4];
    for (int k = 0; k < 4; k++) {
        s[k] = rank * 100 + k; /* block k goes to neighbour k */
        g[k] = a[k] = gv[k] = av[k] = aw[k] = ig[k] = ia[k] = -1;
        ty[k] = MPI_INT;
    }
    MPI_Neighbor_allgather(&rank, 1, MPI_INT, g, 1, MPI_INT, cart);
    MPI_Neighbor_alltoall(s, 1, MPI_INT, a, 1, MPI_INT, cart);
    MPI_Neighbor_allgatherv(&rank, 1, MPI_INT, gv, cnt, dsp, MPI_INT, cart);
    MPI_Neighbor_alltoallv(s, cnt, dsp, MPI_INT, av, cnt, dsp, MPI_INT, cart);
    MPI_Neighbor_alltoallw(s, cnt, (MPI_Aint[]){0, 4, 8, 12}, ty, aw, cnt,
                           (MPI_Aint[]){0, 4, 8, 12}, ty, cart);
    MPI_Request rq[2];
    MPI_Status st[2];
    MPI_Ineighbor_allgather(&rank, 1, MPI_INT, ig, 1, MPI_INT, cart, &rq[0]);
    MPI_Ineighbor_alltoall(s, 1, MPI_INT, ia, 1, MPI_INT, cart, &rq[1]);
    MPI_Waitall(2, rq, st);
    for (int k = 0; k < 4; k++) {
        int q = nb[k], back = k ^ 1; /* q sent to me its block for the opposite direction */
        int eg = q == MPI_PROC_NULL ? -1 : q;
        int ea = q == MPI_PROC_NULL ? -1 : q * 100 + back;
        ok &= g[k] == eg && ig[k] == eg && gv[3 - k] == eg;
        ok &= a[k] == ea && ia[k] == ea && aw[k] == ea;
        /* alltoallv: I send s[3 - k] to neighbour k, receive its block into av[3 - k] */
        ok &= av[3 - k] == (q == MPI_PROC_NULL ? -1 : q * 100 + (3 - back));
    }
    MPI_Comm_free(&cart);
    return ok;
}

static int test_split(void)
{
    /* two communicators by parity, ranks reversed: a sample again */
    int size, ok = 1, sub, ssize;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm half, dup;
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, size - wrank, &half);
    MPI_Comm_rank(half, &sub);
    MPI_Comm_size(half, &ssize);
    ok &= ssize == (size + 1 - wrank % 2) / 2;
    /* the order is reversed: sub-rank 0 is the highest world rank of this parity */
    int w0 = -1;
    if (sub == 0)
        w0 = wrank;
    MPI_Bcast(&w0, 1, MPI_INT, 0, half);
    int top = size - 1 - ((size - 1) % 2 != wrank % 2);
    ok &= w0 == top;
    MPI_Comm_dup(half, &dup);
    ok &= test_bcast(dup) && test_gather_scatter(dup) && test_allgather(dup);
    ok &= test_alltoall(dup) && test_reduce(dup) && test_allreduce(dup);
    ok &= test_reduce_scatter_scan(dup) && test_nonblocking(dup);
    /* the two halves run different collectives concurrently */
    int x = wrank, sum = -1;
    if (wrank % 2)
        MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, half);
    else
        MPI_Reduce(&x, &sum, 1, MPI_INT, MPI_SUM, 0, half);
    int expect = 0;
    for (int r = wrank % 2; r < size; r += 2)
        expect += r;
    if (wrank % 2 || sub == 0)
        ok &= sum == expect;
    MPI_Comm_free(&dup);
    MPI_Comm_free(&half);
    return ok;
}

int main(int argc, char **argv)
{
    /* odd ranks ask for MPI_THREAD_MULTIPLE: the thread level may differ between the ranks of
       a job, and every collective must still take the same algorithm on all of them */
    const char *r = getenv("PMI_RANK");
    int provided;
    MPI_Init_thread(&argc, &argv, r && atoi(r) % 2 ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE,
                    &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    if (wrank == 0)
        printf("1..18\n");
    MPI_Comm w = MPI_COMM_WORLD;
    check(test_barrier(w), "MPI_Barrier / MPI_Ibarrier: nobody leaves before the last enters");
    check(test_bcast(w), "MPI_Bcast from every root, 40 B, 64 KiB and 1 MiB");
    check(test_gather_scatter(w), "MPI_Gather(v) / MPI_Scatter(v)");
    check(test_allgather(w), "MPI_Allgather (also MPI_IN_PLACE) / MPI_Allgatherv");
    check(test_alltoall(w),
          "MPI_Alltoall (also MPI_IN_PLACE, strided) / MPI_Alltoallv / MPI_Alltoallw");
    check(test_reduce(w),
          "MPI_Reduce: SUM to every root (also in place), MAX, MIN, PROD, BAND, MAXLOC, "
          "non-commutative user op; MPI_Reduce_local");
    check(test_allreduce(w), "MPI_Allreduce: int/float/uchar/long/double, SUM MIN BOR LAND LOR "
                             "BXOR MINLOC MAX, MPI_IN_PLACE, 800 KB");
    check(test_allreduce_sizes(), "MPI_Allreduce on every communicator size up to the world's, "
                                  "0 B to 1 MiB, same bits everywhere");
    check(test_allreduce_two(), "MPI_Allreduce on 2 ranks: 9 types x 8 operations, 4 B to 2 MiB, "
                                "in place or not, bit for bit as in C, also MPI_Reduce_local");
    check(test_allgather_few(), "MPI_Allgather on 2-8 ranks: 4 B to 160 KB, in place, strided "
                                "send or receive types against contiguous ones, per rank, a "
                                "short send");
    check(test_alltoall_large(w), "MPI_Alltoall of 12 KB and 80 KB blocks, also in place");
    check(test_small_sizes(), "MPI_Barrier / MPI_Bcast on every communicator size up to the "
                              "world's, 0 to 12 KiB from every root, vector vs. int layouts; "
                              "mismatched counts fail");
    check(test_reduce_scatter_scan(w), "MPI_Reduce_scatter(_block), MPI_Scan, MPI_Exscan");
    check(test_nonblocking(w), "11 nonblocking collectives in flight at once");
    check(test_nonblocking_v(w), "MPI_Igatherv/Iscatterv/Iallgatherv/Ialltoallv/Ialltoallw/"
                                 "Ireduce_scatter");
    check(test_persistent(w), "persistent MPI_Allreduce_init / MPI_Bcast_init, 3 starts");
    check(test_neighbor(), "neighborhood collectives (and nonblocking) on a 2-d cart");
    check(test_split(), "split communicator (by parity, reversed) + dup: the sample again, "
                        "different collectives in the two halves");
    MPI_Finalize();
    return 0;
}
