/*
 * RMA entry points of the netmod. An ordinary window (and a PSNAM shm window) is MPIDIG's: its
 * operations travel as our active messages and the target process applies them. A PSNAM nam
 * window's memory is in psnamd, so its operations and synchronisations go there instead
 * (pscom_psnam_nam.c); the test is one load of a pointer that is NULL for every other window.
 */
#ifndef PSCOM_RMA_H_INCLUDED
#define PSCOM_RMA_H_INCLUDED

#include "pscom_psnam.h"

#define NAM(win) unlikely(MPIDI_PSNAM_NAM(win) != NULL)

/* ---- synchronisation ---- */

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_start(MPIR_Group *group, int assert, MPIR_Win *win)
{
    return NAM(win) ? MPIDI_PSNAM_start(group, assert, win)
                    : MPIDIG_mpi_win_start(group, assert, win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_complete(MPIR_Win *win)
{
    return NAM(win) ? MPIDI_PSNAM_complete(win) : MPIDIG_mpi_win_complete(win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_post(MPIR_Group *group, int assert, MPIR_Win *win)
{
    return NAM(win) ? MPIDI_PSNAM_post(group, assert, win)
                    : MPIDIG_mpi_win_post(group, assert, win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_wait(MPIR_Win *win)
{
    return NAM(win) ? MPIDI_PSNAM_wait(win) : MPIDIG_mpi_win_wait(win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_test(MPIR_Win *win, int *flag)
{
    return NAM(win) ? MPIDI_PSNAM_test(win, flag) : MPIDIG_mpi_win_test(win, flag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_lock(int lock_type, int rank, int assert,
                                                   MPIR_Win *win, MPIDI_av_entry_t *addr)
{
    (void)addr;
    return NAM(win) ? MPIDI_PSNAM_lock(lock_type, rank, assert, win)
                    : MPIDIG_mpi_win_lock(lock_type, rank, assert, win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_unlock(int rank, MPIR_Win *win,
                                                     MPIDI_av_entry_t *addr)
{
    (void)addr;
    return NAM(win) ? MPIDI_PSNAM_unlock(rank, win) : MPIDIG_mpi_win_unlock(rank, win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_fence(int assert, MPIR_Win *win)
{
    return NAM(win) ? MPIDI_PSNAM_fence(assert, win) : MPIDIG_mpi_win_fence(assert, win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_shared_query(MPIR_Win *win, int rank, MPI_Aint *size,
                                                           int *disp_unit, void *baseptr)
{
    if (unlikely(MPIDI_PSNAM_WIN(win) != NULL))
        return MPIDI_PSNAM_shared_query(win, rank, size, disp_unit, baseptr);
    return MPIDIG_mpi_win_shared_query(win, rank, size, disp_unit, baseptr);
}

/* a nam window's flush waits for psnamd's answers: remote completion, so local is implied */
MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_flush(int rank, MPIR_Win *win, MPIDI_av_entry_t *addr)
{
    (void)addr;
    return NAM(win) ? MPIDI_PSNAM_flush(win) : MPIDIG_mpi_win_flush(rank, win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_flush_local(int rank, MPIR_Win *win,
                                                          MPIDI_av_entry_t *addr)
{
    (void)addr;
    return NAM(win) ? MPIDI_PSNAM_flush(win) : MPIDIG_mpi_win_flush_local(rank, win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_flush_all(MPIR_Win *win)
{
    return NAM(win) ? MPIDI_PSNAM_flush(win) : MPIDIG_mpi_win_flush_all(win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_flush_local_all(MPIR_Win *win)
{
    return NAM(win) ? MPIDI_PSNAM_flush(win) : MPIDIG_mpi_win_flush_local_all(win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_lock_all(int assert, MPIR_Win *win)
{
    return NAM(win) ? MPIDI_PSNAM_lock_all(assert, win) : MPIDIG_mpi_win_lock_all(assert, win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_unlock_all(MPIR_Win *win)
{
    return NAM(win) ? MPIDI_PSNAM_unlock_all(win) : MPIDIG_mpi_win_unlock_all(win);
}

/* a nam window's memory is not this process's: psnamd orders every access */
MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_sync(MPIR_Win *win)
{
    return NAM(win) ? MPI_SUCCESS : MPIDIG_mpi_win_sync(win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_rma_win_cmpl_hook(MPIR_Win *win)
{
    (void)win;
    return MPI_SUCCESS;
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_rma_win_local_cmpl_hook(MPIR_Win *win)
{
    (void)win;
    return MPI_SUCCESS;
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_rma_target_cmpl_hook(int rank, MPIR_Win *win)
{
    (void)rank;
    (void)win;
    return MPI_SUCCESS;
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_rma_target_local_cmpl_hook(int rank, MPIR_Win *win)
{
    (void)rank;
    (void)win;
    return MPI_SUCCESS;
}

/* ---- communication ---- */

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_put(const void *oaddr, int ocount, MPI_Datatype otype,
                                              int trank, MPI_Aint tdisp, int tcount,
                                              MPI_Datatype ttype, MPIR_Win *win,
                                              MPIDI_av_entry_t *addr, MPIDI_winattr_t winattr)
{
    (void)addr;
    (void)winattr;
    if (NAM(win))
        return MPIDI_PSNAM_put(oaddr, ocount, otype, trank, tdisp, tcount, ttype, win, NULL);
    return MPIDIG_mpi_put(oaddr, ocount, otype, trank, tdisp, tcount, ttype, win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_rput(const void *oaddr, int ocount, MPI_Datatype otype,
                                               int trank, MPI_Aint tdisp, int tcount,
                                               MPI_Datatype ttype, MPIR_Win *win,
                                               MPIDI_av_entry_t *addr, MPIDI_winattr_t winattr,
                                               MPIR_Request **request)
{
    (void)addr;
    (void)winattr;
    if (NAM(win))
        return MPIDI_PSNAM_put(oaddr, ocount, otype, trank, tdisp, tcount, ttype, win, request);
    return MPIDIG_mpi_rput(oaddr, ocount, otype, trank, tdisp, tcount, ttype, win, request);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_get(void *oaddr, int ocount, MPI_Datatype otype,
                                              int trank, MPI_Aint tdisp, int tcount,
                                              MPI_Datatype ttype, MPIR_Win *win,
                                              MPIDI_av_entry_t *addr, MPIDI_winattr_t winattr)
{
    (void)addr;
    (void)winattr;
    if (NAM(win))
        return MPIDI_PSNAM_get(oaddr, ocount, otype, trank, tdisp, tcount, ttype, win, NULL);
    return MPIDIG_mpi_get(oaddr, ocount, otype, trank, tdisp, tcount, ttype, win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_rget(void *oaddr, int ocount, MPI_Datatype otype,
                                               int trank, MPI_Aint tdisp, int tcount,
                                               MPI_Datatype ttype, MPIR_Win *win,
                                               MPIDI_av_entry_t *addr, MPIDI_winattr_t winattr,
                                               MPIR_Request **request)
{
    (void)addr;
    (void)winattr;
    if (NAM(win))
        return MPIDI_PSNAM_get(oaddr, ocount, otype, trank, tdisp, tcount, ttype, win, request);
    return MPIDIG_mpi_rget(oaddr, ocount, otype, trank, tdisp, tcount, ttype, win, request);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_accumulate(const void *oaddr, int ocount,
                                                     MPI_Datatype otype, int trank, MPI_Aint tdisp,
                                                     int tcount, MPI_Datatype ttype, MPI_Op op,
                                                     MPIR_Win *win, MPIDI_av_entry_t *addr,
                                                     MPIDI_winattr_t winattr)
{
    (void)addr;
    (void)winattr;
    if (NAM(win))
        return MPIDI_PSNAM_accumulate(oaddr, ocount, otype, NULL, 0, MPI_DATATYPE_NULL, trank,
                                      tdisp, tcount, ttype, op, win, 0, NULL);
    return MPIDIG_mpi_accumulate(oaddr, ocount, otype, trank, tdisp, tcount, ttype, op, win);
}

MPL_STATIC_INLINE_PREFIX int
MPIDI_NM_mpi_raccumulate(const void *oaddr, int ocount, MPI_Datatype otype, int trank,
                         MPI_Aint tdisp, int tcount, MPI_Datatype ttype, MPI_Op op, MPIR_Win *win,
                         MPIDI_av_entry_t *addr, MPIDI_winattr_t winattr, MPIR_Request **request)
{
    (void)addr;
    (void)winattr;
    if (NAM(win))
        return MPIDI_PSNAM_accumulate(oaddr, ocount, otype, NULL, 0, MPI_DATATYPE_NULL, trank,
                                      tdisp, tcount, ttype, op, win, 0, request);
    return MPIDIG_mpi_raccumulate(oaddr, ocount, otype, trank, tdisp, tcount, ttype, op, win,
                                  request);
}

MPL_STATIC_INLINE_PREFIX int
MPIDI_NM_mpi_get_accumulate(const void *oaddr, int ocount, MPI_Datatype otype, void *raddr,
                            int rcount, MPI_Datatype rtype, int trank, MPI_Aint tdisp, int tcount,
                            MPI_Datatype ttype, MPI_Op op, MPIR_Win *win, MPIDI_av_entry_t *addr,
                            MPIDI_winattr_t winattr)
{
    (void)addr;
    (void)winattr;
    if (NAM(win))
        return MPIDI_PSNAM_accumulate(oaddr, ocount, otype, raddr, rcount, rtype, trank, tdisp,
                                      tcount, ttype, op, win, 1, NULL);
    return MPIDIG_mpi_get_accumulate(oaddr, ocount, otype, raddr, rcount, rtype, trank, tdisp,
                                     tcount, ttype, op, win);
}

MPL_STATIC_INLINE_PREFIX int
MPIDI_NM_mpi_rget_accumulate(const void *oaddr, int ocount, MPI_Datatype otype, void *raddr,
                             int rcount, MPI_Datatype rtype, int trank, MPI_Aint tdisp, int tcount,
                             MPI_Datatype ttype, MPI_Op op, MPIR_Win *win, MPIDI_av_entry_t *addr,
                             MPIDI_winattr_t winattr, MPIR_Request **request)
{
    (void)addr;
    (void)winattr;
    if (NAM(win))
        return MPIDI_PSNAM_accumulate(oaddr, ocount, otype, raddr, rcount, rtype, trank, tdisp,
                                      tcount, ttype, op, win, 1, request);
    return MPIDIG_mpi_rget_accumulate(oaddr, ocount, otype, raddr, rcount, rtype, trank, tdisp,
                                      tcount, ttype, op, win, request);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_fetch_and_op(const void *oaddr, void *raddr,
                                                       MPI_Datatype type, int trank, MPI_Aint tdisp,
                                                       MPI_Op op, MPIR_Win *win,
                                                       MPIDI_av_entry_t *addr,
                                                       MPIDI_winattr_t winattr)
{
    (void)addr;
    (void)winattr;
    if (NAM(win))
        return MPIDI_PSNAM_accumulate(oaddr, 1, type, raddr, 1, type, trank, tdisp, 1, type, op,
                                      win, 1, NULL);
    return MPIDIG_mpi_fetch_and_op(oaddr, raddr, type, trank, tdisp, op, win);
}

MPL_STATIC_INLINE_PREFIX int
MPIDI_NM_mpi_compare_and_swap(const void *oaddr, const void *compare_addr, void *raddr,
                              MPI_Datatype type, int trank, MPI_Aint tdisp, MPIR_Win *win,
                              MPIDI_av_entry_t *addr, MPIDI_winattr_t winattr)
{
    (void)addr;
    (void)winattr;
    if (NAM(win))
        return MPIDI_PSNAM_compare_and_swap(oaddr, compare_addr, raddr, type, trank, tdisp, win);
    return MPIDIG_mpi_compare_and_swap(oaddr, compare_addr, raddr, type, trank, tdisp, win);
}

#undef NAM

#endif /* PSCOM_RMA_H_INCLUDED */
