/*
 * Ranks 0 and 1 exchange one message of each size given on the command line (default 16k, 64k,
 * 256k; k = 1024), rank 0 first, and check every byte. eager.t counts which of them went by
 * rendezvous (PSP_DEBUG_STATS), and the scheduling policy each rank reports on stderr
 * (SCHED_BATCH on an oversubscribed node, PSP_MPI_SCHED_BATCH). Other ranks only take part in
 * the checks.
 */
#define _GNU_SOURCE /* SCHED_BATCH */
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap_mpi.h"

static size_t parse_size(const char *s)
{
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    return (size_t)v * (*end == 'k' ? 1024 : 1);
}

static int exchange(int rank, size_t len)
{
    unsigned char *buf = malloc(len ? len : 1);
    int ok = buf != NULL, peer = rank ^ 1;
    if (!ok || rank > 1) {
        free(buf);
        return ok;
    }
    for (int round = 0; round < 2; round++) {
        if (rank == round) { /* rank 0 sends first, then rank 1 */
            for (size_t i = 0; i < len; i++)
                buf[i] = (unsigned char)(i * 7 + len + (size_t)round);
            MPI_Send(buf, (int)len, MPI_BYTE, peer, round, MPI_COMM_WORLD);
        } else {
            memset(buf, 0, len);
            MPI_Recv(buf, (int)len, MPI_BYTE, peer, round, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (size_t i = 0; i < len; i++)
                ok &= buf[i] == (unsigned char)(i * 7 + len + (size_t)round);
        }
    }
    free(buf);
    return ok;
}

int main(int argc, char **argv)
{
    static const char *defaults[] = {"16k", "64k", "256k"};
    int rank, size, n = argc > 1 ? argc - 1 : 3;
    const char **sizes = argc > 1 ? (const char **)argv + 1 : defaults;
    char what[64];

    /* EAGER_THREADS=multiple: the scheduling policy of an MPI_THREAD_MULTIPLE job */
    const char *threads = getenv("EAGER_THREADS");
    if (threads && !strcmp(threads, "multiple")) {
        int provided;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int policy = sched_getscheduler(0);
    fprintf(stderr, "eager: rank %d scheduling policy %s\n", rank,
            policy == SCHED_BATCH   ? "batch"
            : policy == SCHED_OTHER ? "other"
                                    : "another");
    if (rank == 0)
        printf(size > 1 ? "1..%d\n" : "1..0 # SKIP needs 2 ranks\n", n);
    if (size > 1) {
        for (int i = 0; i < n; i++) {
            snprintf(what, sizeof(what), "%s bytes each way", sizes[i]);
            check(exchange(rank, parse_size(sizes[i])), what);
        }
    }
    MPI_Finalize();
    return 0;
}
