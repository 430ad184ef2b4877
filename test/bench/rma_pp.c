/*
 * One-sided latency and bandwidth of one window kind, rank 0 against rank 1 (2 ranks):
 *   rma_pp allocate|shared|psnam-shm|psnam-nam [MAX_BYTES]
 * Per size (8 B .. MAX_BYTES, default 16 MiB), under MPI_Win_lock_all:
 *   put/get latency: one operation then MPI_Win_flush (remote completion: a round trip);
 *   put/get bandwidth: 16 operations then one flush;
 *   and fetch_and_op latency (8 B). CSV lines: kind,op,bytes,usec,MB/s.
 * psnam-nam needs PSP_NAM_SERVER (test/bench/psnam.sh starts psnamd); its rank 1 sleeps
 * meanwhile (the target of a nam window does nothing), every other kind's rank 1 serves the
 * operations in MPI_Barrier.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WINDOW 16

static MPI_Win win;
static char *buf;

static double run(int op, int bytes, int window, int iters)
{
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        for (int k = 0; k < window; k++) {
            if (op == 'p')
                MPI_Put(buf, bytes, MPI_BYTE, 1, 0, bytes, MPI_BYTE, win);
            else
                MPI_Get(buf, bytes, MPI_BYTE, 1, 0, bytes, MPI_BYTE, win);
        }
        MPI_Win_flush(1, win);
    }
    return MPI_Wtime() - t0;
}

/* iterations for about 0.2 s, from a short trial */
static int calibrate(int op, int bytes, int window)
{
    double t = run(op, bytes, window, 3) / 3;
    int n = t > 0 ? (int)(0.2 / t) : 1000;
    return n < 5 ? 5 : n > 100000 ? 100000 : n;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    const char *kind = argc > 1 ? argv[1] : "allocate";
    long max = argc > 2 ? atol(argv[2]) : 16l << 20;
    if (np != 2) {
        if (!rank)
            fprintf(stderr, "rma_pp: run with 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Info info;
    MPI_Info_create(&info);
    void *base;
    int err;
    if (!strcmp(kind, "shared")) {
        err = MPI_Win_allocate_shared(max, 1, info, MPI_COMM_WORLD, &base, &win);
    } else {
        if (!strncmp(kind, "psnam-", 6)) { /* a region of this run only */
            char name[64];
            int pid = (int)getpid();
            MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
            snprintf(name, sizeof(name), "rma_pp-%d", pid);
            MPI_Info_set(info, "psnam_manifestation", kind + 6);
            MPI_Info_set(info, "psnam_name", name);
        }
        err = MPI_Win_allocate(max, 1, info, MPI_COMM_WORLD, &base, &win);
    }
    MPI_Info_free(&info);
    if (err != MPI_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, 1);
    buf = malloc((size_t)max);
    memset(buf, 1, (size_t)max);
    if (rank == 0) {
        MPI_Win_lock_all(0, win);
        static const long sizes[] = {8, 64, 1024, 8192, 65536, 1 << 20, 4 << 20, 16 << 20};
        for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]) && sizes[si] <= max; si++) {
            int b = (int)sizes[si];
            for (int op = 'p'; op; op = op == 'p' ? 'g' : 0) {
                int n = calibrate(op, b, 1);
                double lat = run(op, b, 1, n) / n * 1e6;
                n = calibrate(op, b, WINDOW);
                double t = run(op, b, WINDOW, n);
                double bw = (double)b * WINDOW * n / t / 1e6;
                printf("%s,%s,%d,%.3f,%.1f\n", kind, op == 'p' ? "put" : "get", b, lat, bw);
            }
        }
        long one = 1, old;
        int n = 2000;
        double t0 = MPI_Wtime();
        for (int i = 0; i < n; i++) {
            MPI_Fetch_and_op(&one, &old, MPI_LONG, 1, 0, MPI_SUM, win);
            MPI_Win_flush(1, win);
        }
        printf("%s,fop,8,%.3f,\n", kind, (MPI_Wtime() - t0) / n * 1e6);
        MPI_Win_unlock_all(win);
    }
    if (!strcmp(kind, "psnam-nam")) {
        /* a nam window's target takes no part: rank 1 sleeps instead of polling, as an idle
           process would, and leaves the CPUs to rank 0 and psnamd */
        MPI_Request r;
        int done = 0;
        MPI_Ibarrier(MPI_COMM_WORLD, &r);
        while (!done) {
            if (rank == 1)
                usleep(2000);
            MPI_Test(&r, &done, MPI_STATUS_IGNORE);
        }
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Win_free(&win);
    free(buf);
    MPI_Finalize();
    return 0;
}
