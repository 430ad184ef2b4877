/*
 * Shared memory rings on SysV segments, and single-copy reads from a peer process.
 * A segment holds two rings, one per direction, of fixed-size slots. A slot's first word is
 * its length: 0 = free (consumer owns the release), else bytes of payload (producer's publish).
 */
#ifndef SHM_SYSV_H_INCLUDED
#define SHM_SYSV_H_INCLUDED

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "shm_copy.h"

#define SHM_SEG_MAGIC 0x70736d32u /* 2: rings carry a copy job */

typedef struct shm_slot {
    _Atomic uint32_t len;
    uint32_t pad;
    unsigned char data[]; /* slot_size - 8 bytes; 8-aligned */
} shm_slot_t;

typedef struct shm_ring {
    _Alignas(64) _Atomic uint32_t recv_sleeping; /* consumer blocks: producer rings the bell */
    _Alignas(64) _Atomic uint32_t send_waiting;  /* producer waits for a free slot */
    shm_copy_job_t job; /* consumer (data receiver) asks the producer to help copy */
    _Alignas(64) unsigned char slots[];
} shm_ring_t;

typedef struct shm_seg {
    uint32_t magic;
    uint32_t nslots;
    uint32_t slot_size;
    uint32_t reserved;
    uint64_t cookie;
    _Alignas(64) unsigned char rings[];
} shm_seg_t;

static inline size_t shm_ring_size(uint32_t nslots, uint32_t slot_size)
{
    return sizeof(shm_ring_t) + (size_t)nslots * slot_size;
}

static inline shm_ring_t *shm_seg_ring(shm_seg_t *seg, int i)
{
    return (shm_ring_t *)(seg->rings + (size_t)i * shm_ring_size(seg->nslots, seg->slot_size));
}

static inline shm_slot_t *shm_ring_slot(shm_ring_t *r, uint32_t slot_size, uint32_t i)
{
    return (shm_slot_t *)(r->slots + (size_t)i * slot_size);
}

/* Create a segment (already marked for removal: it vanishes with its last user). */
shm_seg_t *shm_seg_create(uint32_t nslots, uint32_t slot_size, int *shmid, uint64_t cookie);
/* Attach the peer's segment and check that it is the one announced. NULL on failure. */
shm_seg_t *shm_seg_attach(int shmid, uint64_t cookie, uint32_t nslots, uint32_t slot_size);
void shm_seg_detach(shm_seg_t *seg);
/* Copy len bytes at the peer's address into dst (process_vm_readv). 0 ok, -1 errno. */
int shm_cma_read(pid_t pid, void *dst, uint64_t remote, size_t len);
/* Copy len bytes from src into the peer's address (process_vm_writev). 0 ok, -1 errno. */
int shm_cma_write(pid_t pid, uint64_t remote, const void *src, size_t len);

#endif
