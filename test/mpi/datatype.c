/*
 * Derived datatypes around the ring (to rank + 1, from rank - 1; any number of ranks): vector,
 * hvector, indexed, indexed_block, hindexed, struct with gaps (resized), subarray, nested types,
 * and a type on one side against contiguous data (bytes, ints, doubles, MPI_PACKED) on the
 * other. Every type runs at message sizes from one element to more than 1 MiB (rendezvous).
 * Checks: every byte the type map covers arrives, every other byte of the receive buffer stays
 * untouched, and the received count. TAP from rank 0.
 */
#include <mpi.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap_mpi.h"

enum { GUARD = 64, SENT = 0xee, MAXC = 8 };

static int rank, size, to, from;

static unsigned char pat(int r, size_t p)
{
    return (unsigned char)(r * 37 + p * 11 + (p >> 10));
}

/* bytes from the buffer address to the end of c elements (our types have lb >= 0) */
static size_t span(MPI_Datatype t, int c)
{
    MPI_Aint lb, ext, tlb, text;
    MPI_Type_get_extent(t, &lb, &ext);
    MPI_Type_get_true_extent(t, &tlb, &text);
    return (size_t)(tlb + (MPI_Aint)(c - 1) * ext + text);
}

/* counts giving about 0 B (one element), 100 B, 70 KB (over the 64 KiB shm rendezvous
 * threshold) and 1.3 MB of payload */
static int counts(MPI_Datatype t, int *c)
{
    static const int target[] = {0, 100, 70000, 1300000};
    int ts, n = 0;
    MPI_Type_size(t, &ts);
    for (int i = 0; i < 4; i++) {
        int k = target[i] / ts > 1 ? target[i] / ts : 1;
        if (n == 0 || k > c[n - 1])
            c[n++] = k;
    }
    return n;
}

/* which bytes (t, c) covers: unpack 0xff bytes into zeros (the local datatype engine is the
 * reference; what is tested is that the transfer moves the same bytes) */
static unsigned char *type_mask(MPI_Datatype t, int c, size_t n, int *ok)
{
    int ts, pos = 0;
    MPI_Type_size(t, &ts);
    size_t payload = (size_t)ts * c, covered = 0;
    unsigned char *mask = calloc(n, 1), *ones = malloc(payload);
    memset(ones, 0xff, payload);
    MPI_Unpack(ones, (int)payload, &pos, mask, c, t, MPI_COMM_SELF);
    for (size_t p = 0; p < n; p++)
        covered += mask[p] != 0;
    *ok &= covered == payload; /* no type here overlaps itself */
    free(ones);
    return mask;
}

static int check_typed(const unsigned char *r, const unsigned char *mask, size_t n)
{
    int ok = 1;
    for (size_t p = 0; p < n; p++)
        ok &= r[p] == (mask[p] ? pat(from, p) : SENT);
    return ok;
}

/* both sides (t, c), nonblocking, at every size */
static int same_type(MPI_Datatype t)
{
    int c[4], nc = counts(t, c), ok = 1;
    for (int k = 0; k < nc; k++) {
        size_t n = span(t, c[k]) + GUARD;
        unsigned char *s = malloc(n), *r = malloc(n), *mask = type_mask(t, c[k], n, &ok);
        for (size_t p = 0; p < n; p++) {
            s[p] = pat(rank, p);
            r[p] = SENT;
        }
        MPI_Request rq[2];
        MPI_Status st[2];
        int got = -1;
        MPI_Irecv(r, c[k], t, from, 1, MPI_COMM_WORLD, &rq[0]);
        MPI_Isend(s, c[k], t, to, 1, MPI_COMM_WORLD, &rq[1]);
        MPI_Waitall(2, rq, st);
        MPI_Get_count(&st[0], t, &got);
        ok &= got == c[k] && check_typed(r, mask, n);
        free(s);
        free(r);
        free(mask);
    }
    return ok;
}

/* the type one way, MPI_PACKED the other: the wire format equals MPI_Pack's */
static int packed(MPI_Datatype t)
{
    int c[4], nc = counts(t, c), ok = 1;
    for (int k = 0; k < nc; k++) {
        size_t n = span(t, c[k]) + GUARD;
        int psize, pos = 0, got = -1;
        MPI_Pack_size(c[k], t, MPI_COMM_WORLD, &psize);
        unsigned char *s = malloc(n), *r = malloc(n), *mask = type_mask(t, c[k], n, &ok);
        unsigned char *pk = malloc(psize), *pr = malloc(psize);
        for (size_t p = 0; p < n; p++) {
            s[p] = pat(rank, p);
            r[p] = SENT;
        }
        MPI_Status st;
        /* typed -> packed, unpacked here */
        MPI_Sendrecv(s, c[k], t, to, 2, pr, psize, MPI_PACKED, from, 2, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_PACKED, &got);
        MPI_Unpack(pr, got, &pos, r, c[k], t, MPI_COMM_WORLD);
        ok &= check_typed(r, mask, n);
        /* packed here -> typed */
        pos = 0;
        MPI_Pack(s, c[k], t, pk, psize, &pos, MPI_COMM_WORLD);
        memset(r, SENT, n);
        MPI_Sendrecv(pk, pos, MPI_PACKED, to, 3, r, c[k], t, from, 3, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, t, &got);
        ok &= got == c[k] && check_typed(r, mask, n);
        free(s);
        free(r);
        free(mask);
        free(pk);
        free(pr);
    }
    return ok;
}

/* element index of the k-th basic element of c copies of vector(V, B, S) */
static size_t vec_index(size_t k, int V, int B, int S)
{
    size_t per = (size_t)V * B, ext = (size_t)(V - 1) * S + B, w = k % per;
    return k / per * ext + w / B * S + w % B;
}

/* vector of MPI_BYTE one side, contiguous MPI_BYTE the other, independent index formula */
static int bytes_vs_vector(void)
{
    enum { V = 5, B = 3, S = 7 };
    int ok = 1, c[4];
    MPI_Datatype t;
    MPI_Type_vector(V, B, S, MPI_BYTE, &t);
    MPI_Type_commit(&t);
    int nc = counts(t, c);
    for (int k = 0; k < nc; k++) {
        size_t m = (size_t)c[k] * V * B, n = span(t, c[k]) + GUARD;
        unsigned char *s = malloc(n), *r = malloc(n), *e = malloc(n);
        for (size_t p = 0; p < n; p++)
            s[p] = pat(rank, p);
        memset(r, SENT, n);
        MPI_Status st;
        int got = -1;
        /* typed -> bytes: byte i is the i-th covered byte */
        MPI_Sendrecv(s, c[k], t, to, 4, r, (int)m, MPI_BYTE, from, 4, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_BYTE, &got);
        ok &= got == (int)m;
        for (size_t i = 0; i < m; i++)
            ok &= r[i] == pat(from, vec_index(i, V, B, S));
        ok &= r[m] == SENT;
        /* bytes -> typed: the i-th byte lands at its index, the gaps stay untouched */
        memset(r, SENT, n);
        memset(e, SENT, n);
        for (size_t i = 0; i < m; i++)
            e[vec_index(i, V, B, S)] = pat(from, i);
        MPI_Sendrecv(s, (int)m, MPI_BYTE, to, 5, r, c[k], t, from, 5, MPI_COMM_WORLD, &st);
        ok &= memcmp(r, e, n) == 0;
        free(s);
        free(r);
        free(e);
    }
    MPI_Type_free(&t);
    return ok;
}

/* vector of ints against contiguous ints, 3-d subarray of doubles against contiguous doubles */
static int ints_doubles_vs_types(void)
{
    enum { V = 4, B = 3, S = 5 };
    enum { X = 10, Y = 8, Z = 6, SX = 8, SY = 6, SZ = 5, OX = 1, OY = 2, OZ = 1 };
    int ok = 1, c[4], nc;
    MPI_Datatype vec, sub;
    MPI_Type_vector(V, B, S, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    nc = counts(vec, c);
    for (int k = 0; k < nc; k++) {
        size_t m = (size_t)c[k] * V * B, n = span(vec, c[k]) / sizeof(int);
        int *s = malloc(n * sizeof(int)), *r = malloc((n + 1) * sizeof(int));
        for (size_t i = 0; i < n; i++)
            s[i] = rank * 10000000 + (int)i;
        for (size_t i = 0; i <= n; i++)
            r[i] = -1;
        MPI_Sendrecv(s, c[k], vec, to, 6, r, (int)m, MPI_INT, from, 6, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        for (size_t i = 0; i < m; i++)
            ok &= r[i] == from * 10000000 + (int)vec_index(i, V, B, S);
        ok &= r[m] == -1;
        for (size_t i = 0; i <= n; i++)
            r[i] = -1;
        MPI_Sendrecv(s, (int)m, MPI_INT, to, 7, r, c[k], vec, from, 7, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        for (size_t i = 0, j = 0; i <= n; i++) {
            int covered = j < m && vec_index(j, V, B, S) == i;
            ok &= r[i] == (covered ? from * 10000000 + (int)j++ : -1);
        }
        free(s);
        free(r);
    }
    MPI_Type_free(&vec);

    const int sizes[3] = {X, Y, Z}, subs[3] = {SX, SY, SZ}, starts[3] = {OX, OY, OZ};
    MPI_Type_create_subarray(3, sizes, subs, starts, MPI_ORDER_C, MPI_DOUBLE, &sub);
    MPI_Type_commit(&sub);
    nc = counts(sub, c);
    for (int k = 0; k < nc; k++) {
        size_t m = (size_t)c[k] * SX * SY * SZ, n = (size_t)c[k] * X * Y * Z;
        double *s = malloc(n * sizeof(double)), *r = malloc(m * sizeof(double));
        for (size_t i = 0; i < n; i++)
            s[i] = rank * 1e7 + i;
        MPI_Sendrecv(s, c[k], sub, to, 8, r, (int)m, MPI_DOUBLE, from, 8, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        for (size_t i = 0; i < m; i++) {
            size_t copy = i / (SX * SY * SZ), w = i % (SX * SY * SZ);
            size_t x = OX + w / (SY * SZ), y = OY + w / SZ % SY, z = OZ + w % SZ;
            ok &= r[i] == from * 1e7 + (copy * X * Y * Z + (x * Y + y) * Z + z);
        }
        free(s);
        free(r);
    }
    MPI_Type_free(&sub);
    return ok;
}

struct rec { /* gaps after c and after sh */
    char c;
    double d;
    int i[3];
    short sh;
};

static MPI_Datatype rec_type(void)
{
    MPI_Datatype t, r;
    int bl[4] = {1, 1, 3, 1};
    MPI_Aint disp[4] = {offsetof(struct rec, c), offsetof(struct rec, d), offsetof(struct rec, i),
                        offsetof(struct rec, sh)};
    MPI_Datatype ty[4] = {MPI_CHAR, MPI_DOUBLE, MPI_INT, MPI_SHORT};
    MPI_Type_create_struct(4, bl, disp, ty, &t);
    MPI_Type_create_resized(t, 0, sizeof(struct rec), &r); /* arrays of struct rec */
    MPI_Type_free(&t);
    MPI_Type_commit(&r);
    return r;
}

/* the struct by field values, without the datatype engine as reference */
static int struct_fields(MPI_Datatype t)
{
    enum { N = 50000 }; /* 1.15 MB of payload */
    int ok = 1;
    struct rec *s = malloc(N * sizeof(*s)), *r = malloc(N * sizeof(*r));
    memset(s, 0, N * sizeof(*s));
    memset(r, SENT, N * sizeof(*r));
    for (int k = 0; k < N; k++) {
        s[k].c = (char)(rank + k);
        s[k].d = rank * 1e6 + k;
        for (int j = 0; j < 3; j++)
            s[k].i[j] = rank * 1000000 + k * 3 + j;
        s[k].sh = (short)(k - rank);
    }
    MPI_Sendrecv(s, N, t, to, 9, r, N, t, from, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    const unsigned char *b = (const unsigned char *)r;
    size_t c_end = offsetof(struct rec, c) + 1, sh_end = offsetof(struct rec, sh) + sizeof(short);
    for (int k = 0; k < N; k++) {
        ok &= r[k].c == (char)(from + k) && r[k].d == from * 1e6 + k;
        ok &= r[k].sh == (short)(k - from);
        for (int j = 0; j < 3; j++)
            ok &= r[k].i[j] == from * 1000000 + k * 3 + j;
        for (size_t p = c_end; p < offsetof(struct rec, d); p++) /* the gaps */
            ok &= b[k * sizeof(struct rec) + p] == SENT;
        for (size_t p = sh_end; p < sizeof(struct rec); p++)
            ok &= b[k * sizeof(struct rec) + p] == SENT;
    }
    free(s);
    free(r);
    return ok;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    to = (rank + 1) % size;
    from = (rank + size - 1) % size;
    if (rank == 0)
        printf("1..10\n");

    MPI_Datatype vec, hvec, idx, blk, hidx, rec, sub, nest, vrec, inner; /* use all[] after */
    MPI_Type_vector(4, 3, 5, MPI_INT, &vec);
    MPI_Type_create_hvector(3, 2, 40, MPI_DOUBLE, &hvec);
    MPI_Type_indexed(3, (int[]){1, 3, 2}, (int[]){0, 4, 11}, MPI_INT, &idx);
    MPI_Type_create_indexed_block(3, 2, (int[]){1, 5, 9}, MPI_INT, &blk);
    MPI_Type_create_hindexed(2, (int[]){2, 1}, (MPI_Aint[]){8, 48}, MPI_DOUBLE, &hidx);
    rec = rec_type();
    MPI_Type_create_subarray(3, (int[]){10, 8, 6}, (int[]){8, 6, 5}, (int[]){1, 2, 1}, MPI_ORDER_C,
                             MPI_DOUBLE, &sub);
    MPI_Type_vector(4, 1, 3, MPI_INT, &inner);
    MPI_Type_contiguous(3, inner, &nest);
    MPI_Type_vector(3, 1, 2, rec, &vrec); /* every other struct */
    MPI_Datatype all[] = {vec, hvec, idx, blk, hidx, sub, nest, vrec};
    for (unsigned i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        MPI_Type_commit(&all[i]);

    check(same_type(all[0]), "vector of int, 12 B .. 1.3 MB, both sides");
    check(same_type(all[1]), "hvector of double (byte stride), both sides");
    check(same_type(all[2]) && same_type(all[3]) && same_type(all[4]),
          "indexed, indexed_block, hindexed (leading gap), both sides");
    check(same_type(rec) && struct_fields(rec),
          "struct {char; double; int[3]; short} with gaps, resized: bytes and field values, "
          "gaps untouched");
    check(same_type(all[5]), "subarray 8x6x5 of 10x8x6 doubles, 1 .. 677 copies (1.3 MB)");
    check(same_type(all[6]) && same_type(all[7]),
          "nested: contiguous of vector, vector of resized struct");
    check(bytes_vs_vector(), "vector of MPI_BYTE against contiguous MPI_BYTE, both directions");
    check(ints_doubles_vs_types(),
          "vector of int against contiguous int (both directions), subarray against contiguous "
          "double");
    check(packed(rec) && packed(all[6]),
          "struct and nested type against MPI_PACKED, both directions");

    /* receive into a type larger than the message: only the first elements are written */
    int ok = 1, got = -1, elems = -1;
    size_t n = span(all[0], 5) + GUARD;
    unsigned char *s = malloc(n), *r = malloc(n), *mask = type_mask(all[0], 2, n, &ok);
    for (size_t p = 0; p < n; p++) {
        s[p] = pat(rank, p);
        r[p] = SENT;
    }
    MPI_Status st;
    MPI_Sendrecv(s, 2, all[0], to, 10, r, 5, all[0], from, 10, MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, all[0], &got);
    MPI_Get_elements(&st, all[0], &elems); /* basic elements: 2 x 12 ints */
    ok &= got == 2 && elems == 24 && check_typed(r, mask, n);
    free(s);
    free(r);
    free(mask);
    check(ok, "shorter message than the receive type: count, elements, nothing else written");

    for (unsigned i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        MPI_Type_free(&all[i]);
    MPI_Type_free(&rec);
    MPI_Type_free(&inner);
    MPI_Finalize();
    return 0;
}
