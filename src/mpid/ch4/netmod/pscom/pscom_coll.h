/*
 * Blocking collectives: MPICH's generic ones (netmod_am_fallback_coll.h: MPIR_*_impl over our
 * point-to-point), except that Barrier, Bcast, Reduce, Allreduce and Scan go through
 * pscom_coll_msa.c when PSP_MSA_AWARE_COLLOPS=1 (hierarchical: node, module, world) or
 * PSP_DEBUG_STATS=1 (inter-module traffic per collective); Allgather and Alltoall only for the
 * statistic. Otherwise the hooks cost one predictable branch. Alltoall of small blocks is ours
 * (pscom_coll_small.c); the shortcuts ahead of ch4's search are below.
 */
#ifndef PSCOM_COLL_H_INCLUDED
#define PSCOM_COLL_H_INCLUDED

#include "pscom_impl.h"

/* MPICH's versions under other names; ours below take the names ch4 calls */
#define MPIDI_NM_mpi_barrier   MPIDI_PSCOM_flat_barrier
#define MPIDI_NM_mpi_bcast     MPIDI_PSCOM_flat_bcast
#define MPIDI_NM_mpi_reduce    MPIDI_PSCOM_flat_reduce
#define MPIDI_NM_mpi_allreduce MPIDI_PSCOM_flat_allreduce
#define MPIDI_NM_mpi_scan      MPIDI_PSCOM_flat_scan
#define MPIDI_NM_mpi_allgather MPIDI_PSCOM_flat_allgather
#define MPIDI_NM_mpi_alltoall  MPIDI_PSCOM_flat_alltoall
#include "netmod_am_fallback_coll.h"
#undef MPIDI_NM_mpi_barrier
#undef MPIDI_NM_mpi_bcast
#undef MPIDI_NM_mpi_reduce
#undef MPIDI_NM_mpi_allreduce
#undef MPIDI_NM_mpi_scan
#undef MPIDI_NM_mpi_allgather
#undef MPIDI_NM_mpi_alltoall

/* pscom_coll_msa.c */
int MPIDI_PSCOM_msa_barrier(MPIR_Comm *comm, MPIR_Errflag_t *errflag);
int MPIDI_PSCOM_msa_bcast(void *buffer, MPI_Aint count, MPI_Datatype datatype, int root,
                          MPIR_Comm *comm, MPIR_Errflag_t *errflag);
int MPIDI_PSCOM_msa_reduce(const void *sendbuf, void *recvbuf, MPI_Aint count,
                           MPI_Datatype datatype, MPI_Op op, int root, MPIR_Comm *comm,
                           MPIR_Errflag_t *errflag);
int MPIDI_PSCOM_msa_allreduce(const void *sendbuf, void *recvbuf, MPI_Aint count,
                              MPI_Datatype datatype, MPI_Op op, MPIR_Comm *comm,
                              MPIR_Errflag_t *errflag);
int MPIDI_PSCOM_msa_scan(const void *sendbuf, void *recvbuf, MPI_Aint count, MPI_Datatype datatype,
                         MPI_Op op, MPIR_Comm *comm, MPIR_Errflag_t *errflag);
int MPIDI_PSCOM_msa_allgather(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                              void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype,
                              MPIR_Comm *comm, MPIR_Errflag_t *errflag);
int MPIDI_PSCOM_msa_alltoall(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                             void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype,
                             MPIR_Comm *comm, MPIR_Errflag_t *errflag);

/* Flat algorithms (every rank sends straight to every other, or a tree without node levels)
   on communicators of up to this many ranks */
#define MPIDI_PSCOM_FLAT_COLL_MAX_RANKS 8

/* Where the algorithms that send to every rank at once (pscom_coll_small.c: Allgather, Alltoall
   of blocks over 1 KiB, Allreduce over 1 KiB on 3 to 8 ranks) serve: a communicator within one
   node, through shared memory, where a message costs a copy. Over tcp, 8 ranks on one host took
   up to twice as long that way as MPICH's fewer, larger steps (Allgather of 8 B-16 KiB blocks,
   Allreduce of 4 KiB-1 MiB: each message a system call and a wakeup). The same answer on every
   rank: MPICH's node map, and PSP_SHM, which the job's environment sets alike everywhere. */
MPL_STATIC_INLINE_PREFIX int MPIDI_PSCOM_comm_node_shm(MPIR_Comm *comm)
{
    return MPIDI_PSCOM_global.shm_on &&
           (comm->hierarchy_kind == MPIR_COMM_HIERARCHY_KIND__NODE ||
            (comm->node_comm && comm->node_comm->local_size == comm->local_size));
}

MPL_STATIC_INLINE_PREFIX int MPIDI_PSCOM_direct_coll_ok(MPIR_Comm *comm)
{
    return comm->local_size <= MPIDI_PSCOM_FLAT_COLL_MAX_RANKS && MPIDI_PSCOM_comm_node_shm(comm);
}

/* pscom_coll_small.c: Allreduce straight over pscom, ahead of ch4's algorithm search
   (maint/patches/0007): of at most this many bytes on any number of ranks by recursive doubling
   (the partner's data on the stack); of any size on 2 ranks, where it sends as many bytes as
   any algorithm in one step instead of MPICH's two, and sends the user's send buffer as it is
   (the partner's data through a kept buffer, in segments); of any size on 3 to 8 ranks of one
   node (MPIDI_PSCOM_direct_coll_ok) as a reduce-scatter and an allgather, each one step of
   sends to all (MPICH: 2 log2(p) steps that each wait for a partner). */
#define MPIDI_PSCOM_ALLREDUCE_SMALL_MAX 1024
int MPIDI_PSCOM_allreduce_direct(const void *sendbuf, void *recvbuf, MPI_Aint count,
                                 MPI_Datatype datatype, MPI_Op op, MPIR_Comm *comm,
                                 MPIR_Errflag_t *errflag);

/* Builtin type and operation (so: contiguous, commutative; every rank passes the same count and
   type to a reduction), an intracommunicator, no algorithm chosen by the user, MSA hooks off.
   Only what is the same on every rank: device memory and the thread level, which may differ
   between ranks, are dealt with inside (staging; the wait lets the global lock go). */
MPL_STATIC_INLINE_PREFIX int MPIDI_PSCOM_allreduce_direct_ok(const void *sendbuf, void *recvbuf,
                                                             MPI_Aint count, MPI_Datatype datatype,
                                                             MPI_Op op, MPIR_Comm *comm)
{
    (void)sendbuf;
    (void)recvbuf;
    return HANDLE_IS_BUILTIN(datatype) && HANDLE_IS_BUILTIN(op) && count >= 0 &&
           MPIR_Datatype_get_basic_size(datatype) > 0 &&
           (comm->local_size == 2 ||
            count <= MPIDI_PSCOM_ALLREDUCE_SMALL_MAX / MPIR_Datatype_get_basic_size(datatype) ||
            MPIDI_PSCOM_direct_coll_ok(comm)) &&
           comm->comm_kind == MPIR_COMM_KIND__INTRACOMM &&
           MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM == MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM_auto &&
           !MPIDI_PSCOM_msa.coll_hooks;
}

/* pscom_reduce.c: out = mine OP theirs (out may be mine; theirs is apart from both), with
   vectorized loops for the common builtin types and operations, else MPIR_Reduce_local */
int MPIDI_PSCOM_reduce(void *out, const void *mine, const void *theirs, MPI_Aint count,
                       MPI_Datatype datatype, MPI_Op op);

void MPIDI_PSCOM_coll_small_finalize(void); /* frees the requests it keeps */

#define MPIDI_NM_ALLREDUCE_SHORTCUT MPIDI_PSCOM_allreduce_direct_ok
#define MPIDI_NM_allreduce_shortcut MPIDI_PSCOM_allreduce_direct

/* Barrier and Bcast ahead of ch4's search (maint/patches/0008): flat algorithms, so only where
   MPICH's node-aware ones gain nothing: a communicator within one node, or a small one. The
   test gives the same answer on every rank of comm, as it must. */
MPL_STATIC_INLINE_PREFIX int MPIDI_PSCOM_flat_coll_ok(MPIR_Comm *comm)
{
    return comm->comm_kind == MPIR_COMM_KIND__INTRACOMM && !MPIDI_PSCOM_msa.coll_hooks &&
           (comm->local_size <= MPIDI_PSCOM_FLAT_COLL_MAX_RANKS ||
            comm->hierarchy_kind == MPIR_COMM_HIERARCHY_KIND__NODE ||
            (comm->node_comm && comm->node_comm->local_size == comm->local_size));
}

/* Allgather on 2 ranks, and on up to 8 of one node, ahead of ch4's search (maint/patches/0010):
   every block straight to every rank, ours sent from the send buffer as it is
   (pscom_coll_small.c) */
int MPIDI_PSCOM_allgather_direct(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                                 void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype,
                                 MPIR_Comm *comm, MPIR_Errflag_t *errflag);

MPL_STATIC_INLINE_PREFIX int MPIDI_PSCOM_allgather_direct_ok(MPIR_Comm *comm)
{
    return (comm->local_size == 2 || MPIDI_PSCOM_direct_coll_ok(comm)) &&
           comm->comm_kind == MPIR_COMM_KIND__INTRACOMM &&
           MPIR_CVAR_ALLGATHER_INTRA_ALGORITHM == MPIR_CVAR_ALLGATHER_INTRA_ALGORITHM_auto &&
           !MPIDI_PSCOM_msa.coll_hooks;
}

#define MPIDI_NM_ALLGATHER_SHORTCUT MPIDI_PSCOM_allgather_direct_ok
#define MPIDI_NM_allgather_shortcut MPIDI_PSCOM_allgather_direct

int MPIDI_PSCOM_barrier_small(MPIR_Comm *comm, MPIR_Errflag_t *errflag);

MPL_STATIC_INLINE_PREFIX int MPIDI_PSCOM_barrier_small_ok(MPIR_Comm *comm)
{
    return MPIR_CVAR_BARRIER_INTRA_ALGORITHM == MPIR_CVAR_BARRIER_INTRA_ALGORITHM_auto &&
           MPIDI_PSCOM_flat_coll_ok(comm);
}

#define MPIDI_NM_BARRIER_SHORTCUT MPIDI_PSCOM_barrier_small_ok
#define MPIDI_NM_barrier_shortcut MPIDI_PSCOM_barrier_small

/* Alltoall of blocks up to this size, and of any size on up to 8 ranks of one node
   (MPIDI_PSCOM_direct_coll_ok): all receives posted, all blocks' sends started, then waited for
   (pscom_coll_small.c), instead of MPICH's dependent steps (pairwise from 32 KiB: 7 on 8 ranks,
   each waiting for a partner). The block size and the number of ranks are the same on every
   rank (MPI_IN_PLACE too: it takes recvcount), so every rank makes the same choice. */
#define MPIDI_PSCOM_ALLTOALL_SMALL_MAX 1024
int MPIDI_PSCOM_alltoall_small(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                               void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype,
                               MPIR_Comm *comm, MPIR_Errflag_t *errflag);

MPL_STATIC_INLINE_PREFIX int MPIDI_PSCOM_alltoall_small_ok(MPI_Aint recvcount,
                                                           MPI_Datatype recvtype, MPIR_Comm *comm)
{
    MPI_Aint type_size;
    MPIR_Datatype_get_size_macro(recvtype, type_size);
    return comm->comm_kind == MPIR_COMM_KIND__INTRACOMM && recvcount >= 0 &&
           (type_size == 0 || recvcount <= MPIDI_PSCOM_ALLTOALL_SMALL_MAX / type_size ||
            MPIDI_PSCOM_direct_coll_ok(comm)) &&
           MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM == MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM_auto;
}

/* Bcast down a binomial tree (pscom_coll_small.c): up to 12 KiB, as MPICH's binomial one
   (MPIR_CVAR_BCAST_SHORT_MSG_SIZE), wherever the flat algorithms serve; on communicators of up
   to 8 ranks up to PSP_MPI_BCAST_TREE_MAX (default 64 KiB), where MPICH sends scatter and
   allgather. With so few ranks the tree has at most 3 levels, and a rank forwards the whole
   message to all its children at once as soon as it has it; scatter and allgather take 6
   dependent steps for 8 ranks, each waiting for a partner. 64 KiB on 8 ranks sharing 2 CPUs:
   153-169 -> 70-74 us (Open MPI 48-49, its own scatter-allgather 127); 16 KiB 57-69 -> 30-41.
   Beyond 64 KiB the tree lost on 4 ranks (256 KiB 61-70 -> 102-216 us, 1 MiB 323-337 -> 442-1139:
   each child copies the whole message, where scatter and allgather share it out). */
#define MPIDI_PSCOM_BCAST_SMALL_MAX 12288
int MPIDI_PSCOM_bcast_tree(void *buffer, MPI_Aint count, MPI_Datatype datatype, int root,
                           MPIR_Comm *comm, MPIR_Errflag_t *errflag);

MPL_STATIC_INLINE_PREFIX int MPIDI_PSCOM_bcast_tree_ok(void *buffer, MPI_Aint count,
                                                       MPI_Datatype datatype, int root,
                                                       MPIR_Comm *comm)
{
    (void)buffer;
    (void)root;
    /* the size only: datatypes may differ between ranks as long as their signatures match */
    MPI_Aint type_size;
    MPIR_Datatype_get_size_macro(datatype, type_size);
    if (count < 0 || MPIR_CVAR_BCAST_INTRA_ALGORITHM != MPIR_CVAR_BCAST_INTRA_ALGORITHM_auto ||
        !MPIDI_PSCOM_flat_coll_ok(comm))
        return 0;
    size_t max = MPIDI_PSCOM_BCAST_SMALL_MAX;
    if (comm->local_size <= MPIDI_PSCOM_FLAT_COLL_MAX_RANKS &&
        MPIDI_PSCOM_global.bcast_tree_max > max)
        max = MPIDI_PSCOM_global.bcast_tree_max;
    return type_size == 0 || (size_t)count <= max / (size_t)type_size;
}

#define MPIDI_NM_BCAST_SHORTCUT MPIDI_PSCOM_bcast_tree_ok
#define MPIDI_NM_bcast_shortcut MPIDI_PSCOM_bcast_tree

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_barrier(MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    if (unlikely(MPIDI_PSCOM_msa.coll_hooks))
        return MPIDI_PSCOM_msa_barrier(comm, errflag);
    return MPIR_Barrier_impl(comm, errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_bcast(void *buffer, MPI_Aint count, MPI_Datatype datatype,
                                                int root, MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    if (unlikely(MPIDI_PSCOM_msa.coll_hooks))
        return MPIDI_PSCOM_msa_bcast(buffer, count, datatype, root, comm, errflag);
    return MPIR_Bcast_impl(buffer, count, datatype, root, comm, errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_reduce(const void *sendbuf, void *recvbuf, MPI_Aint count,
                                                 MPI_Datatype datatype, MPI_Op op, int root,
                                                 MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    /* ch4's node-aware composition passes the user root's MPI_IN_PLACE on to the reduce within
       its node, where that process is not the root (MPICH 4.0.2; the reduce copied from
       MPI_IN_PLACE and crashed): there its data is in recvbuf */
    if (sendbuf == MPI_IN_PLACE && comm->rank != root)
        sendbuf = recvbuf;
    if (unlikely(MPIDI_PSCOM_msa.coll_hooks))
        return MPIDI_PSCOM_msa_reduce(sendbuf, recvbuf, count, datatype, op, root, comm, errflag);
    return MPIR_Reduce_impl(sendbuf, recvbuf, count, datatype, op, root, comm, errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_allreduce(const void *sendbuf, void *recvbuf,
                                                    MPI_Aint count, MPI_Datatype datatype,
                                                    MPI_Op op, MPIR_Comm *comm,
                                                    MPIR_Errflag_t *errflag)
{
    if (unlikely(MPIDI_PSCOM_msa.coll_hooks))
        return MPIDI_PSCOM_msa_allreduce(sendbuf, recvbuf, count, datatype, op, comm, errflag);
    return MPIR_Allreduce_impl(sendbuf, recvbuf, count, datatype, op, comm, errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_scan(const void *sendbuf, void *recvbuf, MPI_Aint count,
                                               MPI_Datatype datatype, MPI_Op op, MPIR_Comm *comm,
                                               MPIR_Errflag_t *errflag)
{
    if (unlikely(MPIDI_PSCOM_msa.coll_hooks))
        return MPIDI_PSCOM_msa_scan(sendbuf, recvbuf, count, datatype, op, comm, errflag);
    return MPIR_Scan_impl(sendbuf, recvbuf, count, datatype, op, comm, errflag);
}

/* Allgather by recursive doubling (log2(p) steps) on a power-of-two communicator that is not one
   node's shared memory, up to this many bytes in all; MPICH takes its ring (p - 1 steps) from
   512 KiB. Each step waits for a partner, and over tcp each message is a system call and a
   wakeup: 8 ranks on one host, 64 KiB blocks, 3100-4200 -> 1250-1970 us (Open MPI 2600-2700);
   256 KiB 10600-12800 -> 5800-6500, 16 ranks of 64 KiB 19000-21600 -> 9300-10600; 1 MiB blocks
   on 8 ranks level. Within one node over shm the ring stays (16 ranks, 64 KiB: ring 5800, this
   5900-7300 us). Every rank decides alike: sizes, the node map and PSP_SHM. */
#define MPIDI_PSCOM_ALLGATHER_RD_MAX (2 * 1024 * 1024)

MPL_STATIC_INLINE_PREFIX int MPIDI_PSCOM_allgather_rd_ok(MPI_Aint recvcount, MPI_Datatype recvtype,
                                                         MPIR_Comm *comm)
{
    MPI_Aint type_size;
    int pof2;
    if (comm->comm_kind != MPIR_COMM_KIND__INTRACOMM || recvcount <= 0 ||
        MPIR_CVAR_ALLGATHER_INTRA_ALGORITHM != MPIR_CVAR_ALLGATHER_INTRA_ALGORITHM_auto ||
        !MPL_is_pof2(comm->local_size, &pof2))
        return 0;
    if (MPIDI_PSCOM_comm_node_shm(comm))
        return 0;
    /* the size only: receive types may differ between ranks as long as their signatures match
       (so may their extents) */
    MPIR_Datatype_get_size_macro(recvtype, type_size);
    return recvcount <= MPIDI_PSCOM_ALLGATHER_RD_MAX / comm->local_size / MPL_MAX(type_size, 1);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_allgather(const void *sendbuf, MPI_Aint sendcount,
                                                    MPI_Datatype sendtype, void *recvbuf,
                                                    MPI_Aint recvcount, MPI_Datatype recvtype,
                                                    MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    if (unlikely(MPIDI_PSCOM_msa.coll_hooks))
        return MPIDI_PSCOM_msa_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                         comm, errflag);
    if (MPIDI_PSCOM_allgather_rd_ok(recvcount, recvtype, comm))
        return MPIR_Allgather_intra_recursive_doubling(sendbuf, sendcount, sendtype, recvbuf,
                                                       recvcount, recvtype, comm, errflag);
    return MPIR_Allgather_impl(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                               errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_alltoall(const void *sendbuf, MPI_Aint sendcount,
                                                   MPI_Datatype sendtype, void *recvbuf,
                                                   MPI_Aint recvcount, MPI_Datatype recvtype,
                                                   MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    if (unlikely(MPIDI_PSCOM_msa.coll_hooks))
        return MPIDI_PSCOM_msa_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                        comm, errflag);
    if (MPIDI_PSCOM_alltoall_small_ok(recvcount, recvtype, comm))
        return MPIDI_PSCOM_alltoall_small(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                          recvtype, comm, errflag);
    return MPIR_Alltoall_impl(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                              errflag);
}

#endif /* PSCOM_COLL_H_INCLUDED */
