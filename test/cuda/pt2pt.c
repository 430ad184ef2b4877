/*
 * Point-to-point with device buffers (PSP_CUDA=1 and the fake driver, whose device memory the
 * CPU cannot touch: a path that forgets to stage dies with SIGSEGV). Every size class (0 B,
 * the send-now fast path, eager, rendezvous) in each direction device->device, device->host and
 * host->device around a ring; ANY_SOURCE into device memory; synchronous sends; a probed and
 * a matched-probe receive; non-contiguous types on both sides (a strided vector from the device
 * into a contiguous device buffer, and back); a late receiver and a truncated receive of large
 * messages (chunked sends of device memory). Run as: pt2pt [expect_cuda]; with 0 it only
 * checks that MPIX_Query_cuda_support() and MPI_INFO_ENV say no.
 */
#include <mpi-ext.h>
#include <string.h>
#include "../mpi/tap_mpi.h"
#include "cuda_test.h"

static int rank, size;

static unsigned char pattern(int src, size_t len, size_t i)
{
    return (unsigned char)(src * 31 + len * 7 + i * 13 + 1);
}

static void fill(unsigned char *host, int src, size_t len)
{
    for (size_t i = 0; i < len; i++)
        host[i] = pattern(src, len, i);
}

static int verify(const unsigned char *host, int src, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (host[i] != pattern(src, len, i)) {
            fprintf(stderr, "rank %d: byte %zu of %zu from %d is %u, not %u\n", rank, i, len, src,
                    host[i], pattern(src, len, i));
            return 0;
        }
    return 1;
}

/* buffer of len bytes in device (dev=1) or host memory, filled with src's pattern if src >= 0 */
static void *buffer(int dev, size_t len, int src)
{
    unsigned char *h = malloc(len ? len : 1);
    if (src >= 0)
        fill(h, src, len);
    else
        memset(h, 0xee, len);
    if (!dev)
        return h;
    void *d = dev_alloc(len);
    to_dev(d, h, len);
    free(h);
    return d;
}

static int check_buffer(int dev, void *buf, int src, size_t len)
{
    unsigned char *h = buf;
    if (dev) {
        h = malloc(len ? len : 1);
        from_dev(h, buf, len);
    }
    int ok = verify(h, src, len);
    if (dev)
        free(h);
    return ok;
}

static void release(int dev, void *buf)
{
    if (dev)
        dev_free(buf);
    else
        free(buf);
}

static const size_t sizes[] = {0, 1, 8, 100, 1024, 8192, 65536, 300000, 1 << 22};
#define N_SIZES (sizeof(sizes) / sizeof(sizes[0]))

/* ring: send to rank+1, receive from rank-1; sdev/rdev: where the buffers are */
static void ring(int sdev, int rdev, int sync)
{
    int ok = 1;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (size_t k = 0; k < N_SIZES; k++) {
        size_t len = sizes[k];
        void *s = buffer(sdev, len, rank), *r = buffer(rdev, len, -1);
        MPI_Request req;
        MPI_Status st;
        int count;
        MPI_Irecv(r, (int)len, MPI_BYTE, left, (int)k, MPI_COMM_WORLD, &req);
        if (sync)
            MPI_Ssend(s, (int)len, MPI_BYTE, right, (int)k, MPI_COMM_WORLD);
        else
            MPI_Send(s, (int)len, MPI_BYTE, right, (int)k, MPI_COMM_WORLD);
        MPI_Wait(&req, &st);
        MPI_Get_count(&st, MPI_BYTE, &count);
        ok &= (size_t)count == len && st.MPI_SOURCE == left && check_buffer(rdev, r, left, len);
        release(sdev, s);
        release(rdev, r);
    }
    char what[128];
    snprintf(what, sizeof(what), "ring%s %s -> %s, 0 B .. 4 MiB", sync ? " (Ssend)" : "",
             sdev ? "device" : "host", rdev ? "device" : "host");
    check(ok, what);
}

/* everyone sends to rank 0, which receives with MPI_ANY_SOURCE into device memory */
static void any_source(size_t len)
{
    int ok = 1;
    if (rank == 0) {
        void *r = buffer(1, len, -1);
        for (int i = 1; i < size; i++) {
            MPI_Status st;
            MPI_Recv(r, (int)len, MPI_BYTE, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &st);
            ok &= check_buffer(1, r, st.MPI_SOURCE, len);
        }
        release(1, r);
    } else {
        void *s = buffer(1, len, rank);
        MPI_Send(s, (int)len, MPI_BYTE, 0, 7, MPI_COMM_WORLD);
        release(1, s);
    }
    char what[96];
    snprintf(what, sizeof(what), "MPI_ANY_SOURCE into device memory, %zu B from each rank", len);
    check(ok, what);
}

/* probe, then receive; matched probe, then MPI_Mrecv; both into device memory */
static void probes(size_t len)
{
    int ok = 1;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    void *s = buffer(1, len, rank), *r = buffer(1, len, -1);
    MPI_Request req;
    MPI_Status st;
    MPI_Isend(s, (int)len, MPI_BYTE, right, 11, MPI_COMM_WORLD, &req);
    MPI_Probe(left, 11, MPI_COMM_WORLD, &st);
    int count;
    MPI_Get_count(&st, MPI_BYTE, &count);
    ok &= (size_t)count == len;
    MPI_Recv(r, count, MPI_BYTE, st.MPI_SOURCE, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    ok &= check_buffer(1, r, left, len);

    dev_set(r, 0, len);
    MPI_Message msg;
    MPI_Isend(s, (int)len, MPI_BYTE, right, 12, MPI_COMM_WORLD, &req);
    MPI_Mprobe(MPI_ANY_SOURCE, 12, MPI_COMM_WORLD, &msg, &st);
    MPI_Mrecv(r, (int)len, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    ok &= check_buffer(1, r, left, len);
    release(1, s);
    release(1, r);
    char what[96];
    snprintf(what, sizeof(what),
             "MPI_Probe + MPI_Recv, MPI_Mprobe + MPI_Mrecv into device memory, %zu B", len);
    check(ok, what);
}

/* a late receiver (the message waits unexpected, in chunks when it is chunked), a receive too
   small for the message (MPI_ERR_TRUNCATE), and a message after both */
static void late_and_truncated(size_t len)
{
    int ok = 1, right = (rank + 1) % size, left = (rank + size - 1) % size;
    void *s = buffer(1, len, rank), *r = buffer(1, len, -1), *small = buffer(1, len / 3, -1);
    MPI_Request req;
    MPI_Isend(s, (int)len, MPI_BYTE, right, 31, MPI_COMM_WORLD, &req);
    MPI_Barrier(MPI_COMM_WORLD); /* the receive is posted only now */
    MPI_Recv(r, (int)len, MPI_BYTE, left, 31, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    ok &= check_buffer(1, r, left, len);

    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Isend(s, (int)len, MPI_BYTE, right, 32, MPI_COMM_WORLD, &req);
    int err =
        MPI_Recv(small, (int)(len / 3), MPI_BYTE, left, 32, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int cls = -1;
    MPI_Error_class(err, &cls);
    ok &= cls == MPI_ERR_TRUNCATE;
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    /* what the too small buffer holds is not defined by MPI (UCX's tag matching leaves it) */

    dev_set(r, 0, len);
    MPI_Sendrecv(s, 1000, MPI_BYTE, right, 33, r, 1000, MPI_BYTE, left, 33, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    unsigned char *h2 = malloc(1000);
    from_dev(h2, r, 1000);
    for (size_t i = 0; i < 1000; i++)
        ok &= h2[i] == pattern(left, len, i);
    free(h2);
    release(1, s);
    release(1, r);
    release(1, small);
    char what[128];
    snprintf(what, sizeof(what),
             "late receiver, then a receive of a third of it (MPI_ERR_TRUNCATE), then the next "
             "message, %zu B",
             len);
    check(ok, what);
}

/* a vector of count blocks of 3 ints with stride 5 on the device, to and from contiguous */
static void vectors(int count)
{
    int ok = 1;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Datatype vec;
    MPI_Type_vector(count, 3, 5, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    size_t n = (size_t)count * 5, packed = (size_t)count * 3;
    int *h = malloc(n * sizeof(int)), *hc = malloc(packed * sizeof(int));
    for (size_t i = 0; i < n; i++)
        h[i] = (int)(rank * 1000003 + i);
    int *sv = dev_alloc(n * sizeof(int)), *rc = dev_alloc(packed * sizeof(int));
    to_dev(sv, h, n * sizeof(int));
    MPI_Sendrecv(sv, 1, vec, right, 21, rc, (int)packed, MPI_INT, left, 21, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    from_dev(hc, rc, packed * sizeof(int));
    for (size_t b = 0; b < (size_t)count; b++)
        for (size_t j = 0; j < 3; j++)
            ok &= hc[b * 3 + j] == (int)(left * 1000003 + b * 5 + j);

    /* back: contiguous from the device into a strided device buffer whose gaps must stay */
    int *rv = dev_alloc(n * sizeof(int));
    dev_set(rv, 0x5a, n * sizeof(int));
    MPI_Sendrecv(rc, (int)packed, MPI_INT, left, 22, rv, 1, vec, right, 22, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    from_dev(h, rv, n * sizeof(int));
    int gap;
    memset(&gap, 0x5a, sizeof(gap));
    for (size_t b = 0; b < (size_t)count; b++)
        for (size_t j = 0; j < 5; j++)
            ok &= h[b * 5 + j] == (j < 3 ? (int)(rank * 1000003 + b * 5 + j) : gap);
    dev_free(sv);
    dev_free(rc);
    dev_free(rv);
    free(h);
    free(hc);
    MPI_Type_free(&vec);
    char what[96];
    snprintf(what, sizeof(what), "vector of %d blocks device -> contiguous device and back", count);
    check(ok, what);
}

int main(int argc, char **argv)
{
    int expect = argc > 1 ? atoi(argv[1]) : 1;
    if (expect)
        cuda_test_init();
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    char val[MPI_MAX_INFO_VAL + 1] = "";
    int flag = 0;
    MPI_Info_get(MPI_INFO_ENV, "cuda_aware", MPI_MAX_INFO_VAL, val, &flag);
    int gpu = -1;
    MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &gpu);
    char what[160];
    snprintf(what, sizeof(what),
             "MPIX_Query_cuda_support() %d, MPIX_GPU_query_support(CUDA) %d, MPI_INFO_ENV "
             "cuda_aware \"%s\", MPIX_CUDA_AWARE_SUPPORT %d",
             MPIX_Query_cuda_support(), gpu, val, MPIX_CUDA_AWARE_SUPPORT);
    check(MPIX_Query_cuda_support() == expect && gpu == expect && flag &&
              !strcmp(val, expect ? "true" : "false") && MPIX_CUDA_AWARE_SUPPORT == 1,
          what);
    if (expect) {
        for (int sdev = 0; sdev < 2; sdev++)
            for (int rdev = 0; rdev < 2; rdev++)
                if (sdev || rdev)
                    ring(sdev, rdev, 0);
        ring(1, 1, 1);
        any_source(8);
        any_source(200000);
        probes(16);
        probes(500000);
        vectors(10);
        vectors(20000);
        late_and_truncated(300000);
        late_and_truncated(5 << 20);
    }
    MPI_Finalize();
    if (rank == 0)
        printf("1..%d\n", tap_ntest);
    return 0;
}
