/* Datatype and op hooks: non-contiguous data is packed by the netmod, so nothing to build. */
#include "mpidimpl.h" /* first: it pulls in our inline headers, which need pscom_impl.h */
#include "pscom_impl.h"

int MPIDI_PSCOM_mpi_type_commit_hook(MPIR_Datatype *datatype_p)
{
    (void)datatype_p;
    return MPI_SUCCESS;
}

int MPIDI_PSCOM_mpi_type_free_hook(MPIR_Datatype *datatype_p)
{
    (void)datatype_p;
    return MPI_SUCCESS;
}

int MPIDI_PSCOM_mpi_op_commit_hook(MPIR_Op *op_p)
{
    (void)op_p;
    return MPI_SUCCESS;
}

int MPIDI_PSCOM_mpi_op_free_hook(MPIR_Op *op_p)
{
    (void)op_p;
    return MPI_SUCCESS;
}
