/*
 * Collectives through a segment that the ranks of a communicator within one node's shared
 * memory map (pscom_coll_shm.c)
 */
#ifndef PSCOM_COLL_SHM_H_INCLUDED
#define PSCOM_COLL_SHM_H_INCLUDED

/* Data of up to this many bytes per rank, on communicators of up to this many ranks */
#define MPIDI_PSCOM_COLL_SHM_SLOT       1024
#define MPIDI_PSCOM_COLL_SHM_DATA_RANKS 64
/* Bcasts of up to this many bytes (the ring: a larger one would wait for itself) */
#define MPIDI_PSCOM_COLL_SHM_BCAST_MAX (64 * 1024)

/* 1: the Barrier ran here (*mpi_errno its result); 0: take the messages */
int MPIDI_PSCOM_coll_shm_barrier(MPIR_Comm *comm, MPIR_Errflag_t *errflag, int *mpi_errno);
/* 1: the Allreduce of len bytes (in and out contiguous host memory) ran here; 0: messages */
int MPIDI_PSCOM_coll_shm_allreduce(const void *in, void *out, MPI_Aint count, MPI_Datatype datatype,
                                   MPI_Op op, size_t len, MPIR_Comm *comm, MPIR_Errflag_t *errflag,
                                   int *mpi_errno);
/* 1: the Allgather ran here: our block of blk bytes at mine, rank r's goes to out + r * stride
   (not ours); 0: messages */
int MPIDI_PSCOM_coll_shm_allgather(const void *mine, size_t blk, char *out, size_t stride,
                                   MPIR_Comm *comm, MPIR_Errflag_t *errflag, int *mpi_errno);
/* 1: the Alltoall ran here: our block for rank r at sb + r * blk, rank r's to rb + r * blk (ours
   too); 0: messages */
int MPIDI_PSCOM_coll_shm_alltoall(const char *sb, char *rb, size_t blk, MPIR_Comm *comm,
                                  MPIR_Errflag_t *errflag, int *mpi_errno);
/* 1: the Bcast of len bytes at data (contiguous host memory) ran here; 0: messages */
int MPIDI_PSCOM_coll_shm_bcast(void *data, size_t len, int root, MPIR_Comm *comm,
                               MPIR_Errflag_t *errflag, int *mpi_errno);
void MPIDI_PSCOM_coll_shm_free(MPIR_Comm *comm); /* the communicator goes away */

#endif /* PSCOM_COLL_SHM_H_INCLUDED */
