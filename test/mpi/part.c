/*
 * Partitioned communication (MPI 4): MPIDIG protocol over pscom active messages. Every rank
 * sends to and receives from its pair partner (rank ^ 1), or itself when it has none (one
 * rank, or the last of an odd number). TAP from rank 0.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "tap_mpi.h"

static int rank, size;

static int value(int from, int round, int i)
{
    return from * 1000003 + round * 100000 + i;
}

/* ROUNDS restarts of one persistent pair; partitions made ready in reverse order; the
 * receiver polls MPI_Parrived when asked to, else just waits */
static int exchange(int parts, int count, int use_parrived)
{
    enum { ROUNDS = 3 };
    int ok = 1, peer = (rank ^ 1) < size ? rank ^ 1 : rank;
    size_t n = (size_t)parts * count;
    int *sbuf = malloc(n * sizeof(int)), *rbuf = malloc(n * sizeof(int));
    MPI_Request req[2];
    MPI_Status st[2]; /* not MPI_STATUSES_IGNORE: gcc 12 -O2 warns (-Wstringop-overflow) */
    MPI_Precv_init(rbuf, parts, count, MPI_INT, peer, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &req[0]);
    MPI_Psend_init(sbuf, parts, count, MPI_INT, peer, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &req[1]);
    for (int round = 0; round < ROUNDS; round++) {
        for (size_t i = 0; i < n; i++)
            rbuf[i] = -1;
        MPI_Startall(2, req);
        for (int p = parts - 1; p >= 0; p--) {
            for (int i = 0; i < count; i++)
                sbuf[p * count + i] = value(rank, round, p * count + i);
            MPI_Pready(p, req[1]);
        }
        if (use_parrived) {
            for (int p = 0; p < parts; p++) {
                int flag = 0;
                while (!flag)
                    MPI_Parrived(req[0], p, &flag);
                for (int i = 0; i < count; i++) /* usable before the request completes */
                    ok &= rbuf[p * count + i] == value(peer, round, p * count + i);
            }
        }
        MPI_Waitall(2, req, st);
        for (size_t i = 0; i < n; i++)
            ok &= rbuf[i] == value(peer, round, (int)i);
    }
    MPI_Request_free(&req[0]);
    MPI_Request_free(&req[1]);
    free(sbuf);
    free(rbuf);
    return ok;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0)
        printf("1..3\n");
    check(exchange(8, 100, 0),
          "MPI_Psend_init/MPI_Precv_init, 8 x 400 B, 3 rounds, partitions ready out of order");
    check(exchange(8, 100, 1), "MPI_Parrived per partition");
    check(exchange(4, 128 * 1024, 1), "4 partitions of 512 KiB (rendezvous size), 3 rounds");
    MPI_Finalize();
    return 0;
}
