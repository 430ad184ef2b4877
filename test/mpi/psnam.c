/*
 * PSNAM windows (psnam.t, test/cluster/psnam.t). One mode per job:
 *   psnam write  shm|nam NAME            create a persistent region, fill it (pattern + 0)
 *   psnam verify shm|nam NAME K          attach, find pattern + K, add 1 everywhere, free
 *   psnam rma    shm|nam NAME            every RMA operation and synchronisation
 *   psnam counter shm|nam NAME N         N fetch_and_op(+1) per rank on one element
 *   psnam exclusive shm|nam NAME N       N get/+1/put under an exclusive lock per rank
 *   psnam big    shm|nam NAME MIB        MIB MiB put and get, verified
 *   psnam expect CLASS SIZE KEY=VALUE..  MPI_Win_allocate fails with that class (name)
 *   psnam epoch  nam NAME                keep putting under a lock until an operation fails
 *   psnam holdlock nam NAME              create NAME persistent, write and flush a pattern,
 *                                        lock segment 0 exclusively and wait to be killed
 *   psnam lockable nam NAME              attach NAME, lock segment 0 exclusively, find the
 *                                        pattern (the killed holder's lock was released)
 * The nam server comes from PSP_NAM_SERVER.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap_mpi.h"

#define N 1024 /* ints per rank */

static int rank, np;

static MPI_Win alloc(const char *manif, const char *name, int persistent, int attach, MPI_Aint size,
                     int **base, int *err)
{
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "psnam_manifestation", manif);
    MPI_Info_set(info, "psnam_name", name);
    MPI_Info_set(info, "psnam_persistent", persistent ? "true" : "false");
    if (attach)
        MPI_Info_set(info, "psnam_attach", "true");
    MPI_Win win = MPI_WIN_NULL;
    *err = MPI_Win_allocate(size, sizeof(int), info, MPI_COMM_WORLD, base, &win);
    MPI_Info_free(&info);
    if (*err != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len;
        MPI_Error_string(*err, msg, &len);
        if (rank == 0)
            printf("# MPI_Win_allocate: %s\n", msg);
    } else {
        MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    }
    return win;
}

static int pattern(int target, int i)
{
    return target * 100000 + i;
}

static int info_has(MPI_Win win, const char *key, const char *want)
{
    MPI_Info info;
    char v[256];
    int flag = 0;
    MPI_Win_get_info(win, &info);
    MPI_Info_get(info, key, sizeof(v) - 1, v, &flag);
    MPI_Info_free(&info);
    return flag && (!want || strcmp(v, want) == 0);
}

static void do_write(const char *m, const char *name)
{
    int *base, err;
    MPI_Win win = alloc(m, name, 1, 0, N * sizeof(int), &base, &err);
    check(err == MPI_SUCCESS, "create a persistent region");
    if (err)
        return;
    int t = (rank + 1) % np, buf[N];
    for (int i = 0; i < N; i++)
        buf[i] = pattern(t, i);
    MPI_Win_fence(0, win);
    MPI_Put(buf, N, MPI_INT, t, 0, N, MPI_INT, win);
    err = MPI_Win_fence(0, win);
    check(err == MPI_SUCCESS, "put the pattern to the next rank, fence");
    char segs[16], size[32];
    snprintf(segs, sizeof(segs), "%d", np);
    snprintf(size, sizeof(size), "%d", (int)(N * sizeof(int)));
    check(info_has(win, "psnam_manifestation", m) && info_has(win, "psnam_name", name) &&
              info_has(win, "psnam_persistent", "true") && info_has(win, "psnam_segments", segs) &&
              info_has(win, "psnam_size", size),
          "MPI_Win_get_info: psnam keys, psnam_segments, psnam_size");
    int *flavor, flag;
    MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor, &flag);
    check(flag && *flavor == MPI_WIN_FLAVOR_ALLOCATE, "flavor is MPI_WIN_FLAVOR_ALLOCATE");
    check(MPI_Win_free(&win) == MPI_SUCCESS, "MPI_Win_free keeps the region");
}

static void do_verify(const char *m, const char *name, int k)
{
    int *base, err;
    MPI_Win win = alloc(m, name, 1, 1, 0, &base, &err);
    check(err == MPI_SUCCESS, "attach the region of an earlier job");
    if (err)
        return;
    MPI_Aint *size;
    int flag;
    MPI_Win_get_attr(win, MPI_WIN_SIZE, &size, &flag);
    check(flag && *size == (MPI_Aint)(N * sizeof(int)), "size 0 takes the region's size");
    int t = (rank + 1) % np, buf[N], ok = 1;
    MPI_Win_lock(MPI_LOCK_SHARED, t, 0, win);
    MPI_Get(buf, N, MPI_INT, t, 0, N, MPI_INT, win);
    err = MPI_Win_unlock(t, win);
    for (int i = 0; i < N; i++)
        ok &= buf[i] == pattern(t, i) + k;
    check(err == MPI_SUCCESS && ok, "the data of the earlier job is there");
    int one[N];
    for (int i = 0; i < N; i++)
        one[i] = 1;
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win);
    MPI_Accumulate(one, N, MPI_INT, t, 0, N, MPI_INT, MPI_SUM, win);
    err = MPI_Win_unlock(t, win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock_all(0, win);
    MPI_Get(buf, N, MPI_INT, t, 0, N, MPI_INT, win);
    MPI_Win_flush_all(win);
    MPI_Win_unlock_all(win);
    ok = 1;
    for (int i = 0; i < N; i++)
        ok &= buf[i] == pattern(t, i) + k + 1;
    check(err == MPI_SUCCESS && ok, "accumulate +1 and read it back");
    check(MPI_Win_free(&win) == MPI_SUCCESS, "free");
}

/* every operation and synchronisation mode on a fresh (not persistent) region */
static void do_rma(const char *m, const char *name)
{
    int *base, err;
    MPI_Win win = alloc(m, name, 0, 0, N * sizeof(int), &base, &err);
    check(err == MPI_SUCCESS, "create a region for this job only");
    if (err)
        return;
    int t = (rank + 1) % np, from = (rank + np - 1) % np, buf[N], res[N], ok;
    /* fence: put, then get */
    for (int i = 0; i < N; i++)
        buf[i] = rank * 1000 + i;
    MPI_Win_fence(MPI_MODE_NOPRECEDE, win);
    MPI_Put(buf, N, MPI_INT, t, 0, N, MPI_INT, win);
    MPI_Win_fence(0, win);
    MPI_Get(res, N, MPI_INT, t, 0, N, MPI_INT, win);
    err = MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
    ok = 1;
    for (int i = 0; i < N; i++)
        ok &= res[i] == rank * 1000 + i;
    check(!err && ok, "fence: put, get");
    /* PSCW: accumulate into the next rank */
    MPI_Group world, to, fromg;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &t, &to);
    MPI_Group_incl(world, 1, &from, &fromg);
    for (int i = 0; i < N; i++)
        buf[i] = 1;
    MPI_Win_post(fromg, 0, win);
    MPI_Win_start(to, 0, win);
    MPI_Accumulate(buf, N, MPI_INT, t, 0, N, MPI_INT, MPI_SUM, win);
    MPI_Win_complete(win);
    err = MPI_Win_wait(win);
    MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win);
    MPI_Get(res, N, MPI_INT, rank, 0, N, MPI_INT, win);
    MPI_Win_unlock(rank, win);
    ok = 1;
    for (int i = 0; i < N; i++)
        ok &= res[i] == from * 1000 + i + 1;
    check(!err && ok, "post/start/complete/wait: accumulate");
    /* PSCW with MPI_Win_test */
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_post(fromg, 0, win);
    MPI_Win_start(to, 0, win);
    MPI_Put(buf, 1, MPI_INT, t, 5, 1, MPI_INT, win);
    MPI_Win_complete(win);
    int flag = 0;
    for (int spins = 0; !flag && spins < 1000000; spins++)
        MPI_Win_test(win, &flag);
    check(flag, "post/start/complete/test");
    /* lock_all: get_accumulate, fetch_and_op, compare_and_swap, request-based ops, flushes */
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock_all(0, win);
    int v = 7, old = -1, cmp, swp;
    MPI_Get_accumulate(&v, 1, MPI_INT, &old, 1, MPI_INT, t, 10, 1, MPI_INT, MPI_REPLACE, win);
    MPI_Win_flush(t, win);
    int got_old = old;
    MPI_Fetch_and_op(&v, &old, MPI_INT, t, 10, MPI_SUM, win);
    MPI_Win_flush_local(t, win);
    int fop_old = old;
    cmp = 14;
    swp = 99;
    MPI_Compare_and_swap(&swp, &cmp, &old, MPI_INT, t, 10, win);
    MPI_Win_flush_all(win);
    int cas_old = old;
    MPI_Fetch_and_op(NULL, &old, MPI_INT, t, 10, MPI_NO_OP, win);
    MPI_Win_flush_local_all(win);
    check(got_old == rank * 1000 + 10 + 1 && fop_old == 7 && cas_old == 14 && old == 99,
          "lock_all: get_accumulate, fetch_and_op, compare_and_swap, flush variants");
    MPI_Request rq[4];
    int a = 5, b = -1, c = -1, d = 3, e = -1;
    MPI_Rput(&a, 1, MPI_INT, t, 20, 1, MPI_INT, win, &rq[0]);
    MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
    MPI_Raccumulate(&d, 1, MPI_INT, t, 20, 1, MPI_INT, MPI_PROD, win, &rq[0]);
    MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
    MPI_Rget(&b, 1, MPI_INT, t, 20, 1, MPI_INT, win, &rq[0]);
    MPI_Rget_accumulate(&d, 1, MPI_INT, &c, 1, MPI_INT, t, 20, 1, MPI_INT, MPI_MAX, win, &rq[1]);
    MPI_Status sts[2];
    err = MPI_Waitall(2, rq, sts);
    MPI_Get(&e, 1, MPI_INT, t, 20, 1, MPI_INT, win);
    MPI_Win_sync(win);
    MPI_Win_unlock_all(win);
    check(!err && b == 15 && c == 15 && e == 15, "rput, raccumulate, rget, rget_accumulate");
    /* derived datatypes: every other int of the origin to a strided target */
    MPI_Datatype vec;
    MPI_Type_vector(N / 8, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    for (int i = 0; i < N; i++)
        buf[i] = -i;
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win);
    MPI_Put(buf, 1, vec, t, 100, 1, vec, win);
    MPI_Win_flush(t, win);
    memset(res, 0x55, sizeof(res));
    MPI_Get(res, 1, vec, t, 100, 1, vec, win);
    MPI_Accumulate(buf, N / 8, MPI_INT, t, 600, 1, vec, MPI_SUM, win);
    err = MPI_Win_unlock(t, win);
    ok = 1;
    for (int i = 0; i < N / 4; i += 2)
        ok &= res[i] == -i && res[i + 1] == 0x55555555;
    check(!err && ok, "vector datatypes at origin and target");
    MPI_Type_free(&vec);
    /* shared query: direct load/store on this node (shm), none for nam */
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Aint qsize;
    int qdu, *qbase = NULL;
    MPI_Win_shared_query(win, rank, &qsize, &qdu, &qbase);
    if (!strcmp(m, "shm")) {
        MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win);
        MPI_Win_sync(win);
        ok = qbase == base && qsize == (MPI_Aint)(N * sizeof(int)) && qbase[0] == from * 1000 + 1;
        MPI_Win_unlock(rank, win);
        /* the next rank's segment, mapped from its file (one node in this test) */
        int *tbase = NULL;
        MPI_Win_shared_query(win, t, &qsize, &qdu, &tbase);
        MPI_Win_lock(MPI_LOCK_SHARED, t, 0, win);
        MPI_Win_sync(win);
        ok &= tbase && tbase != base && qsize == (MPI_Aint)(N * sizeof(int)) &&
              (np == 1 || tbase[0] == rank * 1000 + 1);
        MPI_Win_unlock(t, win);
        check(ok, "MPI_Win_shared_query: this rank's and the next rank's segment for load/store");
    } else {
        check(qbase == NULL && qsize == 0, "MPI_Win_shared_query: no load/store on a nam window");
    }
    /* out of range on a nam window: psnamd refuses it (MPI leaves it undefined; MPIDIG's shm
       window does not check) */
    if (!strcmp(m, "nam")) {
        MPI_Win_lock(MPI_LOCK_SHARED, t, 0, win);
        err = MPI_Put(buf, 10, MPI_INT, t, N - 5, 10, MPI_INT, win);
        if (!err)
            err = MPI_Win_unlock(t, win);
        else
            MPI_Win_unlock(t, win);
        int cls = MPI_SUCCESS;
        if (err)
            MPI_Error_class(err, &cls);
        check(cls == MPI_ERR_RMA_RANGE,
              "a put past the segment's end fails with MPI_ERR_RMA_RANGE");
    }
    check(MPI_Win_free(&win) == MPI_SUCCESS, "free");
}

static void do_counter(const char *m, const char *name, int n)
{
    int *base, err;
    MPI_Win win = alloc(m, name, 0, 0, sizeof(long), &base, &err);
    if (err) {
        check(0, "create");
        return;
    }
    long one = 1, old, sum = 0;
    MPI_Win_lock_all(0, win);
    for (int i = 0; i < n; i++) {
        MPI_Fetch_and_op(&one, &old, MPI_LONG, 0, 0, MPI_SUM, win);
        MPI_Win_flush(0, win);
        sum += old;
    }
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    long total = -1, all = 0;
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
    MPI_Get(&total, 1, MPI_LONG, 0, 0, 1, MPI_LONG, win);
    MPI_Win_unlock(0, win);
    /* the fetched values are 0 .. n*np-1, each once: their sum is known */
    long want = (long)n * np, fetched_sum = 0;
    MPI_Allreduce(&sum, &fetched_sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    all = want * (want - 1) / 2;
    check(total == want && fetched_sum == all,
          "fetch_and_op counter: exact total, every value once");
    MPI_Win_free(&win);
}

static void do_exclusive(const char *m, const char *name, int n)
{
    int *base, err;
    MPI_Win win = alloc(m, name, 0, 0, sizeof(long), &base, &err);
    if (err) {
        check(0, "create");
        return;
    }
    for (int i = 0; i < n; i++) {
        long v = 0;
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
        MPI_Get(&v, 1, MPI_LONG, 0, 0, 1, MPI_LONG, win);
        MPI_Win_flush(0, win);
        v++;
        MPI_Put(&v, 1, MPI_LONG, 0, 0, 1, MPI_LONG, win);
        MPI_Win_unlock(0, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    long total = -1;
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
    MPI_Get(&total, 1, MPI_LONG, 0, 0, 1, MPI_LONG, win);
    MPI_Win_unlock(0, win);
    check(total == (long)n * np, "exclusive lock: get, +1, put: no lost update");
    MPI_Win_free(&win);
}

static void do_big(const char *m, const char *name, int mib)
{
    size_t bytes = (size_t)mib << 20;
    int *base, err;
    MPI_Win win = alloc(m, name, 0, 0, (MPI_Aint)bytes, &base, &err);
    if (err) {
        check(0, "create");
        return;
    }
    unsigned char *out = malloc(bytes), *in = malloc(bytes);
    int t = (rank + 1) % np;
    for (size_t i = 0; i < bytes; i++)
        out[i] = (unsigned char)(i * 7 + (size_t)t * 13 + (i >> 16));
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win);
    MPI_Put(out, (int)bytes, MPI_BYTE, t, 0, (int)bytes, MPI_BYTE, win);
    MPI_Win_unlock(t, win);
    MPI_Barrier(MPI_COMM_WORLD);
    memset(in, 0, bytes);
    MPI_Win_lock(MPI_LOCK_SHARED, t, 0, win);
    MPI_Get(in, (int)bytes, MPI_BYTE, t, 0, (int)bytes, MPI_BYTE, win);
    err = MPI_Win_unlock(t, win);
    char what[64];
    snprintf(what, sizeof(what), "%d MiB put and get, byte for byte", mib);
    check(!err && memcmp(in, out, bytes) == 0, what);
    free(out);
    free(in);
    MPI_Win_free(&win);
}

static void do_expect(const char *want, MPI_Aint size, int argc, char **argv)
{
    MPI_Info info;
    MPI_Info_create(&info);
    for (int i = 0; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq)
            continue;
        *eq = '\0';
        MPI_Info_set(info, argv[i], eq + 1);
        *eq = '=';
    }
    int *base;
    MPI_Win win = MPI_WIN_NULL;
    int err = MPI_Win_allocate(size, 1, info, MPI_COMM_WORLD, &base, &win);
    MPI_Info_free(&info);
    int cls = MPI_SUCCESS;
    char msg[MPI_MAX_ERROR_STRING] = "", name[MPI_MAX_ERROR_STRING] = "";
    int len;
    if (err) {
        MPI_Error_class(err, &cls);
        MPI_Error_string(err, msg, &len);
        MPI_Error_string(cls, name, &len);
    } else {
        MPI_Win_free(&win);
    }
    printf("# rank %d: class %d (%s): %s\n", rank, cls, name, msg);
    static const struct {
        const char *name;
        int cls;
    } classes[] = {{"MPI_ERR_NO_SUCH_FILE", MPI_ERR_NO_SUCH_FILE},
                   {"MPI_ERR_FILE_EXISTS", MPI_ERR_FILE_EXISTS},
                   {"MPI_ERR_ACCESS", MPI_ERR_ACCESS},
                   {"MPI_ERR_SIZE", MPI_ERR_SIZE},
                   {"MPI_ERR_NO_SPACE", MPI_ERR_NO_SPACE},
                   {"MPI_ERR_INFO_VALUE", MPI_ERR_INFO_VALUE},
                   {"MPI_ERR_INFO_KEY", MPI_ERR_INFO_KEY},
                   {"MPI_ERR_IO", MPI_ERR_IO},
                   {"MPI_ERR_OTHER", MPI_ERR_OTHER},
                   {"MPI_SUCCESS", MPI_SUCCESS}};
    int expect = -1;
    for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++)
        if (!strcmp(classes[i].name, want))
            expect = classes[i].cls;
    char what[256];
    snprintf(what, sizeof(what), "MPI_Win_allocate fails with %s on every rank", want);
    check(cls == expect, what);
}

/* nam: operations under a lock until one fails (psnamd killed by the test) */
static void do_epoch(const char *m, const char *name)
{
    int *base, err;
    MPI_Win win = alloc(m, name, 0, 0, N * sizeof(int), &base, &err);
    if (err) {
        check(0, "create");
        return;
    }
    if (rank == 0) {
        printf("# epoch started\n");
        fflush(stdout);
    }
    int buf[N] = {0};
    double t0 = MPI_Wtime();
    MPI_Win_lock_all(0, win);
    err = MPI_SUCCESS;
    for (long i = 0; !err && MPI_Wtime() - t0 < 60; i++) {
        err = MPI_Put(buf, N, MPI_INT, (rank + 1) % np, 0, N, MPI_INT, win);
        if (!err)
            err = MPI_Win_flush_all(win);
    }
    double took = MPI_Wtime() - t0;
    MPI_Win_unlock_all(win);
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len;
    if (err)
        MPI_Error_string(err, msg, &len);
    printf("# rank %d: after %.1f s: %s\n", rank, took, msg);
    check(err != MPI_SUCCESS, "operations fail with an error once psnamd is gone");
    MPI_Win_free(&win);
}

static void do_holdlock(const char *m, const char *name)
{
    int *base, err;
    MPI_Win win = alloc(m, name, 1, 0, N * sizeof(int), &base, &err);
    if (err) {
        check(0, "create");
        return;
    }
    int buf[N];
    for (int i = 0; i < N; i++)
        buf[i] = pattern(0, i);
    if (rank == 0) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
        MPI_Put(buf, N, MPI_INT, 0, 0, N, MPI_INT, win);
        err = MPI_Win_flush(0, win);
        printf("# locked\n");
        fflush(stdout);
    }
    check(err == MPI_SUCCESS, "pattern written and flushed under an exclusive lock");
    sleep(120); /* killed by the test meanwhile */
}

static void do_lockable(const char *m, const char *name)
{
    int *base, err, buf[N], ok = 1;
    MPI_Win win = alloc(m, name, 0, 1, 0, &base, &err);
    if (err) {
        check(0, "attach");
        return;
    }
    double t0 = MPI_Wtime();
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
    MPI_Get(buf, N, MPI_INT, 0, 0, N, MPI_INT, win);
    err = MPI_Win_unlock(0, win);
    for (int i = 0; i < N; i++)
        ok &= buf[i] == pattern(0, i);
    if (rank == 0)
        printf("# lock granted after %.2f s\n", MPI_Wtime() - t0);
    check(!err && ok, "the dead holder's lock is free, its flushed data is there");
    MPI_Win_free(&win);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const char *mode = argc > 1 ? argv[1] : "";
    int planned = 0;
    if (!strcmp(mode, "write") && argc == 4) {
        planned = 5;
    } else if (!strcmp(mode, "verify") && argc == 5) {
        planned = 5;
    } else if (!strcmp(mode, "rma") && argc == 4) {
        planned = strcmp(argv[2], "nam") ? 9 : 10;
    } else if ((!strcmp(mode, "counter") || !strcmp(mode, "exclusive") || !strcmp(mode, "big")) &&
               argc == 5) {
        planned = 1;
    } else if (!strcmp(mode, "expect") && argc >= 4) {
        planned = 1;
    } else if ((!strcmp(mode, "epoch") || !strcmp(mode, "holdlock") || !strcmp(mode, "lockable")) &&
               argc == 4) {
        planned = 1;
    } else {
        if (rank == 0)
            fprintf(stderr, "usage: see psnam.c\n");
        MPI_Finalize();
        return 2;
    }
    if (rank == 0)
        printf("1..%d\n", planned);
    if (!strcmp(mode, "write"))
        do_write(argv[2], argv[3]);
    else if (!strcmp(mode, "verify"))
        do_verify(argv[2], argv[3], atoi(argv[4]));
    else if (!strcmp(mode, "rma"))
        do_rma(argv[2], argv[3]);
    else if (!strcmp(mode, "counter"))
        do_counter(argv[2], argv[3], atoi(argv[4]));
    else if (!strcmp(mode, "exclusive"))
        do_exclusive(argv[2], argv[3], atoi(argv[4]));
    else if (!strcmp(mode, "big"))
        do_big(argv[2], argv[3], atoi(argv[4]));
    else if (!strcmp(mode, "expect"))
        do_expect(argv[2], atol(argv[3]), argc - 4, argv + 4);
    else if (!strcmp(mode, "epoch"))
        do_epoch(argv[2], argv[3]);
    else if (!strcmp(mode, "holdlock"))
        do_holdlock(argv[2], argv[3]);
    else if (!strcmp(mode, "lockable"))
        do_lockable(argv[2], argv[3]);
    MPI_Finalize();
    return 0;
}
