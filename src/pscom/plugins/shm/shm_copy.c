/* Cooperative single-copy rendezvous: see shm_copy.h. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include "pscom_plugin.h"
#include "shm_copy.h"

#define CHUNK_MIN   (64u << 10)
#define MAX_CHUNKS  ((1u << 20) - 1)
#define SPIN_YIELD  64 /* polls of the done word before we start to yield */
#define ALIVE_EVERY 4096

/* 24 bits of generation: a sender paused between reading a job and claiming from it would
   need 16M newer jobs to pass by before its claim could hit a wrong one */
#define C_GEN(c)        ((uint32_t)((c) >> 40))
#define C_FRONT(c)      ((uint32_t)((c) >> 20) & MAX_CHUNKS)
#define C_BACK(c)       ((uint32_t)(c)&MAX_CHUNKS)
#define C_MAKE(g, f, b) (((uint64_t)(g) << 40) | ((uint64_t)(f) << 20) | (uint64_t)(b))

static void chunk_range(shm_copy_job_t *job, uint32_t i, uint64_t *off, size_t *n)
{
    uint64_t chunk = atomic_load_explicit(&job->chunk, memory_order_relaxed);
    uint64_t len = atomic_load_explicit(&job->len, memory_order_relaxed);
    *off = (uint64_t)i * chunk;
    *n = (size_t)(len - *off < chunk ? len - *off : chunk);
}

/* Wait for the chunks the sender claimed. Returns the done word, or 0 if the peer vanished. */
static uint64_t wait_done(shm_copy_job_t *job, pid_t peer, uint64_t want)
{
    for (unsigned spin = 0;; spin++) {
        uint64_t d = atomic_load_explicit(&job->done, memory_order_acquire);
        if ((d & ~SHM_COPY_FAILED) >= want)
            return d; /* nonzero: want > 0 */
        if (spin >= SPIN_YIELD)
            sched_yield(); /* the sender may share our core */
        if (spin % ALIVE_EVERY == ALIVE_EVERY - 1 && kill(peer, 0) != 0 && errno == ESRCH)
            return 0;
    }
}

static int pull_split(shm_copy_job_t *job, pid_t peer, void *dst, uint64_t src, size_t len);

int shm_copy_pull(shm_copy_job_t *job, const shm_copy_job_t *reverse, pid_t peer, void *dst,
                  uint64_t src, size_t len, size_t min_split)
{
    if (!min_split || len < min_split || len < 2 * (size_t)CHUNK_MIN)
        return pscom_cma_read(peer, dst, src, len);
    /* Dekker: of two pulls that start together, at least one sees the other (seq_cst) */
    atomic_store(&job->pulling, 1);
    int rc = atomic_load(&reverse->pulling) ? pscom_cma_read(peer, dst, src, len)
                                            : pull_split(job, peer, dst, src, len);
    int err = errno;
    atomic_store_explicit(&job->pulling, 0, memory_order_release);
    errno = err;
    return rc;
}

static int pull_split(shm_copy_job_t *job, pid_t peer, void *dst, uint64_t src, size_t len)
{
    uint64_t chunk = CHUNK_MIN;
    while ((len + chunk - 1) / chunk > MAX_CHUNKS)
        chunk *= 2;
    uint32_t nchunks = (uint32_t)((len + chunk - 1) / chunk);

    /* publish: fields first, the claim word last (release) */
    uint64_t old = atomic_load_explicit(&job->claim, memory_order_relaxed);
    uint32_t gen = (C_GEN(old) + 1) & 0xffffffu;
    atomic_store_explicit(&job->done, 0, memory_order_relaxed);
    atomic_store_explicit(&job->dst, (uint64_t)(uintptr_t)dst, memory_order_relaxed);
    atomic_store_explicit(&job->src, src, memory_order_relaxed);
    atomic_store_explicit(&job->len, len, memory_order_relaxed);
    atomic_store_explicit(&job->chunk, chunk, memory_order_relaxed);
    atomic_store_explicit(&job->claim, C_MAKE(gen, 0, nchunks), memory_order_release);

    int err = 0;
    for (;;) {
        uint64_t c = atomic_load_explicit(&job->claim, memory_order_relaxed);
        uint32_t f = C_FRONT(c), b = C_BACK(c);
        if (f >= b)
            break;
        if (!atomic_compare_exchange_weak(&job->claim, &c, C_MAKE(gen, f + 1, b)))
            continue;
        uint64_t off;
        size_t n;
        chunk_range(job, f, &off, &n);
        if (!err && pscom_cma_read(peer, (char *)dst + off, src + off, n) != 0)
            err = errno;
    }
    /* every chunk is claimed now: the sender has [b, nchunks) */
    uint32_t b = C_BACK(atomic_load(&job->claim));
    uint64_t d = b < nchunks ? wait_done(job, peer, nchunks - b) : 0;
    if (b < nchunks && (d == 0 || (d & SHM_COPY_FAILED))) {
        /* the sender could not push its part (or died): fetch it ourselves */
        uint64_t off = (uint64_t)b * chunk;
        if (!err && pscom_cma_read(peer, (char *)dst + off, src + off, len - off) != 0)
            err = errno;
    }
    if (err) {
        errno = err;
        return -1;
    }
    return 0;
}

int shm_copy_help(shm_copy_job_t *job, pid_t peer)
{
    int copied = 0;
    for (;;) {
        uint64_t c = atomic_load_explicit(&job->claim, memory_order_acquire);
        uint32_t f = C_FRONT(c), b = C_BACK(c);
        if (f >= b)
            return copied;
        /* read the job before the claim: after a successful CAS it is still this job */
        uint64_t dst = atomic_load_explicit(&job->dst, memory_order_relaxed);
        uint64_t src = atomic_load_explicit(&job->src, memory_order_relaxed);
        uint64_t off;
        size_t n;
        chunk_range(job, b - 1, &off, &n);
        if (!atomic_compare_exchange_weak(&job->claim, &c, C_MAKE(C_GEN(c), f, b - 1)))
            continue;
        int rc = pscom_cma_write(peer, dst + off, (const void *)(uintptr_t)(src + off), n);
        int err = errno;
        if (rc != 0)
            atomic_fetch_or_explicit(&job->done, SHM_COPY_FAILED, memory_order_relaxed);
        atomic_fetch_add_explicit(&job->done, 1, memory_order_release);
        if (rc != 0) {
            errno = err;
            return -1; /* the receiver fetches the rest itself */
        }
        copied = 1;
    }
}
