/*
 * Shared memory rings on SysV segments.
 * A connection has a pair of rings, one per direction, of fixed-size slots (shm_pair_t); many
 * pairs share one segment (shm_arena.h). A slot is published by its sequence number: the
 * producer stamps the n-th message of the ring (n = 1, 2, ...) with n after writing length and
 * payload; the consumer waits for the number it expects. The consumer never writes a slot: it
 * counts what it has read in the ring's `consumed`, which the producer reads only when its
 * own view says the ring is full. So a message costs one cache-line transfer each way, not a
 * read of the slot by the producer first (a second round trip: 5% of the shm latency).
 */
#ifndef SHM_SYSV_H_INCLUDED
#define SHM_SYSV_H_INCLUDED

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "shm_copy.h"

#define SHM_PAIR_MAGIC 0x70736d33u /* 3: a pair of rings in an arena */
#define SHM_PAIR_ALIGN 4096u       /* pairs start on their own page */

typedef struct shm_slot {
    _Atomic uint32_t seq; /* number of the message in the ring; the producer's publish */
    uint32_t len;         /* bytes of payload */
    unsigned char data[]; /* slot_size - 8 bytes; 8-aligned */
} shm_slot_t;

typedef struct shm_ring {
    _Alignas(64) _Atomic uint32_t recv_sleeping; /* consumer blocks: producer rings the bell */
    _Alignas(64) _Atomic uint32_t send_waiting;  /* producer waits for a free slot */
    _Alignas(64) _Atomic uint32_t consumed;      /* messages the consumer has read */
    shm_copy_job_t job; /* consumer (data receiver) asks the producer to help copy */
    _Alignas(64) unsigned char slots[];
} shm_ring_t;

/* One connection's two rings: ring 0 is written by the creator, ring 1 by the acceptor. */
typedef struct shm_pair {
    uint32_t magic;
    uint32_t nslots;
    uint32_t slot_size;
    _Atomic uint32_t claimed; /* set once by the acceptor: a replayed offer cannot take it */
    uint64_t cookie;          /* per connection, from the creator's offer */
    _Alignas(64) unsigned char rings[];
} shm_pair_t;

/* Slots lie a line more than their size apart: at a multiple of 4 KiB the first lines of all
   slots (seq, len, the message's start) fell into one L1 cache set, and a stream of small
   messages ran at 80 or 105 MB/s from run to run (8 B, 32 slots; 100-105 every run staggered). */
static inline size_t shm_slot_stride(uint32_t slot_size)
{
    return (size_t)slot_size + 64;
}

static inline size_t shm_ring_size(uint32_t nslots, uint32_t slot_size)
{
    return sizeof(shm_ring_t) + (size_t)nslots * shm_slot_stride(slot_size);
}

/* bytes of one pair in an arena, rounded to whole pages */
static inline size_t shm_pair_size(uint32_t nslots, uint32_t slot_size)
{
    size_t s = sizeof(shm_pair_t) + 2 * shm_ring_size(nslots, slot_size);
    return (s + SHM_PAIR_ALIGN - 1) & ~(size_t)(SHM_PAIR_ALIGN - 1);
}

static inline shm_ring_t *shm_pair_ring(shm_pair_t *p, int i)
{
    return (shm_ring_t *)(p->rings + (size_t)i * shm_ring_size(p->nslots, p->slot_size));
}

static inline shm_slot_t *shm_ring_slot(shm_ring_t *r, uint32_t slot_size, uint32_t i)
{
    return (shm_slot_t *)(r->slots + (size_t)i * shm_slot_stride(slot_size));
}

/* Create and attach a segment of size bytes, already marked for removal: it vanishes with its
   last user, even after SIGKILL. NULL with errno on failure. */
void *shm_sysv_create(size_t size, int *shmid);
/* Attach segment shmid if it has at least min_size bytes and belongs to our user with no access
   for others (mode 0600). NULL with errno on failure (EPERM: not ours alone). */
void *shm_sysv_attach(int shmid, size_t min_size);
void shm_sysv_detach(void *base);

#endif
