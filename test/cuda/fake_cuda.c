/*
 * A fake CUDA driver (libcuda.so.1) for testing device-memory paths on machines without a GPU.
 *
 * Its "device memory" is address space the CPU cannot use: each allocation is a memfd mapped
 * twice, once PROT_NONE (the address handed out, what the application and MPI see) and once
 * read-write (the fake's own view). A copy function translates device addresses to the second
 * mapping; any other code that loads or stores through a device address gets SIGSEGV at once,
 * so a path that forgets to stage is found instead of silently working.
 *
 * Only the driver API that libpscom and the tests use is here. FAKE_CUDA_DEVICES=0 makes it a
 * driver without a device. Counters (fake_cuda_stats) let tests see that staging happened.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUstream;
typedef unsigned long long CUdeviceptr;

enum {
    SUCCESS = 0,
    ERROR_INVALID_VALUE = 1,
    ERROR_OUT_OF_MEMORY = 2,
    ERROR_NOT_INITIALIZED = 3,
    ERROR_NO_DEVICE = 100,
    ERROR_INVALID_DEVICE = 101,
    ATTR_CONTEXT = 1,
    ATTR_MEMORY_TYPE = 2,
    ATTR_DEVICE_POINTER = 3,
    ATTR_HOST_POINTER = 4,
    ATTR_IS_MANAGED = 8,
    ATTR_DEVICE_ORDINAL = 9,
    MEMORYTYPE_HOST = 1,
    MEMORYTYPE_DEVICE = 2,
};

#define MAX_ALLOCS 4096

static struct alloc {
    char *dev;    /* PROT_NONE: the device address */
    char *shadow; /* read-write view of the same pages */
    size_t len;   /* mapped length */
} allocs[MAX_ALLOCS];
static int n_allocs, initialized;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int fake_ctx; /* its address is the one context */
static __thread CUcontext current;

/* copies that touched device memory, and pinned host allocations */
unsigned long long fake_cuda_stats[2];

static struct alloc *find(const void *p)
{
    const char *c = p;
    for (int i = 0; i < n_allocs; i++)
        if (c >= allocs[i].dev && c < allocs[i].dev + allocs[i].len)
            return &allocs[i];
    return NULL;
}

/* where the CPU may touch the bytes of p (len of them), or NULL if they leave an allocation */
static char *cpu_view(const void *p, size_t len, int *is_dev)
{
    pthread_mutex_lock(&lock);
    struct alloc *a = find(p);
    char *v = NULL;
    *is_dev = a != NULL;
    if (!a)
        v = (char *)p;
    else if ((const char *)p + len <= a->dev + a->len)
        v = a->shadow + ((const char *)p - a->dev);
    pthread_mutex_unlock(&lock);
    return v;
}

CUresult cuInit(unsigned flags)
{
    (void)flags;
    const char *n = getenv("FAKE_CUDA_DEVICES");
    if (n && atoi(n) == 0)
        return ERROR_NO_DEVICE;
    initialized = 1;
    return SUCCESS;
}

CUresult cuDriverGetVersion(int *v)
{
    *v = 12000;
    return SUCCESS;
}

CUresult cuDeviceGetCount(int *n)
{
    if (!initialized)
        return ERROR_NOT_INITIALIZED;
    *n = 1;
    return SUCCESS;
}

CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
    if (!initialized)
        return ERROR_NOT_INITIALIZED;
    if (ordinal != 0)
        return ERROR_INVALID_DEVICE;
    *dev = 0;
    return SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
    if (!initialized)
        return ERROR_NOT_INITIALIZED;
    if (dev != 0)
        return ERROR_INVALID_DEVICE;
    *ctx = &fake_ctx;
    return SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *ctx)
{
    *ctx = current;
    return SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
    current = ctx;
    return SUCCESS;
}

CUresult cuGetErrorString(CUresult err, const char **s)
{
    switch (err) {
    case SUCCESS:
        *s = "no error";
        break;
    case ERROR_INVALID_VALUE:
        *s = "invalid argument";
        break;
    case ERROR_OUT_OF_MEMORY:
        *s = "out of memory";
        break;
    case ERROR_NOT_INITIALIZED:
        *s = "initialization error";
        break;
    case ERROR_NO_DEVICE:
        *s = "no CUDA-capable device is detected";
        break;
    default:
        *s = "unknown error";
    }
    return SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t len)
{
    if (!initialized)
        return ERROR_NOT_INITIALIZED;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t maplen = len ? (len + page - 1) / page * page : page;
    int fd = memfd_create("fake-cuda", MFD_CLOEXEC);
    if (fd < 0)
        return ERROR_OUT_OF_MEMORY;
    if (ftruncate(fd, (off_t)maplen) != 0) {
        close(fd);
        return ERROR_OUT_OF_MEMORY;
    }
    char *shadow = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    char *dev = mmap(NULL, maplen, PROT_NONE, MAP_SHARED, fd, 0);
    close(fd);
    if (shadow == MAP_FAILED || dev == MAP_FAILED) {
        if (shadow != MAP_FAILED)
            munmap(shadow, maplen);
        if (dev != MAP_FAILED)
            munmap(dev, maplen);
        return ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&lock);
    if (n_allocs == MAX_ALLOCS) {
        pthread_mutex_unlock(&lock);
        munmap(shadow, maplen);
        munmap(dev, maplen);
        return ERROR_OUT_OF_MEMORY;
    }
    allocs[n_allocs++] = (struct alloc){dev, shadow, maplen};
    pthread_mutex_unlock(&lock);
    *dptr = (CUdeviceptr)(uintptr_t)dev;
    return SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    pthread_mutex_lock(&lock);
    struct alloc *a = find((void *)(uintptr_t)dptr);
    if (!a || a->dev != (char *)(uintptr_t)dptr) {
        pthread_mutex_unlock(&lock);
        return ERROR_INVALID_VALUE;
    }
    struct alloc gone = *a;
    *a = allocs[--n_allocs];
    pthread_mutex_unlock(&lock);
    munmap(gone.dev, gone.len);
    munmap(gone.shadow, gone.len);
    return SUCCESS;
}

CUresult cuMemHostAlloc(void **p, size_t len, unsigned flags)
{
    (void)flags;
    if (!initialized)
        return ERROR_NOT_INITIALIZED;
    *p = malloc(len ? len : 1);
    if (!*p)
        return ERROR_OUT_OF_MEMORY;
    __atomic_add_fetch(&fake_cuda_stats[1], 1, __ATOMIC_RELAXED);
    return SUCCESS;
}

CUresult cuMemFreeHost(void *p)
{
    free(p);
    return SUCCESS;
}

CUresult cuPointerGetAttributes(unsigned n, int *attrs, void **data, CUdeviceptr ptr)
{
    pthread_mutex_lock(&lock);
    struct alloc *a = find((void *)(uintptr_t)ptr);
    pthread_mutex_unlock(&lock);
    for (unsigned i = 0; i < n; i++) {
        switch (attrs[i]) {
        case ATTR_CONTEXT:
            *(CUcontext *)data[i] = a ? &fake_ctx : NULL;
            break;
        case ATTR_MEMORY_TYPE: /* 0 for memory the driver does not know, as CUDA 11+ */
            *(unsigned *)data[i] = a ? MEMORYTYPE_DEVICE : 0;
            break;
        case ATTR_DEVICE_POINTER:
        case ATTR_HOST_POINTER:
            *(void **)data[i] = a ? (void *)(uintptr_t)ptr : NULL;
            break;
        case ATTR_IS_MANAGED:
            *(unsigned *)data[i] = 0;
            break;
        case ATTR_DEVICE_ORDINAL:
            *(int *)data[i] = a ? 0 : -2;
            break;
        default:
            return ERROR_INVALID_VALUE;
        }
    }
    return SUCCESS;
}

CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr ptr)
{
    pthread_mutex_lock(&lock);
    struct alloc *a = find((void *)(uintptr_t)ptr);
    pthread_mutex_unlock(&lock);
    if (!a)
        return ERROR_INVALID_VALUE; /* as the real one for memory it does not know */
    return cuPointerGetAttributes(1, &attr, &data, ptr);
}

static CUresult copy(CUdeviceptr dst, CUdeviceptr src, size_t len)
{
    if (!len)
        return SUCCESS;
    if (!initialized)
        return ERROR_NOT_INITIALIZED;
    if (!current)
        return ERROR_INVALID_VALUE; /* the real driver wants a current context too */
    int dev_d, dev_s;
    char *d = cpu_view((void *)(uintptr_t)dst, len, &dev_d);
    char *s = cpu_view((void *)(uintptr_t)src, len, &dev_s);
    if (!d || !s)
        return ERROR_INVALID_VALUE;
    memmove(d, s, len);
    if (dev_d || dev_s)
        __atomic_add_fetch(&fake_cuda_stats[0], 1, __ATOMIC_RELAXED);
    return SUCCESS;
}

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t len)
{
    return copy(dst, src, len);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t len)
{
    return copy(dst, (CUdeviceptr)(uintptr_t)src, len);
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t len)
{
    return copy((CUdeviceptr)(uintptr_t)dst, src, len);
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t len)
{
    return copy(dst, src, len);
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t len, CUstream stream)
{
    (void)stream;
    return copy(dst, src, len);
}

CUresult cuStreamSynchronize(CUstream stream)
{
    (void)stream;
    return SUCCESS;
}

CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t len)
{
    int is_dev;
    char *d = cpu_view((void *)(uintptr_t)dst, len, &is_dev);
    if (!d)
        return ERROR_INVALID_VALUE;
    memset(d, v, len);
    return SUCCESS;
}
