/*
 * Arenas: SysV segments that hold the ring pairs of many shm connections, so that a process
 * needs ceil(connections it created / pairs per arena) segments instead of one per connection
 * (the kernel allows only kernel.shmmni of them on the whole node).
 *
 * The connecting side (creator) takes a fresh pair from its current arena and offers where it
 * lies; the accepting side attaches that arena once (attachments are cached by shmid and
 * counted) and claims the pair. A pair is never used twice: its peer may still touch it after
 * our close. A process detaches an arena when no connection of its own uses it any more and,
 * for its own arenas, when every pair has been handed out.
 *
 * Layout: one page of header, then the pairs, each on its own pages (shm_pair_size()).
 * Memory is touched only where a connection uses it.
 */
#ifndef SHM_ARENA_H_INCLUDED
#define SHM_ARENA_H_INCLUDED

#include <stdint.h>
#include "shm_sysv.h"

#define SHM_ARENA_MAX_PAIRS 1024u

typedef struct shm_arena shm_arena_t;

/* Where a pair lies: what the creator's offer tells the acceptor. */
typedef struct shm_pair_ref {
    int32_t shmid;
    uint32_t index;  /* of the pair in the arena */
    uint32_t npairs; /* pairs in the arena */
    uint32_t nslots, slot_size;
    uint64_t arena_cookie, pair_cookie;
} shm_pair_ref_t;

/* Creator: a fresh pair with this ring geometry from an arena of up to per_arena pairs (a new
   arena when the current one is used up). NULL with errno when no segment can be made. */
shm_pair_t *shm_arena_new_pair(uint32_t nslots, uint32_t slot_size, uint32_t per_arena,
                               shm_arena_t **arena, shm_pair_ref_t *ref);

/* Acceptor: attach (or reuse the attachment of) the arena ref names, check that it and the
   pair are the ones offered and claim the pair. NULL with *why on failure. */
shm_pair_t *shm_arena_claim_pair(const shm_pair_ref_t *ref, shm_arena_t **arena, const char **why);

/* A connection no longer uses its pair (both sides call it once per pair). */
void shm_arena_put(shm_arena_t *arena);

/* Detach the arenas no connection uses (the creator's partly used one included). */
void shm_arena_release_idle(void);

#endif
