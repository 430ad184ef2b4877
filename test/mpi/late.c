/*
 * Late receivers: senders stream blocking MPI_Sends at a rank that sleeps (no progress), then
 * wakes and receives them one by one. The transport must hold the flood back and deliver all
 * of it, in order, as soon as the receiver runs (a sender waiting for room must be woken by the
 * receiver's consumption, not by a timer).
 *
 *   one-to-one   rank 1 -> rank 0, then (4 ranks and more) many-to-one: ranks 1..3 -> rank 0,
 *                received with MPI_ANY_SOURCE, the order checked per sender
 *   sizes        8 B, 1 KiB, 64 KiB, 1 MiB (counts keep each to a few MiB per sender)
 *
 * Usage: late [N_1KIB]  (a count for a single 1 KiB one-to-one run instead, as a bench of the
 * peak memory: rank 0 prints its and the sender's VmHWM). Rank 0 prints TAP.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap_mpi.h"
#include "../bench/vmhwm.h"

#define SLEEP_US 700000

static const struct {
    int len, n;
} sizes[] = {{8, 20000}, {1024, 5000}, {64 * 1024, 100}, {1024 * 1024, 8}};
#define NSIZES (int)(sizeof(sizes) / sizeof(sizes[0]))

static unsigned char pattern(int src, int seq, int i)
{
    return (unsigned char)(src * 131 + seq * 7 + i);
}

static void fill(unsigned char *b, int len, int src, int seq)
{
    b[0] = (unsigned char)seq; /* small messages: still one byte that differs per message */
    for (int i = 1; i < len; i++)
        b[i] = pattern(src, seq, i);
}

static int good(const unsigned char *b, int len, int src, int seq)
{
    if (b[0] != (unsigned char)seq)
        return 0;
    for (int i = 1; i < len; i += (len > 4096 ? 61 : 1)) /* large: a sample suffices */
        if (b[i] != pattern(src, seq, i))
            return 0;
    return b[len - 1] == (len == 1 ? (unsigned char)seq : pattern(src, seq, len - 1));
}

/* senders[0..nsend) send n messages of len to rank 0, which sleeps first. 1 if all is well. */
static int flood(int rank, int nsend, int len, int n, unsigned char *buf, double *secs)
{
    int ok_all = 1;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank >= 1 && rank <= nsend) {
        for (int i = 0; i < n; i++) {
            fill(buf, len, rank, i);
            MPI_Send(buf, len, MPI_BYTE, 0, 5, MPI_COMM_WORLD);
        }
    } else if (rank == 0) {
        int next[4] = {0, 0, 0, 0}, src = nsend == 1 ? 1 : MPI_ANY_SOURCE;
        usleep(SLEEP_US);
        double t0 = MPI_Wtime();
        for (int i = 0; i < n * nsend && ok_all; i++) {
            MPI_Status st;
            int cnt;
            MPI_Recv(buf, len, MPI_BYTE, src, 5, MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_BYTE, &cnt);
            int s = st.MPI_SOURCE;
            if (s < 1 || s > nsend || cnt != len || !good(buf, len, s, next[s])) {
                printf("# message %d: from %d (%d bytes), want seq %d: bad\n", i, s, cnt,
                       s >= 1 && s <= nsend ? next[s] : -1);
                ok_all = 0;
            } else {
                next[s]++;
            }
        }
        *secs = MPI_Wtime() - t0;
    }
    return ok_all;
}

int main(int argc, char **argv)
{
    int rank, size;
    double secs = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    unsigned char *buf = malloc(1024 * 1024);

    if (argc > 1) { /* one 1 KiB run of the given count: the peak memory */
        int n = atoi(argv[1]);
        int fine = size < 2 || flood(rank, 1, 1024, n, buf, &secs);
        long mine = vmhwm_kb(), theirs = rank == 1 ? mine : 0, sender = 0;
        MPI_Reduce(&theirs, &sender, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0)
            printf("1..1\n# %d x 1 KiB late-received in %.2f s, peak memory (VmHWM): receiver "
                   "%ld kB, sender %ld kB\n",
                   n, secs, mine, sender);
        check(fine, "late receiver, 1 KiB messages, data verified");
    } else if (size < 2) {
        printf("1..0 # SKIP needs 2 ranks\n");
    } else {
        int nmany = size >= 4 ? 3 : 0;
        if (rank == 0)
            printf("1..%d\n", NSIZES * (1 + (nmany > 0)));
        for (int k = 0; k < 1 + (nmany > 0); k++) {
            int nsend = k == 0 ? 1 : nmany;
            for (int s = 0; s < NSIZES; s++) {
                int fine = flood(rank, nsend, sizes[s].len, sizes[s].n, buf, &secs);
                char what[160];
                snprintf(what, sizeof(what),
                         "%s: %d x %d B to a late receiver, in order, data verified (%.2f s)",
                         nsend == 1 ? "one-to-one" : "3-to-one, any source", sizes[s].n,
                         sizes[s].len, secs);
                check(fine, what);
            }
        }
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
