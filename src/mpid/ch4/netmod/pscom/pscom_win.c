/*
 * RMA windows: MPIDIG implements every flavour and operation over our active messages.
 * With --without-ch4-shmmods these entry points are called directly by MPID_Win_*; a window
 * allocated with psnam_* info keys is a PSNAM window instead (pscom_psnam.h).
 */
#include "mpidimpl.h" /* first: it pulls in our inline headers, which need pscom_impl.h */
#include "pscom_impl.h"
#include "pscom_psnam.h"

int MPIDI_PSCOM_mpi_win_set_info(MPIR_Win *win, MPIR_Info *info)
{
    return MPIDIG_mpi_win_set_info(win, info);
}

int MPIDI_PSCOM_mpi_win_get_info(MPIR_Win *win, MPIR_Info **info_p)
{
    int mpi_errno = MPIDIG_mpi_win_get_info(win, info_p);
    if (!mpi_errno && MPIDI_PSNAM_WIN(win))
        mpi_errno = MPIDI_PSNAM_get_info(win, *info_p);
    return mpi_errno;
}

int MPIDI_PSCOM_mpi_win_free(MPIR_Win **win_ptr)
{
    if (MPIDI_PSNAM_WIN(*win_ptr))
        return MPIDI_PSNAM_free(win_ptr);
    return MPIDIG_mpi_win_free(win_ptr);
}

int MPIDI_PSCOM_mpi_win_create(void *base, MPI_Aint length, int disp_unit, MPIR_Info *info,
                               MPIR_Comm *comm_ptr, MPIR_Win **win_ptr)
{
    return MPIDIG_mpi_win_create(base, length, disp_unit, info, comm_ptr, win_ptr);
}

int MPIDI_PSCOM_mpi_win_attach(MPIR_Win *win, void *base, MPI_Aint size)
{
    return MPIDIG_mpi_win_attach(win, base, size);
}

int MPIDI_PSCOM_mpi_win_allocate_shared(MPI_Aint size, int disp_unit, MPIR_Info *info_ptr,
                                        MPIR_Comm *comm_ptr, void **base_ptr, MPIR_Win **win_ptr)
{
    return MPIDIG_mpi_win_allocate_shared(size, disp_unit, info_ptr, comm_ptr, base_ptr, win_ptr);
}

int MPIDI_PSCOM_mpi_win_detach(MPIR_Win *win, const void *base)
{
    return MPIDIG_mpi_win_detach(win, base);
}

int MPIDI_PSCOM_mpi_win_allocate(MPI_Aint size, int disp_unit, MPIR_Info *info, MPIR_Comm *comm,
                                 void *baseptr, MPIR_Win **win)
{
    if (MPIDI_PSNAM_wants(info))
        return MPIDI_PSNAM_allocate(size, disp_unit, info, comm, baseptr, win);
    return MPIDIG_mpi_win_allocate(size, disp_unit, info, comm, baseptr, win);
}

int MPIDI_PSCOM_mpi_win_create_dynamic(MPIR_Info *info, MPIR_Comm *comm, MPIR_Win **win)
{
    return MPIDIG_mpi_win_create_dynamic(info, comm, win);
}

/* Hooks MPIDIG calls back: no per-window pscom state yet. */
int MPIDI_PSCOM_mpi_win_create_hook(MPIR_Win *win)
{
    (void)win;
    return MPI_SUCCESS;
}

int MPIDI_PSCOM_mpi_win_allocate_hook(MPIR_Win *win)
{
    (void)win;
    return MPI_SUCCESS;
}

int MPIDI_PSCOM_mpi_win_allocate_shared_hook(MPIR_Win *win)
{
    (void)win;
    return MPI_SUCCESS;
}

int MPIDI_PSCOM_mpi_win_create_dynamic_hook(MPIR_Win *win)
{
    (void)win;
    return MPI_SUCCESS;
}

int MPIDI_PSCOM_mpi_win_attach_hook(MPIR_Win *win, void *base, MPI_Aint size)
{
    (void)win;
    (void)base;
    (void)size;
    return MPI_SUCCESS;
}

int MPIDI_PSCOM_mpi_win_detach_hook(MPIR_Win *win, const void *base)
{
    (void)win;
    (void)base;
    return MPI_SUCCESS;
}

int MPIDI_PSCOM_mpi_win_free_hook(MPIR_Win *win)
{
    (void)win;
    return MPI_SUCCESS;
}
