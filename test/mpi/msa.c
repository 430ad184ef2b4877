/*
 * MSA extensions (see msa.t for the launch lines): mpi-ext.h, MPI_INFO_ENV keys,
 * MPI_Comm_split_type with MPIX_COMM_TYPE_MODULE and MPI_COMM_TYPE_SHARED under
 * PSP_SMP_NODE_ID / PSP_MSA_NODE_ID, and Barrier, Bcast, Reduce, Allreduce, Scan against
 * results computed here from every rank's input (what the flat algorithms must give) for
 * several datatypes, ops (one user op that is not commutative), roots and counts (0 too).
 * Every rank learns what to expect from its own environment: PSP_MSA_AWARENESS,
 * PSP_MSA_MODULE_ID, PSP_MSA_NODE_ID, PSP_SMP_NODE_ID (one host: no node id = one node).
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tap_mpi.h"

static int rank, size;
static int my_module, my_node, node_set;

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static void expected_ids(void)
{
    const char *aw = env("PSP_MSA_AWARENESS");
    int aware = aw && (!strcmp(aw, "1") || !strcmp(aw, "yes") || !strcmp(aw, "on"));
    const char *m = aware ? env("PSP_MSA_MODULE_ID") : NULL;
    const char *n =
        aware && env("PSP_MSA_NODE_ID") ? env("PSP_MSA_NODE_ID") : env("PSP_SMP_NODE_ID");
    my_module = m ? atoi(m) : 0;
    node_set = n != NULL;
    my_node = n ? atoi(n) : 0;
    if (my_node == -1)
        my_node = 1000000 + rank; /* a node of its own */
}

/* ---- split types ---- */

/* newcomm must hold exactly the ranks of comm whose color equals ours, ordered by key then
 * by rank in comm; colors/keys are per rank of comm. Checks are ANDed over MPI_COMM_WORLD
 * (every rank calls them in the same order), so world rank 0 prints the TAP line. */
static int split_ok(MPI_Comm comm, MPI_Comm newcomm, const int *colors, const int *keys)
{
    int n, me, nn, ok = 1;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    if (newcomm == MPI_COMM_NULL)
        return 0;
    int *expect = malloc(n * sizeof(int)), ne = 0;
    for (int k = -n; k <= n; k++) /* keys are within [-n, n] */
        for (int r = 0; r < n; r++)
            if (colors[r] == colors[me] && keys[r] == k)
                expect[ne++] = r;
    MPI_Comm_size(newcomm, &nn);
    if (nn != ne) {
        ok = 0;
    } else {
        MPI_Group g, gn;
        int *in = malloc(nn * sizeof(int)), *out = malloc(nn * sizeof(int));
        MPI_Comm_group(comm, &g);
        MPI_Comm_group(newcomm, &gn);
        for (int i = 0; i < nn; i++)
            in[i] = i;
        MPI_Group_translate_ranks(gn, nn, in, g, out);
        for (int i = 0; i < nn; i++)
            ok &= out[i] == expect[i];
        MPI_Group_free(&g);
        MPI_Group_free(&gn);
        free(in);
        free(out);
    }
    free(expect);
    return ok;
}

static void test_split(MPI_Comm comm, const char *what)
{
    int n, me;
    char msg[200];
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    int *mods = malloc(n * sizeof(int)), *nodes = malloc(n * sizeof(int));
    int *keys = malloc(n * sizeof(int)), *rkeys = malloc(n * sizeof(int));
    MPI_Allgather(&my_module, 1, MPI_INT, mods, 1, MPI_INT, comm);
    MPI_Allgather(&my_node, 1, MPI_INT, nodes, 1, MPI_INT, comm);
    for (int r = 0; r < n; r++) {
        keys[r] = 0;
        rkeys[r] = n - r;
    }

    MPI_Comm nc;
    MPI_Comm_split_type(comm, MPIX_COMM_TYPE_MODULE, 0, MPI_INFO_NULL, &nc);
    snprintf(msg, sizeof(msg), "%s: MPIX_COMM_TYPE_MODULE groups the ranks of each module", what);
    check(split_ok(comm, nc, mods, keys), msg);
    if (nc != MPI_COMM_NULL)
        MPI_Comm_free(&nc);

    MPI_Comm_split_type(comm, MPIX_COMM_TYPE_MODULE, n - me, MPI_INFO_NULL, &nc);
    snprintf(msg, sizeof(msg), "%s: MPIX_COMM_TYPE_MODULE orders by key (reversed)", what);
    check(split_ok(comm, nc, mods, rkeys), msg);
    if (nc != MPI_COMM_NULL)
        MPI_Comm_free(&nc);

    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &nc);
    snprintf(msg, sizeof(msg), "%s: MPI_COMM_TYPE_SHARED groups by node (%s)", what,
             node_set ? "PSP_SMP_NODE_ID/PSP_MSA_NODE_ID" : "one host");
    check(split_ok(comm, nc, nodes, keys), msg);
    if (nc != MPI_COMM_NULL)
        MPI_Comm_free(&nc);

    MPI_Comm_split_type(comm, me % 2 ? MPI_UNDEFINED : MPIX_COMM_TYPE_MODULE, 0, MPI_INFO_NULL,
                        &nc);
    int ok = me % 2 ? nc == MPI_COMM_NULL : nc != MPI_COMM_NULL;
    snprintf(msg, sizeof(msg), "%s: MPI_UNDEFINED gives MPI_COMM_NULL next to the module split",
             what);
    check(ok, msg);
    if (nc != MPI_COMM_NULL)
        MPI_Comm_free(&nc);
    free(mods);
    free(nodes);
    free(keys);
    free(rkeys);
}

static void test_info_env(void)
{
    char val[MPI_MAX_INFO_VAL + 1], want[32];
    int flag, ok;

    snprintf(want, sizeof(want), "%d", my_module);
    MPI_Info_get(MPI_INFO_ENV, "msa_module_id", MPI_MAX_INFO_VAL, val, &flag);
    ok = flag && !strcmp(val, want);
    if (!ok)
        printf("# rank %d: msa_module_id %s, expected %s\n", rank, flag ? val : "(unset)", want);
    check(ok, "MPI_INFO_ENV msa_module_id is the module");

    MPI_Info_get(MPI_INFO_ENV, "msa_node_id", MPI_MAX_INFO_VAL, val, &flag);
    if (node_set) {
        const char *aw = env("PSP_MSA_AWARENESS");
        const char *n = aw && !strcmp(aw, "1") && env("PSP_MSA_NODE_ID") ? env("PSP_MSA_NODE_ID")
                                                                         : env("PSP_SMP_NODE_ID");
        ok = flag && !strcmp(val, n);
    } else {
        ok = !flag;
    }
    check(ok, node_set ? "MPI_INFO_ENV msa_node_id is the node id given"
                       : "MPI_INFO_ENV has no msa_node_id without a node id");

    MPI_Info_get(MPI_INFO_ENV, "cuda_aware", MPI_MAX_INFO_VAL, val, &flag);
    check(flag && !strcmp(val, "false"), "MPI_INFO_ENV cuda_aware is \"false\"");

    check(MPIX_MSA_AWARENESS == 1 && MPIX_CUDA_AWARE_SUPPORT == 1 && MPIX_Query_cuda_support() == 0,
          "mpi-ext.h: MPIX_MSA_AWARENESS 1, MPIX_CUDA_AWARE_SUPPORT 1, MPIX_Query_cuda_support() 0 "
          "(no PSP_CUDA)");
}

/* ---- collectives ---- */

/* not commutative: affine maps x -> a*x + b mod P, "first apply in, then inout" */
#define P 1000003
typedef struct {
    int64_t a, b;
} affine_t;

static void affine_op(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    affine_t *x = in, *y = inout;
    for (int i = 0; i < *len; i++) {
        affine_t r = {x[i].a * y[i].a % P, (y[i].a * x[i].b + y[i].b) % P};
        y[i] = r;
    }
}

static MPI_Datatype affine_type;
static MPI_Op affine;

enum { T_INT_SUM, T_DOUBLE_MAX, T_AFFINE, T_NTYPES };
static const char *tname[T_NTYPES] = {"int SUM", "double MAX", "affine user op (not commutative)"};

static size_t esize(int t)
{
    return t == T_INT_SUM ? sizeof(int) : t == T_DOUBLE_MAX ? sizeof(double) : sizeof(affine_t);
}

static MPI_Datatype mtype(int t)
{
    return t == T_INT_SUM ? MPI_INT : t == T_DOUBLE_MAX ? MPI_DOUBLE : affine_type;
}

static MPI_Op mop(int t)
{
    return t == T_INT_SUM ? MPI_SUM : t == T_DOUBLE_MAX ? MPI_MAX : affine;
}

/* input element i of rank r */
static void fill(int t, void *buf, int count, int r, int salt)
{
    for (int i = 0; i < count; i++) {
        unsigned v = (unsigned)(r * 7919 + i * 31 + salt * 131) % 1000;
        if (t == T_INT_SUM)
            ((int *)buf)[i] = (int)v - 500;
        else if (t == T_DOUBLE_MAX)
            ((double *)buf)[i] = v * 0.5 - 100;
        else
            ((affine_t *)buf)[i] = (affine_t){v % 97 + 1, (v * 13 + r) % P};
    }
}

/* acc = acc op elem (acc covers lower ranks) */
static void combine(int t, void *acc, const void *elem, int count)
{
    for (int i = 0; i < count; i++) {
        if (t == T_INT_SUM) {
            ((int *)acc)[i] += ((const int *)elem)[i];
        } else if (t == T_DOUBLE_MAX) {
            double e = ((const double *)elem)[i];
            if (e > ((double *)acc)[i])
                ((double *)acc)[i] = e;
        } else {
            affine_t x = ((affine_t *)acc)[i], y = ((const affine_t *)elem)[i];
            ((affine_t *)acc)[i] = (affine_t){x.a * y.a % P, (y.a * x.b + y.b) % P};
        }
    }
}

/* op over ranks 0..upto of comm, computed from every rank's input */
static void reference(int t, void *out, int count, const int *wranks, int upto, int salt)
{
    void *e = malloc(esize(t) * (count ? count : 1));
    fill(t, out, count, wranks[0], salt);
    for (int r = 1; r <= upto; r++) {
        fill(t, e, count, wranks[r], salt);
        combine(t, out, e, count);
    }
    free(e);
}

static int counts[] = {0, 1, 13, 40000};
#define NCOUNTS (int)(sizeof(counts) / sizeof(counts[0]))

static void test_colls(MPI_Comm comm, const char *what)
{
    int n, me;
    char msg[240];
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    int *wranks = malloc(n * sizeof(int));
    MPI_Allgather(&rank, 1, MPI_INT, wranks, 1, MPI_INT, comm);
    int maxc = counts[NCOUNTS - 1];
    size_t maxb = sizeof(affine_t) * maxc;
    char *in = malloc(maxb), *out = malloc(maxb + 64), *ref = malloc(maxb);
    int roots[] = {0, n - 1, n / 2, 1 % n};
    int ok;

    ok = 1;
    for (int i = 0; i < 5; i++)
        ok &= MPI_Barrier(comm) == MPI_SUCCESS;
    snprintf(msg, sizeof(msg), "%s: 5 barriers", what);
    check(ok, msg);

    /* Bcast: every root, every type, every count */
    ok = 1;
    for (int root = 0; root < n; root++)
        for (int t = 0; t < T_NTYPES; t++)
            for (int c = 0; c < NCOUNTS; c++) {
                int count = counts[c];
                fill(t, ref, count, wranks[root], root + c);
                if (me == root)
                    memcpy(out, ref, esize(t) * count);
                else
                    memset(out, 0x5a, esize(t) * (count + 1));
                MPI_Bcast(out, count, mtype(t), root, comm);
                ok &= memcmp(out, ref, esize(t) * count) == 0;
                if (me != root) /* nothing past the end */
                    ok &= (unsigned char)out[esize(t) * count] == 0x5a;
            }
    snprintf(msg, sizeof(msg), "%s: bcast from every root, int/double/affine, counts 0 1 13 40000",
             what);
    check(ok, msg);

    /* Reduce: roots, ops, counts, in place at the root */
    for (int t = 0; t < T_NTYPES; t++) {
        ok = 1;
        for (int ri = 0; ri < 4; ri++)
            for (int c = 0; c < NCOUNTS; c++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    int root = roots[ri], count = counts[c], salt = ri * 10 + c;
                    /* MPICH 4.0.2's flat reduce (reduce_scatter_gather: builtin op, large
                     * count) crashes in place at a root other than 0 (Debian's mpich too) */
                    if (inplace && root != 0 && count > 1000 && t != T_AFFINE)
                        continue;
                    fill(t, in, count, rank, salt);
                    memset(out, 0x5a, esize(t) * count);
                    if (inplace && me == root) {
                        memcpy(out, in, esize(t) * count);
                        MPI_Reduce(MPI_IN_PLACE, out, count, mtype(t), mop(t), root, comm);
                    } else {
                        MPI_Reduce(in, out, count, mtype(t), mop(t), root, comm);
                    }
                    if (me == root) {
                        reference(t, ref, count, wranks, n - 1, salt);
                        ok &= memcmp(out, ref, esize(t) * count) == 0;
                    }
                }
        snprintf(msg, sizeof(msg),
                 "%s: reduce %s to roots 0 n-1 n/2 1, counts 0 1 13 40000, "
                 "in place",
                 what, tname[t]);
        check(ok, msg);
    }

    /* Allreduce */
    for (int t = 0; t < T_NTYPES; t++) {
        ok = 1;
        for (int c = 0; c < NCOUNTS; c++)
            for (int inplace = 0; inplace < 2; inplace++) {
                int count = counts[c], salt = 50 + c;
                fill(t, in, count, rank, salt);
                if (inplace) {
                    memcpy(out, in, esize(t) * count);
                    MPI_Allreduce(MPI_IN_PLACE, out, count, mtype(t), mop(t), comm);
                } else {
                    MPI_Allreduce(in, out, count, mtype(t), mop(t), comm);
                }
                reference(t, ref, count, wranks, n - 1, salt);
                ok &= memcmp(out, ref, esize(t) * count) == 0;
            }
        snprintf(msg, sizeof(msg), "%s: allreduce %s, counts 0 1 13 40000, in place", what,
                 tname[t]);
        check(ok, msg);
    }

    /* Scan */
    for (int t = 0; t < T_NTYPES; t++) {
        ok = 1;
        for (int c = 0; c < NCOUNTS; c++)
            for (int inplace = 0; inplace < 2; inplace++) {
                int count = counts[c], salt = 70 + c;
                fill(t, in, count, rank, salt);
                if (inplace) {
                    memcpy(out, in, esize(t) * count);
                    MPI_Scan(MPI_IN_PLACE, out, count, mtype(t), mop(t), comm);
                } else {
                    MPI_Scan(in, out, count, mtype(t), mop(t), comm);
                }
                reference(t, ref, count, wranks, me, salt);
                ok &= memcmp(out, ref, esize(t) * count) == 0;
            }
        snprintf(msg, sizeof(msg), "%s: scan %s, counts 0 1 13 40000, in place", what, tname[t]);
        check(ok, msg);
    }
    free(in);
    free(out);
    free(ref);
    free(wranks);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    expected_ids();
    int colls = argc > 1 && !strcmp(argv[1], "coll");

    MPI_Type_contiguous(2, MPI_INT64_T, &affine_type);
    MPI_Type_commit(&affine_type);
    MPI_Op_create(affine_op, 0, &affine);

    if (rank == 0)
        printf("1..%d\n", colls ? 4 + 4 + 4 + 11 + 11 : 4 + 4 + 4 + 4);
    printf("# rank %d: module %d node %d%s\n", rank, my_module, my_node, node_set ? "" : " (host)");
    fflush(stdout);

    test_info_env();
    test_split(MPI_COMM_WORLD, "world");
    MPI_Comm half; /* ranks interleaved: even and odd world ranks */
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    test_split(half, "even/odd split");
    if (!colls) {
        MPI_Comm dup;
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        test_split(dup, "dup");
        MPI_Comm_free(&dup);
    } else {
        test_colls(MPI_COMM_WORLD, "world");
        MPI_Comm rev; /* the same processes in reverse rank order: modules still blocks */
        MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &rev);
        test_colls(rev, "reversed world");
        MPI_Comm_free(&rev);
    }
    MPI_Comm_free(&half);
    MPI_Op_free(&affine);
    MPI_Type_free(&affine_type);
    MPI_Finalize();
    return 0;
}
