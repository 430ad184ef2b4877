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
 *
 * CUDA IPC works between processes of one user: a handle names the exporter's pid and the
 * memfd it keeps open, and the importer maps that fd through /proc/PID/fd, twice as above.
 *
 * FAKE_CUDA_PAGEABLE_MAX=N: a cuMemcpy (the library's copy; the tests' own copies use
 * cuMemcpyHtoD/DtoH) of more than N bytes between device memory and host memory that did not
 * come from cuMemHostAlloc aborts: the library stages through page-locked memory. A copy from
 * another process's memory (IPC) into the application's host buffer is no staging: allowed.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
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
    ERROR_INVALID_HANDLE = 400,
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
    int fd;       /* the memfd (kept for IPC), -1 for memory opened from another process */
    unsigned long long serial; /* which allocation: fds and addresses are used again */
} allocs[MAX_ALLOCS];
static unsigned long long next_serial;

typedef struct {
    char reserved[64];
} CUipcMemHandle;

struct fake_ipc { /* what a CUipcMemHandle holds here: unique per allocation, as the driver's */
    char magic[8];
    int pid, fd;
    size_t len;
    unsigned long long serial;
};
static const char ipc_magic[8] = "fakeipc";
static int n_allocs, initialized;
static struct pinned {
    char *p;
    size_t len;
} pinned[MAX_ALLOCS]; /* cuMemHostAlloc's buffers */
static int n_pinned;
static long long pageable_max = -1; /* FAKE_CUDA_PAGEABLE_MAX, -1: no check */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int fake_ctx; /* its address is the one context */
static __thread CUcontext current;

/* copies that touched device memory, pinned host allocations, IPC opens */
unsigned long long fake_cuda_stats[3];

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
    const char *m = getenv("FAKE_CUDA_PAGEABLE_MAX");
    if (m && *m)
        pageable_max = atoll(m);
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

/* fd's maplen bytes as device memory; keep_fd: the allocation keeps fd (for IPC) */
static CUresult map_device(int fd, size_t maplen, int keep_fd, CUdeviceptr *dptr)
{
    char *shadow = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    char *dev = mmap(NULL, maplen, PROT_NONE, MAP_SHARED, fd, 0);
    if (!keep_fd)
        close(fd);
    if (shadow == MAP_FAILED || dev == MAP_FAILED) {
        if (shadow != MAP_FAILED)
            munmap(shadow, maplen);
        if (dev != MAP_FAILED)
            munmap(dev, maplen);
        if (keep_fd)
            close(fd);
        return ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&lock);
    if (n_allocs == MAX_ALLOCS) {
        pthread_mutex_unlock(&lock);
        munmap(shadow, maplen);
        munmap(dev, maplen);
        if (keep_fd)
            close(fd);
        return ERROR_OUT_OF_MEMORY;
    }
    allocs[n_allocs++] = (struct alloc){dev, shadow, maplen, keep_fd ? fd : -1, ++next_serial};
    pthread_mutex_unlock(&lock);
    *dptr = (CUdeviceptr)(uintptr_t)dev;
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
    return map_device(fd, maplen, 1, dptr);
}

/* own: cuMemFree (memory of ours), else cuIpcCloseMemHandle (another process's) */
static CUresult unmap_device(CUdeviceptr dptr, int own)
{
    pthread_mutex_lock(&lock);
    struct alloc *a = find((void *)(uintptr_t)dptr);
    if (!a || a->dev != (char *)(uintptr_t)dptr || (a->fd >= 0) != own) {
        pthread_mutex_unlock(&lock);
        return ERROR_INVALID_VALUE;
    }
    struct alloc gone = *a;
    *a = allocs[--n_allocs];
    pthread_mutex_unlock(&lock);
    munmap(gone.dev, gone.len);
    munmap(gone.shadow, gone.len);
    if (gone.fd >= 0)
        close(gone.fd);
    return SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    return unmap_device(dptr, 1);
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr ptr)
{
    pthread_mutex_lock(&lock);
    struct alloc *a = find((void *)(uintptr_t)ptr);
    if (a) {
        *base = (CUdeviceptr)(uintptr_t)a->dev;
        *size = a->len;
    }
    pthread_mutex_unlock(&lock);
    return a ? SUCCESS : ERROR_INVALID_VALUE;
}

CUresult cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr ptr)
{
    pthread_mutex_lock(&lock);
    struct alloc *a = find((void *)(uintptr_t)ptr);
    struct fake_ipc h = {.pid = (int)getpid(),
                         .fd = a ? a->fd : -1,
                         .len = a ? a->len : 0,
                         .serial = a ? a->serial : 0};
    pthread_mutex_unlock(&lock);
    if (!a || a->dev != (char *)(uintptr_t)ptr || h.fd < 0)
        return ERROR_INVALID_VALUE;
    memcpy(h.magic, ipc_magic, sizeof(h.magic));
    memset(handle, 0, sizeof(*handle));
    memcpy(handle->reserved, &h, sizeof(h));
    return SUCCESS;
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *dptr, CUipcMemHandle handle, unsigned flags)
{
    (void)flags;
    struct fake_ipc h;
    memcpy(&h, handle.reserved, sizeof(h));
    if (!initialized)
        return ERROR_NOT_INITIALIZED;
    if (memcmp(h.magic, ipc_magic, sizeof(h.magic)) || h.pid == (int)getpid())
        return ERROR_INVALID_HANDLE; /* the real driver, too, opens no memory of its own */
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", h.pid, h.fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return ERROR_INVALID_HANDLE;
    CUresult err = map_device(fd, h.len, 0, dptr);
    if (err == SUCCESS)
        __atomic_add_fetch(&fake_cuda_stats[2], 1, __ATOMIC_RELAXED);
    return err;
}

CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    return unmap_device(dptr, 0);
}

CUresult cuMemHostAlloc(void **p, size_t len, unsigned flags)
{
    (void)flags;
    if (!initialized)
        return ERROR_NOT_INITIALIZED;
    *p = malloc(len ? len : 1);
    if (!*p)
        return ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&lock);
    if (n_pinned < MAX_ALLOCS)
        pinned[n_pinned++] = (struct pinned){*p, len};
    pthread_mutex_unlock(&lock);
    __atomic_add_fetch(&fake_cuda_stats[1], 1, __ATOMIC_RELAXED);
    return SUCCESS;
}

CUresult cuMemFreeHost(void *p)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_pinned; i++)
        if (pinned[i].p == p) {
            pinned[i] = pinned[--n_pinned];
            break;
        }
    pthread_mutex_unlock(&lock);
    free(p);
    return SUCCESS;
}

static int is_imported(CUdeviceptr p)
{
    pthread_mutex_lock(&lock);
    struct alloc *a = find((void *)(uintptr_t)p);
    int yes = a && a->fd < 0;
    pthread_mutex_unlock(&lock);
    return yes;
}

static int is_pinned(const char *p, size_t len)
{
    int yes = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_pinned && !yes; i++)
        yes = p >= pinned[i].p && p + len <= pinned[i].p + pinned[i].len;
    pthread_mutex_unlock(&lock);
    return yes;
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

/* check: the caller is the library, whose host side must be page-locked (FAKE_CUDA_PAGEABLE_MAX) */
static CUresult copy(CUdeviceptr dst, CUdeviceptr src, size_t len, int check)
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
    /* from another process's memory (IPC) straight to where the receiver wants it: that is
       the application's memory, no staging */
    if (check && pageable_max >= 0 && (long long)len > pageable_max && dev_d != dev_s &&
        !(dev_s && is_imported(src)) && !is_pinned(dev_d ? s : d, len)) {
        fprintf(stderr, "fake CUDA: a copy of %zu bytes %s pageable host memory %p\n", len,
                dev_d ? "from" : "to", (void *)(dev_d ? s : d));
        abort();
    }
    memmove(d, s, len);
    if (dev_d || dev_s)
        __atomic_add_fetch(&fake_cuda_stats[0], 1, __ATOMIC_RELAXED);
    return SUCCESS;
}

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t len)
{
    return copy(dst, src, len, 1);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t len)
{
    return copy(dst, (CUdeviceptr)(uintptr_t)src, len, 0);
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t len)
{
    return copy((CUdeviceptr)(uintptr_t)dst, src, len, 0);
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t len)
{
    return copy(dst, src, len, 0);
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t len, CUstream stream)
{
    (void)stream;
    return copy(dst, src, len, 1);
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
