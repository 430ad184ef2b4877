/* Communicator hooks: pscom needs no per-communicator state (matching uses context ids); the
 * MSA-aware collectives keep their sub-communicators here (pscom_coll_msa.c). */
#include "mpidimpl.h" /* first: it pulls in our inline headers, which need pscom_impl.h */
#include "pscom_impl.h"
#include "pscom_coll_shm.h"

int MPIDI_PSCOM_mpi_comm_commit_pre_hook(MPIR_Comm *comm)
{
    comm->dev.ch4.netmod.pscom.msa = NULL;
    memset(&comm->dev.ch4.netmod.pscom.coll_shm, 0, sizeof(comm->dev.ch4.netmod.pscom.coll_shm));
    return MPI_SUCCESS;
}

int MPIDI_PSCOM_mpi_comm_commit_post_hook(MPIR_Comm *comm)
{
    (void)comm;
    return MPI_SUCCESS;
}

int MPIDI_PSCOM_mpi_comm_free_hook(MPIR_Comm *comm)
{
    MPIDI_PSCOM_msa_comm_free(comm);
    MPIDI_PSCOM_coll_shm_free(comm);
    return MPI_SUCCESS;
}

int MPIDI_PSCOM_comm_set_hints(MPIR_Comm *comm, MPIR_Info *info)
{
    (void)comm;
    (void)info;
    return MPI_SUCCESS;
}
