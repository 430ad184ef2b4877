/*
 * Small collectives of a communicator within one node's shared memory through a segment its
 * ranks map. Barrier: an arrival counter and a generation; the last rank to arrive releases all
 * the others with one store, so nobody waits for a rank that is not running to pass a message
 * on (dissemination takes log2(p) rounds, each of which every rank must be switched in for on a
 * crowded node). Allreduce, Allgather, Alltoall: the same round, each rank's contribution in its
 * slot. Bcast: a ring of slots that only the root waits on.
 *
 * The segment is made at a communicator's SHM_AFTER_CALLS-th collective that could use it (a
 * communicator that synchronises once gets no file): rank 0 creates it under a unique name in
 * /dev/shm and sends the name down the communicator, every rank maps it, an Allreduce tells
 * whether all could, and rank 0 unlinks the name, so that nothing is left behind however the
 * job ends. A communicator where a rank could not map it keeps the messages.
 */
#include "mpidimpl.h" /* first: it pulls in our inline headers, which need pscom_impl.h */
#include "pscom_impl.h"
#include "pscom_coll_shm.h"
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#define SHM_AFTER_CALLS 2
#define SHM_NAME_MAX    64
#define CACHE_LINE      64

/* Bcast: a ring of BCAST_SLOTS slots of BCAST_SLOT bytes. The root puts a part of up to
   BCAST_PART_SLOTS slots (never across the ring's end) into the slots that follow the last
   part, then its head: bytes and the part's number. The others wait for the head, copy and
   store how far they are (each rank its own line: nobody writes another's). The root waits only
   where it would overwrite a slot a rank has not taken yet, so it runs up to the whole ring
   ahead of the slowest. Parts of 1 slot for a small Bcast; larger ones for a large one, as each
   part costs every rank a wait and a store (64 KiB on 8 ranks sharing 2 CPUs, us: parts of 1
   KiB 36-47, 4 KiB 36-43, 16 KiB 39-42, 64 KiB 39-43; the tree 75-82, Open MPI 66-69). */
#define BCAST_SLOTS      64
#define BCAST_SLOT       1024
#define BCAST_PART_SLOTS 16
typedef struct {
    _Alignas(CACHE_LINE) _Atomic uint32_t seq; /* the first slot's number + 1 once the data is in */
    uint32_t root_err;                         /* the root's errflag was set */
    uint32_t n;                                /* bytes in this part */
    uint32_t slots;                            /* slots it takes */
    uint64_t len;                              /* the root's whole Bcast */
} bcast_head_t;

typedef struct {
    _Alignas(CACHE_LINE) _Atomic uint64_t taken; /* the rank is done with the slots before this */
} rank_line_t;

typedef struct {
    _Alignas(CACHE_LINE) _Atomic uint32_t arrived; /* ranks in the current round */
    _Alignas(CACHE_LINE) _Atomic uint32_t gen;     /* rounds completed */
    bcast_head_t head[BCAST_SLOTS];                /* of the part starting at that slot */
    _Alignas(CACHE_LINE) unsigned char ring[BCAST_SLOTS][BCAST_SLOT];
    /* then a rank_line_t per rank and, on communicators of up to
       MPIDI_PSCOM_COLL_SHM_DATA_RANKS, two sets (by the round's parity) of a
       MPIDI_PSCOM_COLL_SHM_SLOT per rank. A rank writes a set before it arrives and reads it
       after the release; it writes that set again only after the next round's release, for
       which every rank must have arrived, done with reading. */
    _Alignas(CACHE_LINE) unsigned char tail[];
} shm_seg_t;

typedef MPIDI_PSCOM_coll_shm_t coll_shm_t;

void MPIDI_PSCOM_coll_shm_free(MPIR_Comm *comm)
{
    coll_shm_t *st = &comm->dev.ch4.netmod.pscom.coll_shm;
    if (st->seg)
        munmap(st->seg, st->seg_len);
    memset(st, 0, sizeof(*st));
}

static size_t seg_len(int size)
{
    size_t len = sizeof(shm_seg_t) + (size_t)size * sizeof(rank_line_t);
    if (size <= MPIDI_PSCOM_COLL_SHM_DATA_RANKS)
        len += 2 * (size_t)size * MPIDI_PSCOM_COLL_SHM_SLOT;
    return len;
}

static shm_seg_t *map_segment(const char *name, size_t len, int create)
{
    int fd = shm_open(name, O_RDWR | (create ? O_CREAT | O_EXCL : 0), 0600);
    if (fd < 0)
        return NULL;
    void *p = MAP_FAILED;
    if (!create || ftruncate(fd, (off_t)len) == 0)
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return p == MAP_FAILED ? NULL : p;
}

/* Collective over comm, by messages: 0, or an MPI error of the messages */
static int setup(MPIR_Comm *comm, coll_shm_t *st, MPIR_Errflag_t *errflag)
{
    static unsigned serial;
    char name[SHM_NAME_MAX] = "";
    size_t len = seg_len(comm->local_size);
    shm_seg_t *seg = NULL;
    if (comm->rank == 0 && MPIDI_PSCOM_global.coll_shm) {
        snprintf(name, sizeof(name), "/psmpi-coll-%d-%x-%u", (int)getpid(),
                 (unsigned)comm->context_id, serial++);
        seg = map_segment(name, len, 1);
        if (!seg)
            name[0] = '\0';
    }
    int mpi_errno = MPIDI_PSCOM_bcast_tree(name, sizeof(name), MPI_CHAR, 0, comm, errflag);
    if (!mpi_errno && comm->rank != 0 && name[0])
        seg = map_segment(name, len, 0);
    int ok = seg != NULL && MPIDI_PSCOM_global.coll_shm, all_ok = 0;
    if (!mpi_errno)
        mpi_errno = MPIDI_PSCOM_allreduce_direct(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm, errflag);
    if (comm->rank == 0 && name[0])
        shm_unlink(name);
    if (mpi_errno || !all_ok) {
        if (seg)
            munmap(seg, len);
        st->refused = 1;
        return mpi_errno;
    }
    st->seg = seg;
    st->seg_len = len;
    return MPI_SUCCESS;
}

/* The segment of comm, made at its SHM_AFTER_CALLS-th collective that could use it; NULL: by
   messages, this time (*mpi_errno: the setup's error) or for good (also a communicator not
   within one node's shared memory: MPIDI_PSCOM_comm_node_shm, the same answer everywhere) */
static shm_seg_t *segment(MPIR_Comm *comm, MPIR_Errflag_t *errflag, int *mpi_errno)
{
    *mpi_errno = MPI_SUCCESS;
    coll_shm_t *st = &comm->dev.ch4.netmod.pscom.coll_shm;
    if (st->refused || st->setting_up || !MPIDI_PSCOM_comm_node_shm(comm))
        return NULL;
    if (!st->seg && ++st->calls >= SHM_AFTER_CALLS) {
        st->setting_up = 1;
        *mpi_errno = setup(comm, st, errflag);
        st->setting_up = 0;
    }
    return st->seg;
}

/* One poll of a wait in the segment: MPI progress, then its yield or nap */
static int wait_poll(void)
{
    int mpi_errno = MPID_Progress_test(NULL);
    if (!mpi_errno)
        MPIDI_PROGRESS_YIELD();
    return mpi_errno;
}

/* Until *v (acquired) is want, with MPI progress meanwhile */
static int wait_for(_Atomic uint32_t *v, uint32_t want)
{
    while (atomic_load_explicit(v, memory_order_acquire) != want) {
        int mpi_errno = wait_poll();
        if (mpi_errno)
            return mpi_errno;
    }
    MPIDI_PSCOM_not_idle();
    return MPI_SUCCESS;
}

/* Arrive in round gen and wait for its release */
static int arrive(shm_seg_t *s, uint32_t gen, int size)
{
    if (atomic_fetch_add_explicit(&s->arrived, 1, memory_order_acq_rel) == (uint32_t)size - 1) {
        /* the last: nobody touches arrived again before the new generation shows */
        atomic_store_explicit(&s->arrived, 0, memory_order_relaxed);
        atomic_store_explicit(&s->gen, gen + 1, memory_order_release);
        MPIDI_PSCOM_not_idle();
        return MPI_SUCCESS;
    }
    return wait_for(&s->gen, gen + 1);
}

int MPIDI_PSCOM_coll_shm_barrier(MPIR_Comm *comm, MPIR_Errflag_t *errflag, int *mpi_errno)
{
    shm_seg_t *s = segment(comm, errflag, mpi_errno);
    if (!s)
        return *mpi_errno != MPI_SUCCESS;
    *mpi_errno = arrive(s, atomic_load_explicit(&s->gen, memory_order_acquire), comm->local_size);
    return 1;
}

/* The set of this round, where every rank has its slot; NULL: by messages (see segment) */
static unsigned char *data_set(shm_seg_t *s, uint32_t gen, int size)
{
    return s->tail + (size_t)size * sizeof(rank_line_t) +
           (gen & 1) * (size_t)size * MPIDI_PSCOM_COLL_SHM_SLOT;
}

static unsigned char *slot(unsigned char *set, int rank)
{
    return set + (size_t)rank * MPIDI_PSCOM_COLL_SHM_SLOT;
}

/* Our len bytes into our slot of this round's set, arrive and wait for the release: the set, to
   read the others' slots from; NULL: by messages (*mpi_errno 0) or failed */
static unsigned char *swap_slots(MPIR_Comm *comm, const void *mine, size_t len,
                                 MPIR_Errflag_t *errflag, int *mpi_errno)
{
    int size = comm->local_size;
    *mpi_errno = MPI_SUCCESS;
    if (len > MPIDI_PSCOM_COLL_SHM_SLOT || size > MPIDI_PSCOM_COLL_SHM_DATA_RANKS)
        return NULL;
    shm_seg_t *s = segment(comm, errflag, mpi_errno);
    if (!s)
        return NULL;
    uint32_t gen = atomic_load_explicit(&s->gen, memory_order_acquire);
    unsigned char *set = data_set(s, gen, size);
    memcpy(slot(set, comm->rank), mine, len);
    *mpi_errno = arrive(s, gen, size);
    return *mpi_errno ? NULL : set;
}

/* Every rank reduces all contributions in rank order: the same result everywhere */
int MPIDI_PSCOM_coll_shm_allreduce(const void *in, void *out, MPI_Aint count, MPI_Datatype datatype,
                                   MPI_Op op, size_t len, MPIR_Comm *comm, MPIR_Errflag_t *errflag,
                                   int *mpi_errno)
{
    unsigned char *set = swap_slots(comm, in, len, errflag, mpi_errno);
    if (!set)
        return *mpi_errno != MPI_SUCCESS;
    memcpy(out, set, len);
    for (int r = 1; r < comm->local_size && !*mpi_errno; r++)
        *mpi_errno = MPIDI_PSCOM_reduce(out, out, slot(set, r), count, datatype, op);
    return 1;
}

int MPIDI_PSCOM_coll_shm_allgather(const void *mine, size_t blk, char *out, size_t stride,
                                   MPIR_Comm *comm, MPIR_Errflag_t *errflag, int *mpi_errno)
{
    unsigned char *set = swap_slots(comm, mine, blk, errflag, mpi_errno);
    if (!set)
        return *mpi_errno != MPI_SUCCESS;
    for (int r = 0; r < comm->local_size; r++)
        if (r != comm->rank)
            memcpy(out + (size_t)r * stride, slot(set, r), blk);
    return 1;
}

/* Our slot holds our blocks for every rank in rank order; we take ours from each slot */
int MPIDI_PSCOM_coll_shm_alltoall(const char *sb, char *rb, size_t blk, MPIR_Comm *comm,
                                  MPIR_Errflag_t *errflag, int *mpi_errno)
{
    int size = comm->local_size;
    unsigned char *set = swap_slots(comm, sb, blk * (size_t)size, errflag, mpi_errno);
    if (!set)
        return *mpi_errno != MPI_SUCCESS;
    for (int r = 0; r < size; r++)
        memcpy(rb + (size_t)r * blk, slot(set, r) + (size_t)comm->rank * blk, blk);
    return 1;
}

static rank_line_t *rank_line(shm_seg_t *s, int rank)
{
    return (rank_line_t *)s->tail + rank;
}

/* Until every rank but the root has taken the slots before `upto` (with MPI progress meanwhile) */
static int wait_taken(shm_seg_t *s, coll_shm_t *st, uint64_t upto, int root, int size)
{
    uint64_t least = UINT64_MAX;
    for (int r = 0; r < size; r++) {
        if (r == root)
            continue;
        _Atomic uint64_t *t = &rank_line(s, r)->taken;
        uint64_t v;
        while ((v = atomic_load_explicit(t, memory_order_acquire)) < upto) {
            int mpi_errno = wait_poll();
            if (mpi_errno)
                return mpi_errno;
        }
        least = MPL_MIN(least, v);
    }
    st->bcast_free = least + BCAST_SLOTS;
    MPIDI_PSCOM_not_idle();
    return MPI_SUCCESS;
}

/* The root's parts of a Bcast of len bytes: 1 slot per part up to BCAST_SLOT bytes, then
   BCAST_PART_SLOTS at most */
static int bcast_put(shm_seg_t *s, coll_shm_t *st, const char *data, size_t len, int err, int root,
                     int size)
{
    size_t off = 0;
    do {
        uint64_t k = st->bcasts;
        uint32_t at = (uint32_t)(k % BCAST_SLOTS);
        size_t slots = (len - off + BCAST_SLOT - 1) / BCAST_SLOT;
        slots = MPL_MAX(slots, 1);
        slots = MPL_MIN(slots, MPL_MIN(BCAST_PART_SLOTS, BCAST_SLOTS - at));
        size_t n = MPL_MIN(len - off, slots * BCAST_SLOT);
        uint64_t end = k + slots;
        if (end > st->bcast_free) {
            int mpi_errno =
                wait_taken(s, st, end > BCAST_SLOTS ? end - BCAST_SLOTS : 0, root, size);
            if (mpi_errno)
                return mpi_errno;
        }
        bcast_head_t *h = &s->head[at];
        memcpy(s->ring[at], data + off, n);
        h->len = len;
        h->n = (uint32_t)n;
        h->slots = (uint32_t)slots;
        h->root_err = err;
        atomic_store_explicit(&h->seq, (uint32_t)k + 1, memory_order_release);
        st->bcasts = end;
        off += n;
    } while (off < len);
    atomic_store_explicit(&rank_line(s, root)->taken, st->bcasts, memory_order_relaxed);
    MPIDI_PSCOM_not_idle();
    return MPI_SUCCESS;
}

/* Readers follow the root's length, so that a Bcast whose counts differ between the ranks
   still takes as many slots everywhere: an error on the reader, the communicator still
   usable, as with the messages */
static int bcast_get(shm_seg_t *s, coll_shm_t *st, char *data, size_t len, int rank,
                     MPIR_Errflag_t *errflag)
{
    size_t off = 0, root_len = 0;
    _Atomic uint64_t *taken = &rank_line(s, rank)->taken;
    do {
        uint64_t k = st->bcasts;
        bcast_head_t *h = &s->head[k % BCAST_SLOTS];
        int mpi_errno = wait_for(&h->seq, (uint32_t)k + 1);
        if (mpi_errno)
            return mpi_errno;
        root_len = h->len;
        size_t n = h->n;
        if (off < len)
            memcpy(data + off, s->ring[k % BCAST_SLOTS], MPL_MIN(n, len - off));
        if (h->root_err && !*errflag)
            *errflag = MPIR_ERR_OTHER;
        st->bcasts = k + h->slots;
        atomic_store_explicit(taken, st->bcasts, memory_order_release);
        off += n;
    } while (off < root_len);
    if (root_len != len) {
        *errflag = MPIR_ERR_OTHER;
        return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                    MPI_ERR_OTHER, "**collective_size_mismatch",
                                    "**collective_size_mismatch %d %d", (int)root_len, (int)len);
    }
    return MPI_SUCCESS;
}

int MPIDI_PSCOM_coll_shm_bcast(void *data, size_t len, int root, MPIR_Comm *comm,
                               MPIR_Errflag_t *errflag, int *mpi_errno)
{
    /* on 2 ranks the tree's one message costs less than the two copies (32 KiB: 6.4-7.5 us
       against 5-15; 8 B-4 KiB level or slower) */
    if (len > MPIDI_PSCOM_COLL_SHM_BCAST_MAX || comm->local_size < 3)
        return 0;
    shm_seg_t *s = segment(comm, errflag, mpi_errno);
    if (!s)
        return *mpi_errno != MPI_SUCCESS;
    coll_shm_t *st = &comm->dev.ch4.netmod.pscom.coll_shm;
    if (comm->rank != root)
        *mpi_errno = bcast_get(s, st, data, len, comm->rank, errflag);
    else
        *mpi_errno = bcast_put(s, st, data, len, *errflag != 0, root, comm->local_size);
    return 1;
}
