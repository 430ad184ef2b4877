/* LD_PRELOAD into an MPI over UCX: WRAP_N dependent increments in front of every
   ucp_worker_progress (a longer poll loop, wrap.txt), WRAP_S in front of every ucp_tag_send_nbx
   (more work on the send path, wraps.txt). gcc -O2 -shared -fPIC -o wrap.so wrap.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

static volatile int sink;

/* the real function, and on the first call the count from the environment */
static void *next(void *real, const char *sym, const char *var, int *n)
{
    if (real)
        return real;
    const char *e = getenv(var);
    *n = e ? atoi(e) : 0;
    return dlsym(RTLD_NEXT, sym);
}

static void spin(int n)
{
    for (int i = 0; i < n; i++)
        sink++;
}

typedef unsigned (*progress_fn)(void *);
unsigned ucp_worker_progress(void *w)
{
    static progress_fn real;
    static int n;
    real = (progress_fn)next((void *)real, "ucp_worker_progress", "WRAP_N", &n);
    spin(n);
    return real(w);
}

typedef void *(*send_fn)(void *, const void *, size_t, uint64_t, const void *);
void *ucp_tag_send_nbx(void *ep, const void *b, size_t c, uint64_t t, const void *p)
{
    static send_fn real;
    static int n;
    real = (send_fn)next((void *)real, "ucp_tag_send_nbx", "WRAP_S", &n);
    spin(n);
    return real(ep, b, c, t, p);
}
