/*
 * Floods of unexpected messages at a receiver that is late: its memory stays bounded
 * (PSP_UNEXPECTED_MAX, flow control in libpscom) and no correct program waits forever.
 * Rank 0 receives, every other rank sends.
 *
 *   later first  each sender MPI_Isends K x 1 KiB (tag 1, far more than the receiver holds
 *                unexpected), then MPI_Sends 8 B with tag 2; the receiver asks for tag 2 first,
 *                from each sender, then takes the tag 1 messages in order
 *   flood        the senders MPI_Send 10^6 messages of 8 B in all (each its share) while the
 *                receiver polls for something else (MPI_Iprobe) for POLL_S seconds, so that
 *                they arrive unexpected; it then takes them with MPI_ANY_SOURCE, the order
 *                checked per sender, and its peak resident memory may have grown by at most
 *                PSP_UNEXPECTED_MAX + a margin
 *   behind       (argument "behind", 2 ranks, a large PSP_UNEXPECTED_MAX) rank 1 MPI_Sends
 *                BEHIND_N x 1 KiB to a receiver that starts late and then takes each message
 *                more slowly than they come, making progress meanwhile (MPI_Iprobe): the
 *                sender runs out of credit again and again, and its window must not grow for
 *                a receiver that is behind (it would only let the sender run further ahead),
 *                so the receiver's peak memory grows by at most the largest first window
 *                (4 MiB) + a margin, far below what PSP_UNEXPECTED_MAX allows (flood.t runs it
 *                over shm: see there for tcp)
 *
 * The job runs with PSP_UNEXPECTED_MAX set (a size: 4096, 64k, 4M). Rank 0 prints TAP.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap_mpi.h"
#include "../bench/vmhwm.h"

#define SLEEP_US  500000
#define LATER_K   4000
#define LATER_LEN 1024
#define FLOOD_N   1000000
#define POLL_S    1.5
/* what else may grow while the flood is received: MPICH's request pool, malloc's arenas */
#define MARGIN_KB        (8 * 1024)
#define BEHIND_N         65536
#define BEHIND_WINDOW_KB (4 * 1024) /* a connection's first window at most (pscom_fc.c) */
#define BEHIND_WORK_S    2e-6       /* the receiver's work per message */

static void later_first(int rank, int size)
{
    int ok = 1;
    unsigned char *buf = malloc((size_t)LATER_K * LATER_LEN);
    if (rank > 0) {
        MPI_Request *reqs = malloc(sizeof(MPI_Request) * LATER_K);
        for (int i = 0; i < LATER_K; i++) {
            memset(buf + (size_t)i * LATER_LEN, (unsigned char)(rank + i), LATER_LEN);
            MPI_Isend(buf + (size_t)i * LATER_LEN, LATER_LEN, MPI_BYTE, 0, 1, MPI_COMM_WORLD,
                      &reqs[i]);
        }
        int last = rank;
        MPI_Send(&last, 1, MPI_INT, 0, 2, MPI_COMM_WORLD);
        for (int i = 0; i < LATER_K; i++)
            MPI_Wait(&reqs[i], MPI_STATUS_IGNORE);
        free(reqs);
    } else {
        usleep(SLEEP_US);
        for (int src = 1; src < size; src++) {
            int last = -1;
            MPI_Recv(&last, 1, MPI_INT, src, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            ok &= last == src;
        }
        for (int src = 1; src < size; src++)
            for (int i = 0; i < LATER_K; i++) {
                MPI_Recv(buf, LATER_LEN, MPI_BYTE, src, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                ok &= buf[0] == (unsigned char)(src + i) && buf[LATER_LEN - 1] == buf[0];
            }
    }
    free(buf);
    char what[160];
    snprintf(what, sizeof(what),
             "%d sender(s) x %d x 1 KiB MPI_Isend, then 8 B with another tag: the receiver "
             "gets the later message first, then all in order",
             size - 1, LATER_K);
    check(ok, what);
}

/* VmHWM from here on: "5" resets it to the current size (Linux 4.0) */
static long peak_reset(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
    return proc_status_kb("VmRSS");
}

static void behind(int rank)
{
    int ok = 1;
    long grew_kb = 0;
    char buf[1024];
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        for (int i = 0; i < BEHIND_N; i++) {
            memcpy(buf, &i, sizeof(i));
            MPI_Send(buf, sizeof(buf), MPI_BYTE, 0, 4, MPI_COMM_WORLD);
        }
    } else if (rank == 0) {
        long before_kb = peak_reset();
        double until = MPI_Wtime() + 0.2;
        while (MPI_Wtime() < until) { /* late: the first window arrives unexpected */
            int flag;
            MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        }
        for (int i = 0; i < BEHIND_N; i++) {
            int got = -1;
            MPI_Recv(buf, sizeof(buf), MPI_BYTE, 1, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            memcpy(&got, buf, sizeof(got));
            ok &= got == i;
            /* other MPI work: progress reads what comes, and it waits unexpected */
            for (double t = MPI_Wtime() + BEHIND_WORK_S; MPI_Wtime() < t;) {
                int flag;
                MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
            }
        }
        grew_kb = vmhwm_kb() - before_kb;
        if (!getenv("MPITEST_SANITIZED"))
            ok &= grew_kb >= 0 && grew_kb < BEHIND_WINDOW_KB + MARGIN_KB;
        printf("# the receiver's peak memory grew by %ld KiB during %d x 1 KiB (first window "
               "at most %d KiB, margin %d KiB)\n",
               grew_kb, BEHIND_N, BEHIND_WINDOW_KB, MARGIN_KB);
    }
    char what[160];
    snprintf(what, sizeof(what),
             "%d x 1 KiB MPI_Send at a receiver that is behind: all in order, the sender's "
             "window not grown",
             BEHIND_N);
    check(ok, what);
}

static void flood(int rank, int size, long limit_kb)
{
    int senders = size - 1, n = FLOOD_N / senders, ok = 1;
    long before_kb = 0, grew_kb = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank > 0) {
        for (int i = 0; i < n; i++) {
            long long msg = (long long)rank << 32 | i;
            MPI_Send(&msg, 1, MPI_LONG_LONG, 0, 3, MPI_COMM_WORLD);
        }
    } else {
        before_kb = peak_reset();
        /* late, but progressing: what arrives meanwhile is unexpected */
        double until = MPI_Wtime() + POLL_S;
        while (MPI_Wtime() < until) {
            int flag;
            MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        }
        int *next = calloc((size_t)size, sizeof(int));
        for (long i = 0; i < (long)n * senders; i++) {
            long long msg = -1;
            MPI_Status st;
            MPI_Recv(&msg, 1, MPI_LONG_LONG, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &st);
            int src = st.MPI_SOURCE;
            ok &= msg == ((long long)src << 32 | next[src]);
            next[src]++;
        }
        free(next);
        grew_kb = vmhwm_kb() - before_kb;
        /* under AddressSanitizer (maint/check-sanitized.sh) freed memory waits in its
           quarantine: the peak is shown, not asserted */
        if (!getenv("MPITEST_SANITIZED"))
            ok &= grew_kb >= 0 && grew_kb < limit_kb + MARGIN_KB;
        printf("# the receiver's peak memory grew by %ld KiB during %d x 8 B from %d sender(s) "
               "(PSP_UNEXPECTED_MAX %ld KiB, margin %d KiB)\n",
               grew_kb, n * senders, senders, limit_kb, MARGIN_KB);
    }
    char what[160];
    snprintf(what, sizeof(what),
             "%d sender(s), %d x 8 B MPI_Send at a late receiver: all in order, its memory "
             "bounded",
             senders, n * senders);
    check(ok, what);
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *limit = getenv("PSP_UNEXPECTED_MAX");
    char *unit = NULL;
    long limit_kb = limit ? strtol(limit, &unit, 10) : 0;
    limit_kb = !unit || !*unit ? limit_kb / 1024
               : *unit == 'k'  ? limit_kb
               : *unit == 'M'  ? limit_kb * 1024
                               : 0;
    if (limit && !strcmp(limit, "inf")) /* no flow control: shows what it saves */
        limit_kb = 1L << 40;
    if (argc > 1 && !strcmp(argv[1], "behind")) {
        if (rank == 0)
            printf(size == 2 ? "1..1\n" : "Bail out! flood behind needs 2 ranks\n");
        if (size != 2)
            MPI_Abort(MPI_COMM_WORLD, 2);
        behind(rank);
        MPI_Finalize();
        return 0;
    }
    if (rank == 0)
        printf("1..2\n");
    if (size < 2 || limit_kb <= 0) {
        if (rank == 0)
            printf("Bail out! flood needs 2 ranks or more and PSP_UNEXPECTED_MAX\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    flood(rank, size, limit_kb); /* first: memory that later_first frees stays resident */
    later_first(rank, size);
    MPI_Finalize();
    return 0;
}
