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

/* Requests of the tagged shape (every MPI send and receive) come from a cache of finished
 * ones: pscom_request_create clears a whole pscom request (and takes pscom's lock), which
 * showed as a fifth of a small receive's instructions. A cached request is still a valid
 * pscom request; pscom's post calls reset their own state, so only our fields need it. */
static int preq_cacheable(const pscom_request_t *preq)
{
    return preq->max_xheader_len == sizeof(MPIDI_PSCOM_tagged_xhdr_t) &&
           !MPIDI_PSCOM_global.finalizing;
}

pscom_request_t *MPIDI_PSCOM_preq_create(size_t max_xheader_len,
                                         void (*complete)(pscom_request_t *preq))
{
    MPIDI_PSCOM_global_t *g = &MPIDI_PSCOM_global;
    pscom_request_t *preq;

    if (max_xheader_len == sizeof(MPIDI_PSCOM_tagged_xhdr_t) && g->n_preq_cache) {
        /* only fields pscom.h gives the user; state stays pscom's (post calls set it) */
        preq = g->preq_cache[--g->n_preq_cache];
        preq->xheader_len = 0;
        preq->data_len = 0;
        preq->data = NULL;
        preq->connection = NULL;
        preq->ops.recv_accept = NULL;
        memset(preq->user, 0, sizeof(MPIDI_PSCOM_preq_t));
    } else {
        preq = pscom_request_create(max_xheader_len, sizeof(MPIDI_PSCOM_preq_t));
        if (!preq)
            return NULL;
    }
    preq->ops.io_done = MPIDI_PSCOM_io_done;
    preq->socket = g->socket;
    MPIDI_PSCOM_PREQ(preq)->complete = complete;
    return preq;
}

void MPIDI_PSCOM_preq_free(pscom_request_t *preq)
{
    MPIDI_PSCOM_global_t *g = &MPIDI_PSCOM_global;
    void *buf = MPIDI_PSCOM_PREQ(preq)->buf;
    if (buf)
        MPIDI_PSCOM_stage_free(buf);
    /* a pending request goes to pscom_request_free, which reports the misuse */
    int idle = !(preq->state & PSCOM_REQ_STATE_POSTED) || pscom_req_is_done(preq);
    if (idle && g->n_preq_cache < MPIDI_PSCOM_PREQ_CACHE_MAX && preq_cacheable(preq)) {
        g->preq_cache[g->n_preq_cache++] = preq;
        return;
    }
    pscom_request_free(preq);
}

/* Finalize: the cached requests go back to pscom before its socket closes. */
void MPIDI_PSCOM_preq_cache_drop(void)
{
    MPIDI_PSCOM_global_t *g = &MPIDI_PSCOM_global;
    while (g->n_preq_cache)
        pscom_request_free(g->preq_cache[--g->n_preq_cache]);
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
