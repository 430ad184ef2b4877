/*
 * Shared memory rings on SysV segments.
 * A connection has a pair of rings, one per direction (shm_pair_t); many pairs share one
 * segment (shm_arena.h). A ring is a circle of bytes holding records one after the other, each
 * an 8-byte header {message number, length} and the payload, padded to 8 bytes: small messages
 * share cache lines, so a receiver that lags behind gets several per line it fetches (a stream
 * of 8-byte messages used a whole slot, and a line, each). The producer writes the payload,
 * then a zero header behind the record (where the next one starts), then publishes the record
 * by its header; the consumer waits at the next header for the number it expects, so it never
 * takes stale bytes of an earlier lap for a header. A record that does not fit before the end
 * leaves a wrap mark and starts at offset 0. The consumer never writes the ring: it counts the
 * bytes it is done with in `consumed`, which the producer reads only when its own view says
 * the ring is full. So a message costs one cache-line transfer each way at most.
 */
#ifndef SHM_SYSV_H_INCLUDED
#define SHM_SYSV_H_INCLUDED

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "shm_copy.h"

#define SHM_PAIR_MAGIC 0x70736d33u /* 3: a pair of rings in an arena */
#define SHM_PAIR_ALIGN 4096u       /* pairs start on their own page */

typedef struct shm_rec {
    _Atomic uint64_t word; /* 0: not written yet; else number << 32 | what (SHM_REC_*) */
    unsigned char data[];  /* length bytes, then padding to 8 */
} shm_rec_t;

/* The low half of a record's header: the payload's length (SHM_REC_LEN bits) and flags.
   USER: the payload is a user message without pscom's header (core rebuilds it from the
   lengths, pscom_read_feed_user): its user header of SHM_REC_XLEN() bytes, then its data; a
   small MPI message then takes 32 bytes of the ring, not 48. ALIGN: the next record starts on
   a new line. WRAP (the whole word): the ring goes on at offset 0. */
#define SHM_REC_LEN      0x000fffffu
#define SHM_REC_XLEN_MAX 0x3ffu
#define SHM_REC_XLEN(w)  (((w) >> 20) & SHM_REC_XLEN_MAX)
#define SHM_REC_USER     0x40000000u
#define SHM_REC_ALIGN    0x80000000u
#define SHM_REC_WRAP     0xffffffffu

static inline uint64_t shm_rec_word(uint32_t seq, uint32_t len)
{
    return (uint64_t)seq << 32 | len;
}

/* bytes a record of len payload bytes takes in the ring */
static inline uint32_t shm_rec_size(uint32_t len)
{
    return (uint32_t)sizeof(shm_rec_t) + ((len + 7) & ~7u);
}

/* bytes from the record at off, whose header's low half is what (not a wrap mark), to the next */
static inline uint32_t shm_rec_span(uint32_t off, uint32_t what)
{
    uint32_t size = shm_rec_size(what & SHM_REC_LEN);
    return what & SHM_REC_ALIGN ? ((off + size + 63) & ~63u) - off : size;
}

typedef struct shm_ring {
    _Alignas(64) _Atomic uint32_t recv_sleeping; /* consumer blocks: producer rings the bell */
    uint32_t fences; /* set by the consumer before the handshake: it fences before it sleeps
                        (shm_fence.h), so the producer's publish needs no fence of its own */
    _Alignas(64) _Atomic uint32_t send_waiting; /* producer waits for room */
    _Alignas(64) _Atomic uint64_t consumed;     /* bytes the consumer is done with, in all */
    shm_copy_job_t job; /* consumer (data receiver) asks the producer to help copy */
    _Alignas(64) unsigned char bytes[];
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

/* The ring's bytes for the geometry: nslots records of slot_size bytes (the largest: a
   payload of slot_size - 8), and two lines more, so that an empty ring takes the largest
   record wherever it stands: with its padding to a new line (up to 56 bytes) and the zero
   header behind it, it needs up to slot_size + 64 bytes, and as much again may be skipped to
   the end first. */
static inline uint32_t shm_ring_bytes(uint32_t nslots, uint32_t slot_size)
{
    return nslots * slot_size + 128;
}

static inline size_t shm_ring_size(uint32_t nslots, uint32_t slot_size)
{
    return sizeof(shm_ring_t) + shm_ring_bytes(nslots, slot_size);
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

static inline shm_rec_t *shm_ring_rec(shm_ring_t *r, uint32_t off)
{
    return (shm_rec_t *)(r->bytes + off);
}

/* The producer goes on at offset 0 from off, where the next record will not fit: a zero header
   at 0 first, which the consumer must find there once it follows the mark (release). */
static inline void shm_ring_wrap(shm_ring_t *r, uint32_t off, uint32_t next_seq)
{
    atomic_store_explicit(&shm_ring_rec(r, 0)->word, 0, memory_order_relaxed);
    atomic_store_explicit(&shm_ring_rec(r, off)->word, shm_rec_word(next_seq, SHM_REC_WRAP),
                          memory_order_release);
}

/* Create and attach a segment of size bytes, already marked for removal: it vanishes with its
   last user, even after SIGKILL. NULL with errno on failure. */
void *shm_sysv_create(size_t size, int *shmid);
/* Attach segment shmid if it has at least min_size bytes and belongs to our user with no access
   for others (mode 0600). NULL with errno on failure (EPERM: not ours alone). */
void *shm_sysv_attach(int shmid, size_t min_size);
void shm_sysv_detach(void *base);

#endif
