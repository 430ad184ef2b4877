/*
 * Collectives through the shared segment of a communicator within one node (the netmod's
 * pscom_coll_shm.c: Barrier, Bcast up to 64 KiB, Allreduce up to 1 KiB, Allgather and Alltoall of
 * small blocks):
 * results checked over many rounds of mixed collectives on several communicators (the two
 * halves of the segment alternate between rounds), a Barrier holds everybody until the last
 * rank arrives, the segment is mapped but no longer has a name in /dev/shm, and it goes with
 * its communicator.
 *
 * Argument: which communicators must have a segment mapped: "expect-shm" all, "expect-messages"
 * none, "expect-rank0-off" those without rank 0 (run with PSP_MPI_COLL_SHM=0 in rank 0 only: a
 * process with 0 keeps the messages on every communicator it belongs to).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap_mpi.h"

#define ROUNDS   300
#define LATE_S   0.2
#define BIG_INTS (64 * 1024 / 4)

/* mappings of coll segments in this process; *named: how many still have a name */
static int segments(int *named)
{
    char line[512];
    int n = 0;
    *named = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (strstr(line, "/psmpi-coll-")) {
            n++;
            *named += strstr(line, "(deleted)") == NULL;
        }
    fclose(f);
    return n;
}

/* one round of each collective on comm; 1 if every result is right */
static int round_on(MPI_Comm comm, int round)
{
    int rank, size, ok = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Barrier(comm);

    long sum = 0, mine = (long)rank * 1000 + round;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, comm);
    ok &= sum == (long)size * (size - 1) / 2 * 1000 + (long)size * round;

    double v[64], mx[64];
    for (int i = 0; i < 64; i++)
        v[i] = (double)((rank + i + round) % size);
    MPI_Allreduce(MPI_IN_PLACE, v, 64, MPI_DOUBLE, MPI_MAX, comm);
    for (int i = 0; i < 64; i++)
        ok &= v[i] == (double)(size - 1);
    for (int i = 0; i < 64; i++)
        mx[i] = rank == i % size ? 1.0 : 0.0;
    MPI_Allreduce(MPI_IN_PLACE, mx, 64, MPI_DOUBLE, MPI_SUM, comm);
    for (int i = 0; i < 64; i++)
        ok &= mx[i] == 1.0;

    int root = round % size;
    long b8 = rank == root ? round * 7L : -1;
    MPI_Bcast(&b8, 1, MPI_LONG, root, comm);
    ok &= b8 == round * 7L;
    if (round % 5 == 0) { /* larger than a slot: in parts, which the ring's end cuts short */
        static const int counts[] = {20 * 1024 / 4 + 3, BIG_INTS, 257, 10000};
        static int big[BIG_INTS];
        int n = counts[round / 5 % 4];
        for (int i = 0; i < n; i++)
            big[i] = rank == root ? i ^ round : -1;
        MPI_Bcast(big, n, MPI_INT, root, comm);
        for (int i = 0; i < n; i++)
            ok &= big[i] == (i ^ round);
    }

    int blk[4], *all = malloc(sizeof(int) * 4 * size);
    for (int i = 0; i < 4; i++)
        blk[i] = rank * 10 + i + round;
    if (round % 2) {
        MPI_Allgather(blk, 4, MPI_INT, all, 4, MPI_INT, comm);
    } else {
        memcpy(all + 4 * rank, blk, sizeof(blk));
        MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 4, MPI_INT, comm);
    }
    for (int r = 0; r < size; r++)
        for (int i = 0; i < 4; i++)
            ok &= all[4 * r + i] == r * 10 + i + round;

    int *out = malloc(sizeof(int) * 2 * size), *in = malloc(sizeof(int) * 2 * size);
    for (int r = 0; r < size; r++) {
        out[2 * r] = rank * 100 + r;
        out[2 * r + 1] = round;
    }
    if (round % 3) {
        MPI_Alltoall(out, 2, MPI_INT, in, 2, MPI_INT, comm);
    } else {
        memcpy(in, out, sizeof(int) * 2 * size);
        MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, in, 2, MPI_INT, comm);
    }
    for (int r = 0; r < size; r++)
        ok &= in[2 * r] == r * 100 + rank && in[2 * r + 1] == round;
    free(all);
    free(out);
    free(in);
    return ok;
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *expect = argc > 1 ? argv[1] : "";
    int expect_shm = !strcmp(expect, "expect-shm");
    int expect_rank0_off = !strcmp(expect, "expect-rank0-off");
    if (rank == 0)
        printf("1..5\n");

    MPI_Comm dup, half;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &half);
    int ok = 1;
    for (int round = 0; round < ROUNDS; round++) {
        ok &= round_on(MPI_COMM_WORLD, round);
        ok &= round_on(half, round);
        if (round % 5 == 0)
            ok &= round_on(dup, round);
    }
    char what[160];
    snprintf(what, sizeof(what),
             "%d rounds of Barrier, Bcast, Allreduce, Allgather and Alltoall on the world, a dup "
             "and a split: all results right",
             ROUNDS);
    check(ok, what);

    /* the last rank to arrive releases the others, not earlier */
    double arrived = 0, left;
    if (rank == size - 1) {
        usleep((useconds_t)(LATE_S * 1e6));
        arrived = MPI_Wtime();
    }
    MPI_Barrier(MPI_COMM_WORLD);
    left = MPI_Wtime();
    MPI_Bcast(&arrived, 1, MPI_DOUBLE, size - 1, MPI_COMM_WORLD);
    check(left >= arrived, "nobody leaves a Barrier before the last rank has arrived");

    int named, n = segments(&named);
    /* world, dup and half (a single-rank half has none; the odd half lacks rank 0) */
    int half_size;
    MPI_Comm_size(half, &half_size);
    int want = expect_shm                          ? 2 + (half_size > 1)
               : expect_rank0_off && rank % 2 == 1 ? half_size > 1
                                                   : 0;
    if (n != want)
        printf("# rank %d: %d segments mapped, %d wanted\n", rank, n, want);
    check(n == want, expect_shm         ? "each communicator's segment is mapped"
                     : expect_rank0_off ? "segments only where rank 0 (off) is not a member"
                                        : "no segment mapped (messages)");
    check(named == 0, "no segment keeps a name in /dev/shm");

    MPI_Comm_free(&dup);
    MPI_Comm_free(&half);
    n = segments(&named);
    if (n != (expect_shm ? 1 : 0))
        printf("# rank %d: %d segments mapped after the frees\n", rank, n);
    check(n == (expect_shm ? 1 : 0), "a freed communicator's segment is unmapped");
    MPI_Finalize();
    return 0;
}
