/*
 * Progress: poll pscom once, then finish what completed (see pscom_queue.c). ch4 polls in a
 * loop; with more ranks than CPUs that starves the rank everybody waits for, so an idle poll
 * yields the CPU then (PSP_MPI_SCHED_YIELD, pscom_init.c).
 */
#ifndef PSCOM_PROGRESS_H_INCLUDED
#define PSCOM_PROGRESS_H_INCLUDED

#include "pscom_impl.h"

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_progress(int vci, int blocking)
{
    (void)blocking; /* ch4 always polls; blocking here would hold the global lock */
    if (vci != 0)
        return MPI_SUCCESS; /* one pscom socket, driven from vci 0 */
    int events = pscom_progress(0);
    if (MPIDI_PSCOM_global.done_head)
        events += MPIDI_PSCOM_drain();
    if (unlikely(MPIDI_PSCOM_global.n_closed))
        MPIDI_PSCOM_reap_closed();
    if (unlikely(MPIDI_PSCOM_global.lost_deadline_ns))
        MPIDI_PSCOM_check_lost();
    if (unlikely(MPIDI_PSCOM_global.n_held))
        MPIDI_PSCOM_release_held();
    if (!events && MPIDI_PSCOM_global.yield_idle)
        sched_yield();
    return MPI_SUCCESS;
}

#endif /* PSCOM_PROGRESS_H_INCLUDED */
