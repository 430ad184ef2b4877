/*
 * Smoke test: every rank says hello, then a token goes twice around the ring (any number of
 * ranks, 1 included).
 * Rank 0 prints TAP ("1..N", "ok"/"not ok").
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank, size, len, n = 0, failed = 0;
    char name[MPI_MAX_PROCESSOR_NAME];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(name, &len);
    printf("# hello from rank %d of %d on %s\n", rank, size, name);
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);

    if (rank == 0)
        printf("1..3\n");

    /* token around the ring, twice; every hop adds the rank */
    int token = 0, expect = 0;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    for (int lap = 0; lap < 2; lap++) {
        if (rank == 0) {
            /* nonblocking: with one rank, next == prev == 0, and a blocking send to self before
             * the receive is posted may wait forever (it does in MPICH's ch4 self path) */
            MPI_Request req;
            int out = token;
            MPI_Isend(&out, 1, MPI_INT, next, lap, MPI_COMM_WORLD, &req);
            MPI_Recv(&token, 1, MPI_INT, prev, lap, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&token, 1, MPI_INT, prev, lap, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            token += rank;
            MPI_Send(&token, 1, MPI_INT, next, lap, MPI_COMM_WORLD);
        }
    }
    for (int r = 1; r < size; r++)
        expect += 2 * r;
    if (rank == 0) {
        failed += token != expect;
        printf("%s %d - token went around the ring twice (%d, expected %d)\n",
               token == expect ? "ok" : "not ok", ++n, token, expect);
    }

    /* a collective over the point-to-point path */
    int sum = 0;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        failed += sum != size * (size - 1) / 2;
        printf("%s %d - allreduce of ranks (%d)\n", sum == size * (size - 1) / 2 ? "ok" : "not ok",
               ++n, sum);
    }

    /* self-send through the netmod (rank to itself in a comm of size > 1) */
    int in = rank + 100, out = -1;
    MPI_Sendrecv(&in, 1, MPI_INT, rank, 7, &out, 1, MPI_INT, rank, 7, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    int self_ok = out == in, all_ok;
    MPI_Reduce(&self_ok, &all_ok, 1, MPI_INT, MPI_LAND, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        failed += !all_ok;
        printf("%s %d - self send/recv on every rank\n", all_ok ? "ok" : "not ok", ++n);
    }

    MPI_Finalize();
    return failed ? 1 : 0; /* so that `make hello` fails too */
}
