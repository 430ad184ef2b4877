/*
 * A connection broke (pscom_con.c): what the netmod's completions and its own blocking paths
 * need of it.
 */
#ifndef PSCOM_BROKEN_H_INCLUDED
#define PSCOM_BROKEN_H_INCLUDED

/* Progress for the grace that lets the launcher report a dead peer first (at most a second,
 * PSP_MPI_LOST_PEER_ABORT), before an operation that failed on a broken connection returns. */
void MPIDI_PSCOM_broken_wait(void);

/* Did the request fail because its connection broke (not cancelled, not truncated)? */
MPL_STATIC_INLINE_PREFIX int MPIDI_PSCOM_preq_broken(const pscom_request_t *preq)
{
    return (preq->state & (PSCOM_REQ_STATE_ERROR | PSCOM_REQ_STATE_CANCELED |
                           PSCOM_REQ_STATE_TRUNCATED)) == PSCOM_REQ_STATE_ERROR;
}

/* A request is complete: at once, or after the grace if its connection broke. */
MPL_STATIC_INLINE_PREFIX void MPIDI_PSCOM_complete(MPIR_Request *req, int broken)
{
    if (unlikely(broken))
        MPIDI_PSCOM_complete_broken(req);
    else
        MPIDIU_request_complete(req);
}

#endif /* PSCOM_BROKEN_H_INCLUDED */
