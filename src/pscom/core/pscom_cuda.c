/*
 * Device memory (CUDA): the driver library is loaded at run time when PSP_CUDA=1, never linked,
 * so libpscom has no build-time CUDA dependency and costs nothing extra without it (one load of
 * pscom_cuda_on per query). Only the driver API is used: it is what every CUDA installation
 * has (libcuda.so.1 comes with the kernel driver), and what the tests' fake driver provides.
 *
 * What a layer above gets: is this pointer device memory (managed memory counts as host: the
 * CPU may touch it), copies in any direction, and host buffers for staging (page-locked when
 * the driver is there, so that copies run at full speed; a small cache keeps them, because
 * allocating page-locked memory costs a system call and a page-table walk).
 *
 * And device memory shared between processes of one node (CUDA IPC), for the device
 * rendezvous (pscom_rndv.c): the sender exports the allocation that holds its buffer, the
 * receiver opens it once (a cache keeps it open) and copies from it with one driver copy.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "pscom_priv.h"

/* The few driver types and values used here, as the driver API defines them (cuda.h). */
typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;
enum {
    CU_SUCCESS = 0,
    CU_ERROR_NO_DEVICE = 100,
    CU_POINTER_ATTRIBUTE_CONTEXT = 1,
    CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
    CU_POINTER_ATTRIBUTE_IS_MANAGED = 8,
    CU_MEMORYTYPE_DEVICE = 2,
    CU_MEMHOSTALLOC_PORTABLE = 1,
    CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1,
};
typedef struct {
    char reserved[PSCOM_GPU_IPC_HANDLE_SIZE];
} CUipcMemHandle;

static struct {
    CUresult (*init)(unsigned flags);
    CUresult (*device_get_count)(int *n);
    CUresult (*device_get)(CUdevice *dev, int ordinal);
    CUresult (*primary_ctx_retain)(CUcontext *ctx, CUdevice dev);
    CUresult (*ctx_get_current)(CUcontext *ctx);
    CUresult (*ctx_set_current)(CUcontext ctx);
    CUresult (*pointer_get_attributes)(unsigned n, int *attrs, void **data, CUdeviceptr ptr);
    CUresult (*memcpy)(CUdeviceptr dst, CUdeviceptr src, size_t len);
    CUresult (*mem_host_alloc)(void **p, size_t len, unsigned flags);
    CUresult (*mem_free_host)(void *p);
    CUresult (*get_error_string)(CUresult err, const char **str);
    /* optional: device memory between processes (NULL: the driver has none) */
    CUresult (*mem_get_address_range)(CUdeviceptr *base, size_t *size, CUdeviceptr ptr);
    CUresult (*ipc_get_mem_handle)(CUipcMemHandle *handle, CUdeviceptr ptr);
    CUresult (*ipc_open_mem_handle)(CUdeviceptr *ptr, CUipcMemHandle handle, unsigned flags);
    CUresult (*ipc_close_mem_handle)(CUdeviceptr ptr);
} cu;

static void *cu_lib;
static int cuda_requested, enforce_staging, ipc_on;
static size_t ipc_min;
static const char *cuda_library;
PSCOM_API int pscom_cuda_on; /* pscom.h: read inline by pscom_is_gpu_mem() */

static const pscom_env_row_t cuda_env[] = {
    {"PSP_CUDA", "0",
     "Accept CUDA device memory in every call (CUDA-aware MPI). Loads the CUDA driver "
     "library at start; a warning, and host memory only, where it or a device is missing.",
     PSCOM_ENV_BOOL, &cuda_requested, 0, 0},
    {"PSP_CUDA_ENFORCE_STAGING", "0",
     "Copy device memory through host buffers on every path, also where a transport could "
     "move it directly (with PSP_CUDA=1).",
     PSCOM_ENV_BOOL, &enforce_staging, 0, 0},
    {"PSP_CUDA_LIBRARY", "libcuda.so.1", "The CUDA driver library loaded with PSP_CUDA=1.",
     PSCOM_ENV_STR, &cuda_library, 0, 0},
    {"PSP_CUDA_IPC", "1",
     "Messages of device memory between processes of one node go device to device: the "
     "receiver copies from the sender's memory (CUDA IPC) instead of both staging it.",
     PSCOM_ENV_BOOL, &ipc_on, 0, 0},
    {"PSP_CUDA_IPC_MIN", "32k",
     "Device messages of at least this many bytes go device to device (PSP_CUDA_IPC); "
     "smaller ones are staged, which costs less than opening the sender's memory.",
     PSCOM_ENV_SIZE, &ipc_min, 0, 0},
    {NULL, NULL, NULL, 0, NULL, 0, 0},
};

static const char *cu_error(CUresult err)
{
    const char *s = NULL;
    if (cu.get_error_string && cu.get_error_string(err, &s) == CU_SUCCESS && s)
        return s;
    return "unknown CUDA error";
}

static int load_driver(void)
{
    cu_lib = dlopen(cuda_library, RTLD_NOW | RTLD_LOCAL);
    if (!cu_lib) {
        pscom_log(1,
                  "PSP_CUDA=1 but the CUDA driver cannot be loaded (%s): device memory is "
                  "not supported in this run",
                  dlerror());
        return -1;
    }
    static const struct {
        const char *name;
        void **slot;
    } syms[] = {
        {"cuInit", (void **)&cu.init},
        {"cuDeviceGetCount", (void **)&cu.device_get_count},
        {"cuDeviceGet", (void **)&cu.device_get},
        {"cuDevicePrimaryCtxRetain", (void **)&cu.primary_ctx_retain},
        {"cuCtxGetCurrent", (void **)&cu.ctx_get_current},
        {"cuCtxSetCurrent", (void **)&cu.ctx_set_current},
        {"cuPointerGetAttributes", (void **)&cu.pointer_get_attributes},
        {"cuMemcpy", (void **)&cu.memcpy},
        {"cuMemHostAlloc", (void **)&cu.mem_host_alloc},
        {"cuMemFreeHost", (void **)&cu.mem_free_host},
        {"cuGetErrorString", (void **)&cu.get_error_string},
    };
    static const struct {
        const char *name[2]; /* the versioned name first */
        void **slot;
    } optional[] = {
        {{"cuMemGetAddressRange_v2", "cuMemGetAddressRange"}, (void **)&cu.mem_get_address_range},
        {{"cuIpcGetMemHandle", NULL}, (void **)&cu.ipc_get_mem_handle},
        {{"cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle"}, (void **)&cu.ipc_open_mem_handle},
        {{"cuIpcCloseMemHandle", NULL}, (void **)&cu.ipc_close_mem_handle},
    };
    for (size_t i = 0; i < sizeof(optional) / sizeof(optional[0]); i++)
        for (int k = 0; k < 2 && !*optional[i].slot && optional[i].name[k]; k++)
            *optional[i].slot = dlsym(cu_lib, optional[i].name[k]);
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        *syms[i].slot = dlsym(cu_lib, syms[i].name);
        if (!*syms[i].slot) {
            pscom_log(1,
                      "PSP_CUDA=1 but %s has no %s (driver too old?): device memory is not "
                      "supported in this run",
                      cuda_library, syms[i].name);
            return -1;
        }
    }
    CUresult err = cu.init(0);
    int n = 0;
    if (err == CU_SUCCESS)
        err = cu.device_get_count(&n);
    if (err != CU_SUCCESS || n == 0) {
        pscom_log(1, "PSP_CUDA=1 but %s: device memory is not supported in this run",
                  err == CU_SUCCESS || err == CU_ERROR_NO_DEVICE ? "this node has no CUDA device"
                                                                 : cu_error(err));
        return -1;
    }
    if (!cu.mem_get_address_range || !cu.ipc_get_mem_handle || !cu.ipc_open_mem_handle ||
        !cu.ipc_close_mem_handle)
        ipc_on = 0;
    pscom_log(3, "CUDA: driver %s loaded, %d device(s)%s%s", cuda_library, n,
              enforce_staging ? ", staging enforced" : "",
              ipc_on && !enforce_staging ? ", device to device between processes" : "");
    return 0;
}

void pscom_cuda_init(void)
{
    pscom_env_register("cuda", cuda_env);
    if (!cuda_requested)
        return;
    if (load_driver() == 0) {
        pscom_cuda_on = 1;
    } else if (cu_lib) {
        dlclose(cu_lib);
        cu_lib = NULL;
    }
}

/* The calling thread needs a current context for host allocations and copies: the one the
   application made current, else device 0's primary context (what the CUDA runtime uses). */
static __thread int have_context;

static int ensure_context(void)
{
    if (have_context)
        return 0;
    CUcontext ctx = NULL;
    if (cu.ctx_get_current(&ctx) == CU_SUCCESS && ctx) {
        have_context = 1;
        return 0;
    }
    CUdevice dev;
    CUresult err = cu.device_get(&dev, 0);
    if (err == CU_SUCCESS)
        err = cu.primary_ctx_retain(&ctx, dev);
    if (err == CU_SUCCESS)
        err = cu.ctx_set_current(ctx);
    if (err != CU_SUCCESS) {
        pscom_log(1, "CUDA: no context for this thread: %s", cu_error(err));
        return -1;
    }
    have_context = 1;
    return 0;
}

PSCOM_API int pscom_is_cuda_enabled(void)
{
    return pscom_cuda_on;
}

PSCOM_API int pscom_cuda_enforce_staging(void)
{
    return pscom_cuda_on && enforce_staging;
}

PSCOM_API int pscom_is_gpu_mem_query(const void *ptr)
{
    if (!pscom_cuda_on || !ptr)
        return 0;
    int type = 0;
    unsigned managed = 0;
    CUcontext ctx = NULL;
    int attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                   CU_POINTER_ATTRIBUTE_CONTEXT};
    void *data[] = {&type, &managed, &ctx};
    /* memory the driver does not know: success with type 0, or an error (older drivers) */
    if (cu.pointer_get_attributes(3, attrs, data, (CUdeviceptr)(uintptr_t)ptr) != CU_SUCCESS)
        return 0;
    return type == CU_MEMORYTYPE_DEVICE && !managed;
}

PSCOM_API pscom_err_t pscom_gpu_memcpy(void *dst, const void *src, size_t len)
{
    if (!len)
        return PSCOM_SUCCESS;
    if (!pscom_cuda_on) {
        memcpy(dst, src, len);
        return PSCOM_SUCCESS;
    }
    if (ensure_context() != 0)
        return PSCOM_ERR_IOERROR;
    /* unified addressing: the driver tells the direction from the two addresses */
    CUresult err = cu.memcpy((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, len);
    if (err != CU_SUCCESS) {
        pscom_log(1, "CUDA: copying %zu bytes %p -> %p failed: %s", len, src, dst, cu_error(err));
        return PSCOM_ERR_IOERROR;
    }
    return PSCOM_SUCCESS;
}

/* ---- device memory between processes (CUDA IPC) ---- */

int pscom_cuda_ipc_enabled(void)
{
    return pscom_cuda_on && ipc_on && !enforce_staging;
}

size_t pscom_cuda_ipc_min(void)
{
    return ipc_min;
}

int pscom_cuda_ipc_export(const void *ptr, rndv_gpu_t *out)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    CUipcMemHandle h;
    if (ensure_context() != 0)
        return -1;
    CUresult err = cu.mem_get_address_range(&base, &size, (CUdeviceptr)(uintptr_t)ptr);
    if (err == CU_SUCCESS)
        err = cu.ipc_get_mem_handle(&h, base);
    if (err != CU_SUCCESS) {
        pscom_log(2, "CUDA: device memory %p cannot be shared (%s): it is staged", ptr,
                  cu_error(err));
        return -1;
    }
    memcpy(out->ipc, h.reserved, sizeof(out->ipc));
    out->offset = (uint64_t)((uintptr_t)ptr - (uintptr_t)base);
    return 0;
}

/* Opened allocations of other processes: opening costs far more than a copy, and a driver
   maps one allocation only once per process. An open mapping keeps the allocation alive after
   its owner freed it, so the cache is small; the least recently used is closed. Callers hold
   the pscom lock. */
#define IPC_CACHE_SLOTS 16

static struct {
    CUipcMemHandle handle;
    CUdeviceptr mapped; /* 0: free */
    uint64_t used;
} ipc_cache[IPC_CACHE_SLOTS];
static uint64_t ipc_clock;

static CUdeviceptr ipc_open(const uint8_t *ipc)
{
    int slot = -1; /* a free one, else the least recently used */
    for (int i = 0; i < IPC_CACHE_SLOTS; i++) {
        if (!ipc_cache[i].mapped) {
            if (slot < 0 || ipc_cache[slot].mapped)
                slot = i;
            continue;
        }
        if (!memcmp(ipc_cache[i].handle.reserved, ipc, sizeof(CUipcMemHandle))) {
            ipc_cache[i].used = ++ipc_clock;
            return ipc_cache[i].mapped;
        }
        if (slot < 0 || (ipc_cache[slot].mapped && ipc_cache[i].used < ipc_cache[slot].used))
            slot = i;
    }
    if (ipc_cache[slot].mapped) {
        cu.ipc_close_mem_handle(ipc_cache[slot].mapped);
        ipc_cache[slot].mapped = 0;
    }
    CUipcMemHandle h;
    memcpy(h.reserved, ipc, sizeof(h.reserved));
    CUdeviceptr p = 0;
    CUresult err = cu.ipc_open_mem_handle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    if (err != CU_SUCCESS || !p) {
        pscom_log(2, "CUDA: the sender's device memory cannot be opened (%s): it is staged",
                  cu_error(err));
        return 0;
    }
    ipc_cache[slot].handle = h;
    ipc_cache[slot].mapped = p;
    ipc_cache[slot].used = ++ipc_clock;
    return p;
}

int pscom_cuda_ipc_copy(void *dst, const rndv_gpu_t *from, size_t len)
{
    if (!pscom_cuda_ipc_enabled() || ensure_context() != 0)
        return -1;
    CUdeviceptr src = ipc_open(from->ipc);
    if (!src)
        return -1;
    CUresult err = cu.memcpy((CUdeviceptr)(uintptr_t)dst, src + from->offset, len);
    if (err != CU_SUCCESS) {
        pscom_log(1, "CUDA: copying %zu bytes from the sender's device memory failed: %s", len,
                  cu_error(err));
        return -1;
    }
    return 0;
}

/* ---- host staging buffers ---- */

#define CACHE_SLOTS     8
#define CACHE_MAX_BYTES (64UL << 20) /* larger ones are given back at once */

static struct {
    void *p;
    size_t len;
} cache[CACHE_SLOTS];
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

/* A buffer of at least len bytes; its true size is returned in *cap for pscom_host_buffer_free. */
PSCOM_API void *pscom_host_buffer_alloc(size_t len, size_t *cap)
{
    if (!len)
        len = 1;
    if (!pscom_cuda_on) {
        *cap = len;
        return malloc(len);
    }
    pthread_mutex_lock(&cache_lock);
    int best = -1;
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (cache[i].p && cache[i].len >= len && (best < 0 || cache[i].len < cache[best].len))
            best = i;
    if (best >= 0) {
        void *p = cache[best].p;
        *cap = cache[best].len;
        cache[best].p = NULL;
        pthread_mutex_unlock(&cache_lock);
        return p;
    }
    pthread_mutex_unlock(&cache_lock);
    /* round up so that one buffer serves messages of similar sizes */
    size_t want = 4096;
    while (want < len && want < (SIZE_MAX >> 1))
        want <<= 1;
    void *p = NULL;
    if (ensure_context() == 0 &&
        cu.mem_host_alloc(&p, want, CU_MEMHOSTALLOC_PORTABLE) == CU_SUCCESS)
        *cap = want;
    else
        p = NULL;
    return p;
}

PSCOM_API void pscom_host_buffer_free(void *p, size_t cap)
{
    if (!p)
        return;
    if (!pscom_cuda_on) {
        free(p);
        return;
    }
    if (cap <= CACHE_MAX_BYTES) {
        pthread_mutex_lock(&cache_lock);
        /* an empty slot, else the smallest cached buffer makes room if it is smaller */
        int slot = 0;
        for (int i = 1; i < CACHE_SLOTS && cache[slot].p; i++)
            if (!cache[i].p || cache[i].len < cache[slot].len)
                slot = i;
        if (!cache[slot].p || cache[slot].len < cap) {
            void *old = cache[slot].p;
            cache[slot].p = p;
            cache[slot].len = cap;
            pthread_mutex_unlock(&cache_lock);
            if (old)
                cu.mem_free_host(old);
            return;
        }
        pthread_mutex_unlock(&cache_lock);
    }
    cu.mem_free_host(p);
}

void pscom_cuda_cleanup(void)
{
    if (!pscom_cuda_on)
        return;
    for (int i = 0; i < CACHE_SLOTS; i++) {
        if (cache[i].p)
            cu.mem_free_host(cache[i].p);
        cache[i].p = NULL;
    }
    for (int i = 0; i < IPC_CACHE_SLOTS; i++) {
        if (ipc_cache[i].mapped)
            cu.ipc_close_mem_handle(ipc_cache[i].mapped);
        ipc_cache[i].mapped = 0;
    }
    /* the driver stays loaded: its own exit handlers may still run */
}
