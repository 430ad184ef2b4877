/*
 * The hardware floor of a shared-memory ping-pong: two processes pass a counter back and forth
 * through one cache line each way, nothing else. Any shm transport's small-message latency is
 * this plus its own work; the shm numbers of compare.sh are judged against it.
 *
 *   gcc -O2 -o _build/bench/cacheline_pp test/bench/cacheline_pp.c
 *   _build/bench/cacheline_pp [iterations]      (default 2000000)
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    _Alignas(64) atomic_uint v;
} line_t;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    unsigned n = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0) : 2000000u;
    line_t *l = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (l == MAP_FAILED || n == 0) {
        perror("cacheline_pp");
        return 1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    int child = pid == 0;
    line_t *in = &l[child], *out = &l[!child];
    double t0 = now_s();
    for (unsigned i = 1; i <= n; i++) {
        if (!child)
            atomic_store_explicit(&out->v, i, memory_order_release);
        while (atomic_load_explicit(&in->v, memory_order_acquire) != i)
            ;
        if (child)
            atomic_store_explicit(&out->v, i, memory_order_release);
    }
    double t = now_s() - t0;
    if (child)
        return 0;
    waitpid(pid, NULL, 0);
    printf("cache-line ping-pong: one-way %.1f ns (%u round trips)\n", t / n / 2 * 1e9, n);
    return 0;
}
