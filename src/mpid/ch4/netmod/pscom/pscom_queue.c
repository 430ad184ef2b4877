/*
 * pscom requests of the netmod and their completion queue.
 *
 * pscom runs io_done() from inside its own calls. MPICH completion code may send again
 * (MPIDIG replies, ssend acks), so io_done only appends the request to a FIFO and
 * MPIDI_NM_progress finishes it after pscom returned: no re-entry into pscom, and completions
 * keep pscom's arrival order (MPIDIG relies on per-peer AM order).
 */
#include "mpidimpl.h" /* first: it pulls in our inline headers, which need pscom_impl.h */
#include "pscom_impl.h"

pscom_request_t *MPIDI_PSCOM_preq_create(size_t max_xheader_len,
                                         void (*complete)(pscom_request_t *preq))
{
    pscom_request_t *preq = pscom_request_create(max_xheader_len, sizeof(MPIDI_PSCOM_preq_t));
    if (!preq)
        return NULL;
    preq->ops.io_done = MPIDI_PSCOM_io_done;
    preq->socket = MPIDI_PSCOM_global.socket;
    MPIDI_PSCOM_PREQ(preq)->complete = complete;
    return preq;
}

void MPIDI_PSCOM_preq_free(pscom_request_t *preq)
{
    void *buf = MPIDI_PSCOM_PREQ(preq)->buf;
    if (buf)
        MPL_free(buf);
    pscom_request_free(preq);
}

void MPIDI_PSCOM_io_done(pscom_request_t *preq)
{
    MPIDI_PSCOM_PREQ(preq)->next = NULL;
    if (MPIDI_PSCOM_global.done_tail)
        MPIDI_PSCOM_PREQ(MPIDI_PSCOM_global.done_tail)->next = preq;
    else
        MPIDI_PSCOM_global.done_head = preq;
    MPIDI_PSCOM_global.done_tail = preq;
}

/* Finish queued requests; returns how many. Each complete() frees its pscom request. */
int MPIDI_PSCOM_drain(void)
{
    int n = 0;
    if (MPIDI_PSCOM_global.in_drain)
        return 0; /* a completion called progress: the outer loop picks up new entries */
    MPIDI_PSCOM_global.in_drain = 1;
    while (MPIDI_PSCOM_global.done_head) {
        pscom_request_t *preq = MPIDI_PSCOM_global.done_head;
        MPIDI_PSCOM_global.done_head = MPIDI_PSCOM_PREQ(preq)->next;
        if (!MPIDI_PSCOM_global.done_head)
            MPIDI_PSCOM_global.done_tail = NULL;
        MPIDI_PSCOM_PREQ(preq)->complete(preq);
        n++;
    }
    MPIDI_PSCOM_global.in_drain = 0;
    return n;
}
