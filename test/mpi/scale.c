/*
 * Many ranks on one machine (run by scale.t with 64 and 128):
 *   scale ring      three rounds of a ring exchange only: on-demand connections mean each rank
 *                   opens at most 2 (scale.t reads PSP_DEBUG_STATS)
 *   scale alltoall  MPI_Alltoall and MPI_Alltoallv with data checks, then a barrier
 * TAP from rank 0.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap_mpi.h"

static int rank, size;

static void ring(void)
{
    int ok = 1;
    for (int round = 0; round < 3; round++) {
        int v = rank * 10 + round, w = -1;
        int right = (rank + 1) % size, left = (rank + size - 1) % size;
        MPI_Sendrecv(&v, 1, MPI_INT, right, round, &w, 1, MPI_INT, left, round, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        ok &= w == left * 10 + round;
    }
    /* no collective here: it would open more connections than the ring needs */
    if (!ok) {
        fprintf(stderr, "rank %d: wrong data in the ring\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0)
        printf("ok 1 - ring exchange, 3 rounds, only with the neighbours (others abort on bad "
               "data)\n");
}

static void alltoall(void)
{
    enum { N = 4 };
    int *s = malloc(sizeof(int) * N * size), *r = malloc(sizeof(int) * N * size);
    int *cnt = malloc(sizeof(int) * size), *dsp = malloc(sizeof(int) * size), ok = 1;
    for (int i = 0; i < N * size; i++)
        s[i] = rank * 1000000 + i;
    MPI_Alltoall(s, N, MPI_INT, r, N, MPI_INT, MPI_COMM_WORLD);
    for (int p = 0; p < size; p++)
        for (int k = 0; k < N; k++)
            ok &= r[p * N + k] == p * 1000000 + rank * N + k;
    check(ok, "MPI_Alltoall, 4 ints per pair");

    /* alltoallv: rank p gets 1 + (p % 3) ints from everybody: a pattern that touches every
       pair with different counts */
    int total = 0;
    for (int p = 0; p < size; p++) {
        cnt[p] = 1 + p % 3;
        dsp[p] = total;
        total += cnt[p];
    }
    int *sv = malloc(sizeof(int) * total), *rv = malloc(sizeof(int) * size * 3);
    int *rc = malloc(sizeof(int) * size), *rd = malloc(sizeof(int) * size);
    for (int i = 0; i < total; i++)
        sv[i] = rank * 1000000 + i;
    for (int p = 0; p < size; p++) {
        rc[p] = 1 + rank % 3;
        rd[p] = p * (1 + rank % 3);
    }
    MPI_Alltoallv(sv, cnt, dsp, MPI_INT, rv, rc, rd, MPI_INT, MPI_COMM_WORLD);
    ok = 1;
    for (int p = 0; p < size; p++)
        for (int k = 0; k < rc[p]; k++)
            ok &= rv[rd[p] + k] == p * 1000000 + dsp[rank] + k;
    check(ok, "MPI_Alltoallv, 1-3 ints per pair");
    MPI_Barrier(MPI_COMM_WORLD);
    free(s);
    free(r);
    free(cnt);
    free(dsp);
    free(sv);
    free(rv);
    free(rc);
    free(rd);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int do_ring = argc > 1 && !strcmp(argv[1], "ring");
    if (rank == 0)
        printf("1..%d\n", do_ring ? 1 : 2);
    if (do_ring)
        ring();
    else
        alltoall();
    MPI_Finalize();
    return 0;
}
