/*
 * MPI-IO on device memory (PSP_CUDA=1, the fake driver): each rank writes its block from a
 * device buffer (independent, collective, nonblocking, shared file pointer, a strided device
 * buffer through a vector type) and reads it back into device memory, where the gaps of a
 * strided receive buffer must stay untouched. Run as: io DIR.
 */
#include <string.h>
#include "../mpi/tap_mpi.h"
#include "cuda_test.h"

#define N 4096

static int rank, size;

static int val(int r, int i, int salt)
{
    return r * 65537 + i * 3 + salt;
}

static int *dev_vals(int n, int r, int salt)
{
    int *h = malloc(sizeof(int) * n);
    for (int i = 0; i < n; i++)
        h[i] = r < 0 ? -1 : val(r, i, salt);
    int *d = dev_alloc(sizeof(int) * n);
    to_dev(d, h, sizeof(int) * n);
    free(h);
    return d;
}

static int dev_check(const int *d, int n, int r, int salt)
{
    int *h = malloc(sizeof(int) * n), ok = 1;
    from_dev(h, d, sizeof(int) * n);
    for (int i = 0; i < n; i++)
        ok &= h[i] == val(r, i, salt);
    free(h);
    return ok;
}

int main(int argc, char **argv)
{
    cuda_test_init();
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char path[512];
    snprintf(path, sizeof(path), "%s/cuda-io.dat", argc > 1 ? argv[1] : ".");
    MPI_File fh;
    MPI_Offset off = (MPI_Offset)rank * N * sizeof(int);
    int ok, err;

    err = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    check(err == MPI_SUCCESS, "MPI_File_open");

    /* independent write_at / read_at */
    int *w = dev_vals(N, rank, 1), *r = dev_vals(N, -1, 0);
    MPI_File_write_at(fh, off, w, N, MPI_INT, MPI_STATUS_IGNORE);
    MPI_File_sync(fh);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Status st;
    int count = -1;
    MPI_File_read_at(fh, off, r, N, MPI_INT, &st);
    MPI_Get_count(&st, MPI_INT, &count);
    check(count == N && dev_check(r, N, rank, 1), "write_at / read_at from and to device memory");

    /* collective write_at_all / read_at_all of the neighbour's block */
    dev_free(w);
    w = dev_vals(N, rank, 2);
    MPI_File_write_at_all(fh, off, w, N, MPI_INT, MPI_STATUS_IGNORE);
    MPI_File_sync(fh);
    MPI_Barrier(MPI_COMM_WORLD);
    int peer = (rank + 1) % size;
    MPI_File_read_at_all(fh, (MPI_Offset)peer * N * sizeof(int), r, N, MPI_INT, MPI_STATUS_IGNORE);
    check(dev_check(r, N, peer, 2), "write_at_all / read_at_all (collective)");

    /* nonblocking */
    dev_free(w);
    w = dev_vals(N, rank, 3);
    MPI_Request req;
    MPI_File_iwrite_at(fh, off, w, N, MPI_INT, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_File_sync(fh);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_File_iread_at(fh, off, r, N, MPI_INT, &req);
    MPI_Wait(&req, &st);
    MPI_Get_count(&st, MPI_INT, &count);
    check(count == N && dev_check(r, N, rank, 3), "iwrite_at / iread_at");

    /* a strided device buffer: every other int of 2N, written packed, read back strided */
    MPI_Datatype vec;
    MPI_Type_vector(N, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    int *h = malloc(sizeof(int) * 2 * N);
    for (int i = 0; i < 2 * N; i++)
        h[i] = i % 2 ? -7 : val(rank, i / 2, 4);
    int *sv = dev_alloc(sizeof(int) * 2 * N);
    to_dev(sv, h, sizeof(int) * 2 * N);
    MPI_File_write_at_all(fh, off, sv, 1, vec, MPI_STATUS_IGNORE);
    MPI_File_sync(fh);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_File_read_at(fh, off, r, N, MPI_INT, MPI_STATUS_IGNORE);
    ok = dev_check(r, N, rank, 4);
    for (int i = 0; i < 2 * N; i++)
        h[i] = -5;
    to_dev(sv, h, sizeof(int) * 2 * N);
    MPI_File_read_at_all(fh, off, sv, 1, vec, MPI_STATUS_IGNORE);
    from_dev(h, sv, sizeof(int) * 2 * N);
    for (int i = 0; i < 2 * N; i++)
        ok &= h[i] == (i % 2 ? -5 : val(rank, i / 2, 4));
    check(ok, "vector type on device memory: written packed, read back strided, gaps kept");
    MPI_Type_free(&vec);
    free(h);
    dev_free(sv);

    /* shared file pointer, ordered */
    MPI_File_seek_shared(fh, 0, MPI_SEEK_SET);
    dev_free(w);
    w = dev_vals(N, rank, 5);
    MPI_File_write_ordered(fh, w, N, MPI_INT, MPI_STATUS_IGNORE);
    MPI_File_sync(fh);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_File_seek_shared(fh, 0, MPI_SEEK_SET);
    MPI_File_read_ordered(fh, r, N, MPI_INT, MPI_STATUS_IGNORE);
    check(dev_check(r, N, rank, 5), "write_ordered / read_ordered");

    MPI_File_close(&fh);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        MPI_File_delete(path, MPI_INFO_NULL);
    dev_free(w);
    dev_free(r);
    MPI_Finalize();
    if (rank == 0)
        printf("1..%d\n", tap_ntest);
    return 0;
}
