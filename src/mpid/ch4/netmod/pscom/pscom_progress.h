/*
 * Progress: poll pscom, then finish what completed (see pscom_queue.c). ch4 polls in a loop;
 * with more ranks than CPUs that starves the rank everybody waits for, so an idle poll yields
 * the CPU then (PSP_MPI_SCHED_YIELD, pscom_init.c).
 *
 * blocking: the caller waits for a request (patch 0009). Then an idle poll is repeated a few
 * times before ch4's loop (progress hooks, counters) comes round again: a message that
 * arrives is seen sooner, the hooks still run every few hundred nanoseconds.
 */
#ifndef PSCOM_PROGRESS_H_INCLUDED
#define PSCOM_PROGRESS_H_INCLUDED

#include "pscom_impl.h"

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_progress(int vci, int blocking)
{
    if (vci != 0)
        return MPI_SUCCESS; /* one pscom socket, driven from vci 0 */
    int events = pscom_progress(0);
    /* never sleep in here: that would hold the global lock */
    if (blocking && !MPIDI_PSCOM_global.yield_idle)
        for (int i = 1; i < MPIDI_PSCOM_WAIT_POLLS && !events; i++)
            events = pscom_progress(0);
    if (MPIDI_PSCOM_global.done_head)
        events += MPIDI_PSCOM_drain();
    if (unlikely(MPIDI_PSCOM_global.n_closed))
        MPIDI_PSCOM_reap_closed();
    if (!events && MPIDI_PSCOM_global.yield_idle)
        sched_yield();
    return MPI_SUCCESS;
}

#endif /* PSCOM_PROGRESS_H_INCLUDED */
