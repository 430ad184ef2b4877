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

/* A Bcast's slot (a Bcast takes one per BCAST_PART bytes): the root waits until
   every rank took what it put there BCAST_SLOTS parts before (mostly long done), puts the data
   in and sets seq; the others wait for seq, copy and count themselves in done. Nobody waits for
   anybody but the root, which may run up to BCAST_SLOTS parts ahead. */
#define BCAST_SLOTS 64
#define BCAST_PART  1024
typedef struct {
    _Alignas(CACHE_LINE) _Atomic uint32_t seq;  /* the part's number + 1 once its data is in */
    uint32_t root_err;                          /* the root's errflag was set */
    uint64_t len;                               /* the root's whole Bcast */
    _Alignas(CACHE_LINE) _Atomic uint32_t done; /* ranks that took it */
    _Alignas(CACHE_LINE) unsigned char data[BCAST_PART];
} bcast_slot_t;

typedef struct {
    _Alignas(CACHE_LINE) _Atomic uint32_t arrived; /* ranks in the current round */
    _Alignas(CACHE_LINE) _Atomic uint32_t gen;     /* rounds completed */
    bcast_slot_t bcast[BCAST_SLOTS];
    /* communicators of up to MPIDI_PSCOM_COLL_SHM_DATA_RANKS: two sets (by the round's parity)
       of a MPIDI_PSCOM_COLL_SHM_SLOT per rank. A rank writes a set before it arrives and
       reads it after the release; it writes that set again only after the next round's
       release, for which every rank must have arrived, done with reading. */
    _Alignas(CACHE_LINE) unsigned char data[];
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
    size_t len = sizeof(shm_seg_t);
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

/* Until *v (acquired) is want, with MPI progress meanwhile (and its yields and naps) */
static int wait_for(_Atomic uint32_t *v, uint32_t want)
{
    while (atomic_load_explicit(v, memory_order_acquire) != want) {
        int mpi_errno = MPID_Progress_test(NULL);
        if (mpi_errno)
            return mpi_errno;
        MPIDI_PROGRESS_YIELD();
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
    return s->data + (gen & 1) * (size_t)size * MPIDI_PSCOM_COLL_SHM_SLOT;
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

/* The root's part of a Bcast through the k-th slot: len of its whole Bcast, n bytes of it here */
static int bcast_put(shm_seg_t *s, unsigned long long k, const char *data, size_t n, size_t len,
                     int err, int size)
{
    bcast_slot_t *b = &s->bcast[k % BCAST_SLOTS];
    if (k >= BCAST_SLOTS) {
        int mpi_errno = wait_for(&b->done, (uint32_t)size - 1);
        if (mpi_errno)
            return mpi_errno;
    }
    /* readers of this part count from 0 only after they see seq, stored after this */
    atomic_store_explicit(&b->done, 0, memory_order_relaxed);
    b->len = len;
    b->root_err = err;
    memcpy(b->data, data, n);
    atomic_store_explicit(&b->seq, (uint32_t)k + 1, memory_order_release);
    MPIDI_PSCOM_not_idle();
    return MPI_SUCCESS;
}

/* Readers follow the root's length, so that a Bcast whose counts differ between the ranks
   still takes as many slots everywhere: an error on the reader, the communicator still
   usable, as with the messages */
static int bcast_get(shm_seg_t *s, coll_shm_t *st, char *data, size_t len, MPIR_Errflag_t *errflag)
{
    size_t off = 0, root_len = 0;
    do {
        unsigned long long k = st->bcasts++;
        bcast_slot_t *b = &s->bcast[k % BCAST_SLOTS];
        int mpi_errno = wait_for(&b->seq, (uint32_t)k + 1);
        if (mpi_errno)
            return mpi_errno;
        root_len = b->len;
        size_t n = MPL_MIN(root_len - off, (size_t)BCAST_PART);
        if (off < len)
            memcpy(data + off, b->data, MPL_MIN(n, len - off));
        if (b->root_err && !*errflag)
            *errflag = MPIR_ERR_OTHER;
        atomic_fetch_add_explicit(&b->done, 1, memory_order_release);
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
    if (comm->rank != root) {
        *mpi_errno = bcast_get(s, st, data, len, errflag);
        return 1;
    }
    size_t off = 0;
    do {
        size_t n = MPL_MIN(len - off, (size_t)BCAST_PART);
        *mpi_errno =
            bcast_put(s, st->bcasts++, (char *)data + off, n, len, *errflag != 0, comm->local_size);
        off += n;
    } while (off < len && !*mpi_errno);
    return 1;
}
