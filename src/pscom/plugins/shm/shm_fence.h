/*
 * The shm ring's publish and the consumer's decision to sleep form a Dekker pair: the producer
 * stores a record's header and then reads recv_sleeping; the consumer stores recv_sleeping and
 * then reads the header. Each side needs a full fence between its store and its load, or both
 * may miss the other's store (a lost wakeup: the consumer sleeps on a message that is there).
 * A full fence on the producer's side is the locked instruction of every message's publish,
 * which waits until the header's line is ours again from the polling consumer (most of an
 * 8-byte message's send time in a stream).
 *
 * With membarrier(2) the cost moves to the side that is rare: the producer's fence becomes a
 * compiler barrier, and a consumer about to sleep makes every running thread of the
 * registered processes execute a full barrier (MEMBARRIER_CMD_GLOBAL_EXPEDITED, about 2 us
 * here), which orders their earlier stores before their later loads as a fence of their own
 * would. Both processes must take part: the producer registered (the consumer's barrier
 * reaches only registered processes), the consumer calling it before it sleeps
 * (shm_ring_t.fences tells the producer). Where the kernel lacks it or a seccomp filter
 * denies it, the publish keeps its fence.
 */
#ifndef SHM_FENCE_H_INCLUDED
#define SHM_FENCE_H_INCLUDED

/* Register this process; 1 if the light publish is possible here (once, at plugin start). */
int shm_fence_init(void);

/* Before sleeping: a full barrier in every running thread of the registered processes.
   0, or -1 (then the caller must not rely on it). */
int shm_fence_heavy(void);

#endif
