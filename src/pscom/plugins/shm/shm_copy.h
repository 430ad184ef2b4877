/*
 * Cooperative single-copy of a rendezvous message between two processes on one node.
 *
 * The receiver must copy len bytes from the sender's buffer into its own. Alone it does that
 * with process_vm_readv at the speed of one core. Here it splits the message into chunks and
 * publishes a copy job in the shared segment; the receiver claims chunks from the front, and
 * the sender, if it happens to be polling (it usually is: it waits for the FIN), claims chunks
 * from the back and pushes them with process_vm_writev. Both cores copy, each side takes what
 * the other did not, and a sender that is busy elsewhere simply leaves all of it to the
 * receiver: nobody waits for a peer that does not poll, except for a chunk it already claimed.
 *
 * One job per direction at a time (the receiver copies synchronously). The claim word packs
 * {generation, front, back}; every claim is a CAS on it, so a sender that saw an old job can
 * never claim chunks of a new one.
 */
#ifndef SHM_COPY_H_INCLUDED
#define SHM_COPY_H_INCLUDED

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct shm_copy_job {
    _Alignas(64) _Atomic uint64_t claim; /* gen:24 | front:20 | back:20, in chunks */
    _Atomic uint64_t done;               /* chunks the sender finished | SHM_COPY_FAILED */
    _Atomic uint64_t dst, src, len, chunk;
    _Atomic uint64_t pulling; /* the receiver is inside shm_copy_pull (split or not) */
} shm_copy_job_t;

#define SHM_COPY_FAILED (1ull << 63)

/* Receiver: copy len bytes at src in process peer into dst, sharing the work through job
   when len >= min_split, unless the peer is pulling from us at the same time (reverse: its
   job): then its core is busy with its own copy and will not help, and both copying in chunks
   moved 15 GB/s in all where each pulling alone moved 20 (bidirectional bandwidth, an
   exchange of 1 MiB took 141 instead of 103 us). Returns 0, or -1 with errno (then nothing
   can be assumed of dst). */
int shm_copy_pull(shm_copy_job_t *job, const shm_copy_job_t *reverse, pid_t peer, void *dst,
                  uint64_t src, size_t len, size_t min_split);

/* Sender, from its poll loop: is there a job with chunks left? (one load of a line that
   changes once per job) */
static inline int shm_copy_pending(shm_copy_job_t *job)
{
    uint64_t c = atomic_load_explicit(&job->claim, memory_order_relaxed);
    return ((c >> 20) & 0xfffffu) < (c & 0xfffffu);
}

/* Sender: help with the job the peer published. Returns 1 if it copied something, 0 if not,
   -1 with errno when a push failed (the receiver is told through the job and copies it). */
int shm_copy_help(shm_copy_job_t *job, pid_t peer);

#endif
