/*
 * CUDA-aware MPI on a real GPU (test/cuda/gpu-check.sh): 2 ranks on one GPU exchange device
 * memory (point-to-point in every direction, a collective, RMA) and a kernel checks the data on
 * the device; then device-to-device and host-to-host ping-pong latency and bandwidth from 8 B
 * to 64 MiB through the same transport. TAP on stdout (rank 0), the table as comments.
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <mpi-ext.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, ntest, failed;

static void check(int ok, const char *what)
{
    int all;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s %d - %s\n", all ? "ok" : "not ok", ++ntest, what);
    failed += !all;
    fflush(stdout);
}

static void fail(const char *what, cudaError_t e)
{
    int up = 0;
    fprintf(stderr, "rank %d: %s: %s\n", rank, what, cudaGetErrorString(e));
    MPI_Initialized(&up);
    if (up)
        MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

#define CU(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            fail(#call, e_);                                                                       \
    } while (0)

__device__ unsigned char pattern(int src, size_t len, size_t i)
{
    return (unsigned char)(src * 31 + len * 7 + i * 13 + 1);
}

__global__ void fill(unsigned char *p, int src, size_t len)
{
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < len; i += gridDim.x * blockDim.x)
        p[i] = pattern(src, len, i);
}

__global__ void verify(const unsigned char *p, int src, size_t len, int *bad)
{
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < len; i += gridDim.x * blockDim.x)
        if (p[i] != pattern(src, len, i))
            atomicAdd(bad, 1);
}

static int *bad_d;

/* the device's own verdict on len bytes at p */
static int dev_ok(const void *p, int src, size_t len)
{
    int bad = 0;
    CU(cudaMemset(bad_d, 0, sizeof(int)));
    if (len)
        verify<<<64, 256>>>((const unsigned char *)p, src, len, bad_d);
    CU(cudaMemcpy(&bad, bad_d, sizeof(int), cudaMemcpyDeviceToHost));
    return bad == 0;
}

static void exchanges(void)
{
    const size_t sizes[] = {0, 8, 4096, 65536, 1 << 20, 16 << 20};
    int peer = 1 - rank, ok = 1;
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t len = sizes[k];
        unsigned char *s, *r, *h = (unsigned char *)malloc(len + 1);
        CU(cudaMalloc(&s, len + 1));
        CU(cudaMalloc(&r, len + 1));
        if (len)
            fill<<<64, 256>>>(s, rank, len);
        CU(cudaDeviceSynchronize());
        /* device -> device */
        MPI_Sendrecv(s, (int)len, MPI_BYTE, peer, 1, r, (int)len, MPI_BYTE, peer, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        ok &= dev_ok(r, peer, len);
        /* device -> host, then host -> device */
        MPI_Sendrecv(s, (int)len, MPI_BYTE, peer, 2, h, (int)len, MPI_BYTE, peer, 2, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        CU(cudaMemset(r, 0, len + 1));
        MPI_Sendrecv(h, (int)len, MPI_BYTE, peer, 3, r, (int)len, MPI_BYTE, peer, 3, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        ok &= dev_ok(r, rank, len); /* the peer sent back what it got from us */
        CU(cudaFree(s));
        CU(cudaFree(r));
        free(h);
    }
    check(ok, "point-to-point device<->device, device->host, host->device, 0 B .. 16 MiB, "
              "verified on the device");

    /* Allreduce of ints on the device */
    const int n = 1 << 20;
    int *a, *res = (int *)malloc(sizeof(int) * n), *init = (int *)malloc(sizeof(int) * n);
    for (int i = 0; i < n; i++)
        init[i] = rank + i;
    CU(cudaMalloc(&a, sizeof(int) * n));
    CU(cudaMemcpy(a, init, sizeof(int) * n, cudaMemcpyHostToDevice));
    MPI_Allreduce(MPI_IN_PLACE, a, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CU(cudaMemcpy(res, a, sizeof(int) * n, cudaMemcpyDeviceToHost));
    ok = 1;
    for (int i = 0; i < n; i++)
        ok &= res[i] == 2 * i + 1;
    check(ok, "MPI_Allreduce in place on 4 MiB of device memory");

    /* RMA: put into the peer's device window */
    MPI_Win win;
    unsigned char *wbuf, *o;
    size_t wl = 1 << 20;
    CU(cudaMalloc(&wbuf, wl));
    CU(cudaMalloc(&o, wl));
    fill<<<64, 256>>>(o, rank, wl);
    CU(cudaDeviceSynchronize());
    MPI_Win_create(wbuf, wl, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_fence(0, win);
    MPI_Put(o, (int)wl, MPI_BYTE, peer, 0, (int)wl, MPI_BYTE, win);
    MPI_Win_fence(0, win);
    check(dev_ok(wbuf, peer, wl), "MPI_Put into a window in device memory (fence)");
    MPI_Win_free(&win);
    CU(cudaFree(wbuf));
    CU(cudaFree(o));
    free(res);
    free(init);
    CU(cudaFree(a));
}

/* one-way time (us) of a ping-pong of len bytes between buffers a (send) and b (receive) */
static double pingpong(void *a, void *b, size_t len, int iters)
{
    int peer = 1 - rank;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        if (rank == 0) {
            MPI_Send(a, (int)len, MPI_BYTE, peer, 9, MPI_COMM_WORLD);
            MPI_Recv(b, (int)len, MPI_BYTE, peer, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(b, (int)len, MPI_BYTE, peer, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(a, (int)len, MPI_BYTE, peer, 9, MPI_COMM_WORLD);
        }
    }
    return (MPI_Wtime() - t0) / iters / 2 * 1e6;
}

static void speed(void)
{
    size_t max = 64 << 20;
    void *da, *db, *ha, *hb;
    CU(cudaMalloc(&da, max));
    CU(cudaMalloc(&db, max));
    CU(cudaMemset(da, 1, max));
    ha = malloc(max);
    hb = malloc(max);
    memset(ha, 1, max);
    memset(hb, 0, max);
    double ratio4m;
    if (rank == 0)
        printf("# %10s %12s %12s %12s %12s %8s\n", "bytes", "d2d us", "h2h us", "d2d MB/s",
               "h2h MB/s", "d2d/h2h");
    for (size_t len = 8; len <= max; len *= 4) {
        int iters = len <= 65536 ? 1000 : len <= (4 << 20) ? 50 : 10;
        pingpong(da, db, len, 2); /* warm-up */
        double d = pingpong(da, db, len, iters);
        pingpong(ha, hb, len, 2);
        double h = pingpong(ha, hb, len, iters);
        if (rank == 0)
            printf("# %10zu %12.2f %12.2f %12.1f %12.1f %8.2f\n", len, d, h, len / d, len / h,
                   h / d);
    }
    /* 4 MiB is not a power of 4 times 8: measure it on its own */
    size_t len = 4 << 20;
    pingpong(da, db, len, 2);
    double d = pingpong(da, db, len, 50);
    pingpong(ha, hb, len, 2);
    double h = pingpong(ha, hb, len, 50);
    ratio4m = h / d;
    if (rank == 0)
        printf("# %10zu %12.2f %12.2f %12.1f %12.1f %8.2f  (the goal's row)\n", len, d, h, len / d,
               len / h, ratio4m);
    CU(cudaFree(da));
    CU(cudaFree(db));
    free(ha);
    free(hb);
    if (rank == 0)
        printf("# device-to-device bandwidth at 4 MiB: %.2f x host-to-host (goal >= 0.70)\n",
               ratio4m);
}

int main(int argc, char **argv)
{
    int dev_count = 0;
    CU(cudaGetDeviceCount(&dev_count));
    CU(cudaSetDevice(0));
    CU(cudaFree(0)); /* the context exists before MPI looks at pointers */
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CU(cudaMalloc(&bad_d, sizeof(int)));
    if (rank == 0) {
        cudaDeviceProp p;
        CU(cudaGetDeviceProperties(&p, 0));
        printf("# GPU: %s, %d device(s), MPIX_Query_cuda_support() = %d\n", p.name, dev_count,
               MPIX_Query_cuda_support());
    }
    check(size == 2, "2 ranks");
    check(MPIX_Query_cuda_support() == 1, "MPIX_Query_cuda_support() is 1 (PSP_CUDA=1)");
    if (size == 2 && MPIX_Query_cuda_support() == 1) {
        exchanges();
        if (argc < 2 || strcmp(argv[1], "--no-speed"))
            speed();
    }
    CU(cudaFree(bad_d));
    MPI_Finalize();
    if (rank == 0)
        printf("1..%d\n", ntest);
    return failed ? 1 : 0;
}
