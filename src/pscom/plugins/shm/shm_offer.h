/*
 * The shm transport's handshake blob: the connecting side's offer says where the ring pair it
 * made lies (same node, so native layout); the accepting side's reply is the address of its
 * cma_probe. A header of its own for the transport and its tests (test/fuzz/fuzz_shm.c plays
 * the connecting side).
 */
#ifndef SHM_OFFER_H_INCLUDED
#define SHM_OFFER_H_INCLUDED

#include <stdint.h>

/* offer versions: 1 a segment per connection, no magic; 2 slots freed by length; 3 slots
   published by seq; 4 slots a line apart (shm_slot_stride); 5 copy jobs say who pulls; 6 rings
   of records packed one after the other (shm_sysv.h); 7 the consumer says whether it fences
   before it sleeps (shm_ring_t.fences) */
#define SHM_OFFER_MAGIC   0x4f6d6873u /* "shmO" */
#define SHM_OFFER_VERSION 7u

typedef struct shm_offer {
    uint32_t magic;
    uint32_t version;
    int32_t shmid;
    uint32_t index;  /* of the pair in the arena */
    uint32_t npairs; /* pairs in the arena */
    uint32_t nslots;
    uint32_t slot_size;
    uint32_t reserved;
    uint64_t arena_cookie;
    uint64_t pair_cookie;
    uint64_t probe; /* address of cma_probe in the creator (the acceptor's is its reply) */
} shm_offer_t;

#endif
