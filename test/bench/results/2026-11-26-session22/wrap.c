/* LD_PRELOAD into an MPI over UCX: WRAP_N dependent increments in front of every
   ucp_worker_progress, i.e. a longer poll loop (wrap.txt). gcc -O2 -shared -fPIC -o wrap.so wrap.c
   -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
typedef unsigned (*fn_t)(void *);
static fn_t real;
static int n = -1;
static volatile int sink;
unsigned ucp_worker_progress(void *w)
{
    if (!real) {
        real = (fn_t)dlsym(RTLD_NEXT, "ucp_worker_progress");
        const char *e = getenv("WRAP_N");
        n = e ? atoi(e) : 0;
    }
    for (int i = 0; i < n; i++)
        sink++;
    return real(w);
}
