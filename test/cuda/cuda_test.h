/*
 * The CUDA driver API the tests use, declared here so that they build without the CUDA
 * toolkit: against test/cuda/fake_cuda.c (libcuda.so.1 of the tests) or a real driver.
 */
#ifndef CUDA_TEST_H_INCLUDED
#define CUDA_TEST_H_INCLUDED

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;

CUresult cuInit(unsigned flags);
CUresult cuDeviceGet(CUdevice *dev, int ordinal);
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t len);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t len);
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t len);
CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t len);

/* device 0's primary context current in this thread; exits on failure */
static inline void cuda_test_init(void)
{
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx)) {
        fprintf(stderr, "no CUDA device\n");
        exit(2);
    }
}

static inline void *dev_alloc(size_t len)
{
    CUdeviceptr p;
    if (cuMemAlloc_v2(&p, len ? len : 1)) {
        fprintf(stderr, "cuMemAlloc of %zu bytes failed\n", len);
        exit(2);
    }
    return (void *)(size_t)p;
}

static inline void dev_free(void *p)
{
    cuMemFree_v2((CUdeviceptr)(size_t)p);
}

static inline void to_dev(void *dst, const void *src, size_t len)
{
    if (len && cuMemcpyHtoD_v2((CUdeviceptr)(size_t)dst, src, len))
        abort();
}

static inline void from_dev(void *dst, const void *src, size_t len)
{
    if (len && cuMemcpyDtoH_v2(dst, (CUdeviceptr)(size_t)src, len))
        abort();
}

static inline void dev_set(void *dst, unsigned char v, size_t len)
{
    if (len && cuMemsetD8_v2((CUdeviceptr)(size_t)dst, v, len))
        abort();
}

#endif /* CUDA_TEST_H_INCLUDED */
