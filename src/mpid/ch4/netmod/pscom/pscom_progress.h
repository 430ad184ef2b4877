/*
 * Progress: poll pscom once, then finish what completed (see pscom_queue.c). ch4 polls in a
 * loop; with more ranks than CPUs that starves the rank everybody waits for, so an idle poll
 * yields the CPU then (PSP_MPI_SCHED_YIELD, pscom_init.c). With many ranks per CPU, a yield
 * hands the CPU mostly to other waiters, which are all runnable and, having used little CPU,
 * are the scheduler's first picks: there a rank that keeps finding nothing naps instead
 * (PSP_MPI_NAP), off the run queue for the kernel's timer slack (50 us by default).
 * Elsewhere a rank yields once it has found nothing for PSP_MPI_YIELD_AFTER_US: CPUs can be
 * shared in ways the rank count does not show (other jobs, the application's threads, nodes
 * of one host), and then the peer everybody waits for would get the CPU only at the
 * scheduler's next tick, milliseconds away.
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
    if (events) {
        MPIDI_PSCOM_not_idle();
    } else if (MPIDI_PSCOM_global.yield_idle) {
        if (!MPIDI_PSCOM_global.napping &&
            ++MPIDI_PSCOM_global.idle_polls % MPIDI_PSCOM_IDLE_POLLS == 0)
            MPIDI_PSCOM_idle_crowded();
        if (MPIDI_PSCOM_global.napping)
            MPIDI_PSCOM_nap();
        else
            sched_yield();
    } else if (MPIDI_PSCOM_global.late_yield_ns) {
        if (MPIDI_PSCOM_global.late_yielding)
            sched_yield();
        else if (++MPIDI_PSCOM_global.idle_polls % MPIDI_PSCOM_IDLE_POLLS == 0)
            MPIDI_PSCOM_idle_long();
    }
    return MPI_SUCCESS;
}

#endif /* PSCOM_PROGRESS_H_INCLUDED */
