/* Arenas of ring pairs in SysV segments: see shm_arena.h. */
#include <errno.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include "pscom_plugin.h"
#include "shm_arena.h"

#define SHM_ARENA_MAGIC     0x70736d41u    /* "Amsp" */
#define SHM_ARENA_MAX_BYTES (64ull << 20)  /* fewer pairs per arena when rings are large */
#define SHM_ARENA_HDR       SHM_PAIR_ALIGN /* pairs start after one page */

typedef struct shm_arena_hdr {
    uint32_t magic;
    uint32_t npairs;
    uint32_t nslots;
    uint32_t slot_size;
    uint64_t cookie;
} shm_arena_hdr_t;

struct shm_arena {
    shm_arena_t *next;
    unsigned char *base;
    int shmid;
    uint64_t cookie;
    uint32_t npairs, nslots, slot_size;
    uint32_t used; /* pairs handed out (by us, the creator); npairs for a peer's arena */
    uint32_t refs; /* our connections on pairs of it */
};

static shm_arena_t *arenas;  /* all attached: ours and peers' */
static shm_arena_t *current; /* ours, with pairs left */

static uint64_t new_cookie(void)
{
    uint64_t c;
    if (getrandom(&c, sizeof(c), GRND_NONBLOCK) != sizeof(c))
        c = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&c;
    return c ? c : 1; /* 0 marks a pair never offered */
}

static size_t arena_size(uint32_t npairs, uint32_t nslots, uint32_t slot_size)
{
    return SHM_ARENA_HDR + (size_t)npairs * shm_pair_size(nslots, slot_size);
}

static shm_pair_t *pair_at(shm_arena_t *a, uint32_t i)
{
    return (shm_pair_t *)(a->base + SHM_ARENA_HDR +
                          (size_t)i * shm_pair_size(a->nslots, a->slot_size));
}

static void release_if_idle(shm_arena_t *a)
{
    if (a->refs || (a->used < a->npairs && a == current))
        return;
    for (shm_arena_t **p = &arenas; *p; p = &(*p)->next)
        if (*p == a) {
            *p = a->next;
            break;
        }
    if (current == a)
        current = NULL;
    PSCOM_LOG(4, "shm: detach arena %d", a->shmid);
    shm_sysv_detach(a->base);
    free(a);
}

static shm_arena_t *arena_create(uint32_t nslots, uint32_t slot_size, uint32_t per_arena)
{
    size_t psize = shm_pair_size(nslots, slot_size);
    uint64_t fit = (SHM_ARENA_MAX_BYTES - SHM_ARENA_HDR) / psize;
    uint32_t npairs = per_arena < fit ? per_arena : (uint32_t)(fit ? fit : 1);
    if (npairs > SHM_ARENA_MAX_PAIRS)
        npairs = SHM_ARENA_MAX_PAIRS;
    if (npairs < 1)
        npairs = 1;
    shm_arena_t *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    a->base = shm_sysv_create(arena_size(npairs, nslots, slot_size), &a->shmid);
    if (!a->base) {
        int err = errno;
        free(a);
        errno = err;
        return NULL;
    }
    a->cookie = new_cookie();
    a->npairs = npairs;
    a->nslots = nslots;
    a->slot_size = slot_size;
    shm_arena_hdr_t *h = (shm_arena_hdr_t *)a->base;
    h->npairs = npairs;
    h->nslots = nslots;
    h->slot_size = slot_size;
    h->cookie = a->cookie;
    atomic_thread_fence(memory_order_release);
    h->magic = SHM_ARENA_MAGIC;
    a->next = arenas;
    arenas = a;
    PSCOM_LOG(3, "shm: new arena %d for %u connections (%zu bytes)", a->shmid, npairs,
              arena_size(npairs, nslots, slot_size));
    return a;
}

shm_pair_t *shm_arena_new_pair(uint32_t nslots, uint32_t slot_size, uint32_t per_arena,
                               shm_arena_t **arena, shm_pair_ref_t *ref)
{
    shm_arena_t *a = current;
    if (a && (a->nslots != nslots || a->slot_size != slot_size)) {
        a->used = a->npairs; /* another geometry: hand out no more of it */
        current = NULL;
        release_if_idle(a);
        a = NULL;
    }
    if (!a) {
        a = arena_create(nslots, slot_size, per_arena);
        if (!a)
            return NULL;
        current = a;
    }
    uint32_t i = a->used++;
    if (a->used == a->npairs)
        current = NULL; /* used up: goes when its last connection does */
    a->refs++;
    shm_pair_t *p = pair_at(a, i);
    p->nslots = nslots;
    p->slot_size = slot_size;
    p->cookie = new_cookie();
    atomic_thread_fence(memory_order_release);
    p->magic = SHM_PAIR_MAGIC;
    *ref = (shm_pair_ref_t){.shmid = a->shmid,
                            .index = i,
                            .npairs = a->npairs,
                            .nslots = nslots,
                            .slot_size = slot_size,
                            .arena_cookie = a->cookie,
                            .pair_cookie = p->cookie};
    *arena = a;
    return p;
}

static shm_arena_t *find(int shmid)
{
    for (shm_arena_t *a = arenas; a; a = a->next)
        if (a->shmid == shmid)
            return a;
    return NULL;
}

static int matches(const shm_arena_t *a, const shm_pair_ref_t *ref)
{
    return a->cookie == ref->arena_cookie && a->npairs == ref->npairs && a->nslots == ref->nslots &&
           a->slot_size == ref->slot_size;
}

/* attach a peer's arena and check its header against the offer */
static shm_arena_t *arena_attach(const shm_pair_ref_t *ref, const char **why)
{
    size_t size = arena_size(ref->npairs, ref->nslots, ref->slot_size);
    unsigned char *base = shm_sysv_attach(ref->shmid, size);
    if (!base) {
        *why = errno == EINVAL  ? "no such segment, or too small"
               : errno == EPERM ? "the segment is not our user's alone (owner or mode)"
                                : "cannot attach the segment";
        return NULL;
    }
    shm_arena_hdr_t *h = (shm_arena_hdr_t *)base;
    shm_arena_t *a = calloc(1, sizeof(*a));
    if (!a) {
        shm_sysv_detach(base);
        *why = "out of memory";
        return NULL;
    }
    *a = (shm_arena_t){.base = base,
                       .shmid = ref->shmid,
                       .cookie = h->cookie,
                       .npairs = h->npairs,
                       .nslots = h->nslots,
                       .slot_size = h->slot_size};
    if (atomic_load_explicit((_Atomic uint32_t *)&h->magic, memory_order_acquire) !=
            SHM_ARENA_MAGIC ||
        !matches(a, ref)) {
        shm_sysv_detach(base);
        free(a);
        *why = "the segment is not the announced arena";
        return NULL;
    }
    a->used = a->npairs; /* not ours to hand out */
    a->next = arenas;
    arenas = a;
    PSCOM_LOG(4, "shm: attach arena %d", a->shmid);
    return a;
}

shm_pair_t *shm_arena_claim_pair(const shm_pair_ref_t *ref, shm_arena_t **arena, const char **why)
{
    if (ref->npairs < 1 || ref->npairs > SHM_ARENA_MAX_PAIRS || ref->index >= ref->npairs) {
        *why = "pair index out of range";
        return NULL;
    }
    shm_arena_t *a = find(ref->shmid);
    if (a && !matches(a, ref)) {
        *why = "the segment is not the announced arena";
        return NULL;
    }
    if (!a && !(a = arena_attach(ref, why)))
        return NULL;
    shm_pair_t *p = pair_at(a, ref->index);
    uint32_t free_mark = 0;
    if (p->magic != SHM_PAIR_MAGIC || p->cookie != ref->pair_cookie || p->nslots != ref->nslots ||
        p->slot_size != ref->slot_size) {
        *why = "the pair was not offered";
    } else if (!atomic_compare_exchange_strong(&p->claimed, &free_mark, 1)) {
        *why = "the pair is taken already";
    } else {
        a->refs++;
        *arena = a;
        return p;
    }
    release_if_idle(a);
    return NULL;
}

void shm_arena_put(shm_arena_t *a)
{
    if (!a)
        return;
    a->refs--;
    release_if_idle(a);
}

void shm_arena_release_idle(void)
{
    current = NULL;
    for (shm_arena_t *a = arenas, *next; a; a = next) {
        next = a->next;
        release_if_idle(a);
    }
}
