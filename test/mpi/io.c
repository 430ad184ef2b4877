/*
 * MPI-IO (ROMIO):  io DIR
 * Every rank writes its block of a shared file in DIR collectively (MPI_File_write_at_all),
 * then the file is read back collectively through file views that interleave the ranks
 * (MPI_Type_vector, a 2-d MPI_Type_create_subarray), written again through a subarray view and
 * checked byte for byte with independent reads, nonblocking I/O, shared file pointer
 * (MPI_File_write_ordered), MPI_File_get_size / set_size, MPI_File_delete.
 * Rank 0 prints TAP; every check is ANDed over all ranks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap_mpi.h"

enum { N = 4096, B = 16, C = 64 }; /* ints per rank; vector block; matrix columns */

static int rank, size;

static int file_error(int err, const char *what)
{
    if (err == MPI_SUCCESS)
        return 1;
    char msg[MPI_MAX_ERROR_STRING];
    int len;
    MPI_Error_string(err, msg, &len);
    printf("# rank %d: %s: %s\n", rank, what, msg);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2 || C % size != 0) {
        if (rank == 0)
            printf("1..0 # SKIP usage: io DIR, with a number of ranks that divides %d\n", C);
        MPI_Finalize();
        return argc < 2;
    }
    if (rank == 0)
        printf("1..11\n");

    char path[4096], path2[4096];
    snprintf(path, sizeof(path), "%s/io-blocks.dat", argv[1]);
    snprintf(path2, sizeof(path2), "%s/io-columns.dat", argv[1]);
    const MPI_Offset total = (MPI_Offset)size * N * sizeof(int);
    int *buf = malloc(N * sizeof(int)), *in = malloc(N * sizeof(int));
    int ok, err, count;
    MPI_File fh;
    MPI_Status st;

    /* 1. each rank its block, collectively: file int i holds the value i */
    for (int i = 0; i < N; i++)
        buf[i] = rank * N + i;
    err = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    ok = file_error(err, "MPI_File_open");
    if (!ok)
        fh = MPI_FILE_NULL;
    check(ok, "MPI_File_open (create, read-write) of a file shared by all ranks");
    if (fh == MPI_FILE_NULL) {
        MPI_Finalize();
        return 1;
    }
    err = MPI_File_write_at_all(fh, (MPI_Offset)rank * N * sizeof(int), buf, N, MPI_INT, &st);
    ok = file_error(err, "MPI_File_write_at_all");
    MPI_Get_count(&st, MPI_INT, &count);
    ok = ok && count == N;
    err = MPI_File_sync(fh);
    ok = ok && file_error(err, "MPI_File_sync");
    MPI_Offset fsize = -1;
    MPI_File_get_size(fh, &fsize);
    check(ok && fsize == total,
          "MPI_File_write_at_all of each rank's block (count from the status), sync, "
          "MPI_File_get_size = ranks * 16 KiB");

    /* 2. read back through a vector view: rank r sees blocks r, r+size, r+2*size ... of B ints */
    MPI_Datatype vec;
    MPI_Type_vector(N / B, B, size * B, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    memset(in, 0xff, N * sizeof(int));
    err = MPI_File_set_view(fh, (MPI_Offset)rank * B * sizeof(int), MPI_INT, vec, "native",
                            MPI_INFO_NULL);
    ok = file_error(err, "MPI_File_set_view (vector)");
    err = MPI_File_read_all(fh, in, N, MPI_INT, &st);
    ok = ok && file_error(err, "MPI_File_read_all (vector view)");
    MPI_Get_count(&st, MPI_INT, &count);
    ok = ok && count == N;
    for (int k = 0; k < N / B; k++)
        for (int j = 0; j < B; j++)
            ok = ok && in[k * B + j] == (k * size + rank) * B + j;
    check(ok, "MPI_File_read_all through an MPI_Type_vector view interleaving the ranks");

    /* 3. the file as a (size*N/C) x C matrix of ints: rank r reads columns r*C/size.. */
    int rows = size * N / C, cols = C / size;
    int sizes[2] = {rows, C}, subsizes[2] = {rows, cols}, starts[2] = {0, rank * cols};
    MPI_Datatype sub;
    MPI_Type_create_subarray(2, sizes, subsizes, starts, MPI_ORDER_C, MPI_INT, &sub);
    MPI_Type_commit(&sub);
    memset(in, 0xff, N * sizeof(int));
    err = MPI_File_set_view(fh, 0, MPI_INT, sub, "native", MPI_INFO_NULL);
    ok = file_error(err, "MPI_File_set_view (subarray)");
    err = MPI_File_read_at_all(fh, 0, in, N, MPI_INT, &st);
    ok = ok && file_error(err, "MPI_File_read_at_all (subarray view)");
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            ok = ok && in[i * cols + j] == i * C + rank * cols + j;
    check(ok, "MPI_File_read_at_all through a 2-d MPI_Type_create_subarray view (column blocks)");
    MPI_File_close(&fh);

    /* 4. a second file written through the subarray view: column block r from rank r; then
     *    every rank reads the whole file independently and checks every int */
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            buf[i * cols + j] = -(i * C + rank * cols + j) - 1;
    err = MPI_File_open(MPI_COMM_WORLD, path2, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL,
                        &fh);
    ok = file_error(err, "MPI_File_open (second file)");
    if (ok) {
        err = MPI_File_set_view(fh, 0, MPI_INT, sub, "native", MPI_INFO_NULL);
        ok = file_error(err, "MPI_File_set_view (subarray, write)");
        err = MPI_File_write_all(fh, buf, N, MPI_INT, &st);
        ok = ok && file_error(err, "MPI_File_write_all (subarray view)");
        err = MPI_File_close(&fh);
        ok = ok && file_error(err, "MPI_File_close");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    int *whole = malloc(total);
    if (ok) {
        err = MPI_File_open(MPI_COMM_SELF, path2, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
        ok = file_error(err, "MPI_File_open (MPI_COMM_SELF, read-only)");
    }
    if (ok) {
        err = MPI_File_read_at(fh, 0, whole, size * N, MPI_INT, &st);
        ok = file_error(err, "MPI_File_read_at (whole file)");
        MPI_Get_count(&st, MPI_INT, &count);
        ok = ok && count == size * N;
        for (int i = 0; ok && i < size * N; i++)
            ok = whole[i] == -i - 1;
        MPI_File_close(&fh);
    }
    check(ok, "MPI_File_write_all through the subarray view: the whole file read back by every "
              "rank (MPI_COMM_SELF, MPI_File_read_at) is right");

    /* 5. nonblocking: each rank reads the block of the next rank with MPI_File_iread_at and
     *    overwrites its own with MPI_File_iwrite_at (values +1), then waits */
    int next = (rank + 1) % size;
    err = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    ok = file_error(err, "MPI_File_open (reopen)");
    if (!ok)
        fh = MPI_FILE_NULL;
    if (ok) {
        MPI_Request req[2];
        MPI_Status sts[1];
        memset(in, 0xff, N * sizeof(int));
        MPI_File_iread_at(fh, (MPI_Offset)next * N * sizeof(int), in, N, MPI_INT, &req[0]);
        MPI_Waitall(1, req, sts);
        MPI_Get_count(&sts[0], MPI_INT, &count);
        ok = count == N;
        for (int i = 0; i < N; i++)
            ok = ok && in[i] == next * N + i;
        MPI_Barrier(MPI_COMM_WORLD); /* everyone has read before anyone writes */
        for (int i = 0; i < N; i++)
            buf[i] = rank * N + i + 1;
        MPI_File_iwrite_at(fh, (MPI_Offset)rank * N * sizeof(int), buf, N, MPI_INT, &req[1]);
        int done = 0;
        while (!done) /* MPI_Test drives the generalized request */
            MPI_Test(&req[1], &done, &st);
        MPI_Get_count(&st, MPI_INT, &count);
        ok = ok && count == N;
        MPI_File_sync(fh);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_File_sync(fh);
        MPI_File_read_at(fh, (MPI_Offset)next * N * sizeof(int), in, N, MPI_INT, &st);
        for (int i = 0; i < N; i++)
            ok = ok && in[i] == next * N + i + 1;
    }
    check(ok, "MPI_File_iread_at / MPI_File_iwrite_at (Waitall, Test loop), the next rank's "
              "block seen before and after");

    /* 6. shared file pointer: MPI_File_write_ordered, rank r writes r+1 ints of value r */
    if (ok) {
        int mine[64];
        for (int i = 0; i <= rank; i++)
            mine[i] = rank;
        MPI_File_set_size(fh, 0);
        MPI_File_seek_shared(fh, 0, MPI_SEEK_SET);
        err = MPI_File_write_ordered(fh, mine, rank + 1, MPI_INT, &st);
        ok = file_error(err, "MPI_File_write_ordered");
        MPI_File_sync(fh);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_File_sync(fh);
        int n = size * (size + 1) / 2, pos = 0;
        MPI_File_get_size(fh, &fsize);
        ok = ok && fsize == (MPI_Offset)(n * sizeof(int));
        MPI_File_read_at(fh, 0, whole, n, MPI_INT, &st);
        for (int r = 0; r < size; r++)
            for (int i = 0; i <= r; i++)
                ok = ok && whole[pos++] == r;
    }
    check(ok, "MPI_File_set_size(0), MPI_File_write_ordered: ranks' pieces in rank order");

    /* 7. MPI_File_set_size grows the file; get_size and position agree */
    if (fh != MPI_FILE_NULL) {
        MPI_Offset grow = 3 * total + 5;
        err = MPI_File_set_size(fh, grow);
        ok = ok && file_error(err, "MPI_File_set_size");
        MPI_File_get_size(fh, &fsize);
        ok = ok && fsize == grow;
        MPI_File_close(&fh);
    }
    check(ok && fh == MPI_FILE_NULL, "MPI_File_set_size grows the file, MPI_File_close gives "
                                     "MPI_FILE_NULL");

    /* 8. MPI_File_delete (rank 0) removes it: afterwards opening it fails with
     *    MPI_ERR_NO_SUCH_FILE on every rank, and the other file is deleted too */
    MPI_Barrier(MPI_COMM_WORLD);
    ok = 1;
    if (rank == 0) {
        err = MPI_File_delete(path, MPI_INFO_NULL);
        ok = file_error(err, "MPI_File_delete");
        err = MPI_File_delete(path2, MPI_INFO_NULL);
        ok = ok && file_error(err, "MPI_File_delete (second file)");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    ok = ok && access(path, F_OK) != 0 && errno == ENOENT && access(path2, F_OK) != 0;
    err = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    int cls = MPI_SUCCESS;
    MPI_Error_class(err, &cls);
    ok = ok && cls == MPI_ERR_NO_SUCH_FILE;
    if (err == MPI_SUCCESS)
        MPI_File_close(&fh);
    check(ok, "MPI_File_delete: files gone, MPI_File_open fails with MPI_ERR_NO_SUCH_FILE");

    /* 9. deleting a file that is not there: MPI_ERR_NO_SUCH_FILE (the default file error
     *    handler returns errors) */
    err = MPI_File_delete(path, MPI_INFO_NULL);
    MPI_Error_class(err, &cls);
    check(cls == MPI_ERR_NO_SUCH_FILE, "MPI_File_delete of a missing file: MPI_ERR_NO_SUCH_FILE");

    /* 10. MPI_MODE_EXCL|MPI_MODE_CREATE on an existing file fails; MPI_MODE_DELETE_ON_CLOSE */
    err = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_WRONLY |
                        MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh);
    ok = file_error(err, "MPI_File_open (create, exclusive, delete on close)");
    if (ok) {
        MPI_File fh2;
        MPI_Barrier(MPI_COMM_WORLD);
        err = MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_WRONLY,
                            MPI_INFO_NULL, &fh2);
        MPI_Error_class(err, &cls);
        ok = err != MPI_SUCCESS && cls == MPI_ERR_FILE_EXISTS;
        if (err == MPI_SUCCESS)
            MPI_File_close(&fh2);
        MPI_File_close(&fh);
        MPI_Barrier(MPI_COMM_WORLD);
        ok = ok && access(path, F_OK) != 0;
    }
    check(ok, "MPI_MODE_EXCL on an existing file: MPI_ERR_FILE_EXISTS; MPI_MODE_DELETE_ON_CLOSE "
              "removes it");

    MPI_Type_free(&vec);
    MPI_Type_free(&sub);
    free(whole);
    free(buf);
    free(in);
    MPI_Finalize();
    return 0;
}
