/* LD_PRELOAD into an MPI over UCX: WRAP_S dependent increments in front of every
   ucp_tag_send_nbx, i.e. more work on the send path (wraps.txt). gcc -O2 -shared -fPIC -o wraps.so
   wraps.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <stdint.h>
typedef void *(*fn_t)(void *, const void *, size_t, uint64_t, const void *);
static fn_t real;
static int n = -1;
static volatile int sink;
void *ucp_tag_send_nbx(void *ep, const void *b, size_t c, uint64_t t, const void *p)
{
    if (!real) {
        real = (fn_t)dlsym(RTLD_NEXT, "ucp_tag_send_nbx");
        const char *e = getenv("WRAP_S");
        n = e ? atoi(e) : 0;
    }
    for (int i = 0; i < n; i++)
        sink++;
    return real(ep, b, c, t, p);
}
