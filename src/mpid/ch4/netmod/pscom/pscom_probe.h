/* Native probe / matched probe: pscom_iprobe over the generated (unexpected) requests. */
#ifndef PSCOM_PROBE_H_INCLUDED
#define PSCOM_PROBE_H_INCLUDED

#include "pscom_impl.h"
#include "pscom_tagmatch.h"

/* A throw-away request that matches like a receive would; caller frees it. */
MPL_STATIC_INLINE_PREFIX pscom_request_t *MPIDI_PSCOM_probe_req(int source, int tag,
                                                                MPIR_Comm *comm, int context_offset)
{
    pscom_request_t *preq = MPIDI_PSCOM_preq_create(sizeof(MPIDI_PSCOM_tagged_xhdr_t), NULL);
    if (!preq)
        return NULL;
    MPIDI_PSCOM_preq_t *want = MPIDI_PSCOM_PREQ(preq);
    want->context_id = comm->recvcontext_id + context_offset;
    want->src_rank = source;
    want->tag = tag;
    preq->ops.recv_accept = MPIDI_PSCOM_tagged_accept;
    preq->connection = NULL;
    return preq;
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_iprobe(int source, int tag, MPIR_Comm *comm,
                                                 int context_offset, MPIDI_av_entry_t *addr,
                                                 int *flag, MPI_Status *status)
{
    int mpi_errno = MPI_SUCCESS;
    (void)addr;
    if (MPIDI_PSCOM_global.tag_mode)
        return MPIDI_PSCOM_tm_iprobe(source, tag, comm, context_offset, flag, NULL, status);
    pscom_request_t *preq = MPIDI_PSCOM_probe_req(source, tag, comm, context_offset);
    MPIR_ERR_CHKANDJUMP(preq == NULL, mpi_errno, MPI_ERR_OTHER, "**pscom_nomem");
    *flag = pscom_iprobe(preq);
    if (*flag)
        MPIDI_PSCOM_fill_status(status, preq);
    pscom_request_free(preq);
fn_fail:
    return mpi_errno;
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_improbe(int source, int tag, MPIR_Comm *comm,
                                                  int context_offset, MPIDI_av_entry_t *addr,
                                                  int *flag, MPIR_Request **message,
                                                  MPI_Status *status)
{
    int mpi_errno = MPI_SUCCESS;
    pscom_request_t *rpreq = NULL;
    (void)addr;
    if (MPIDI_PSCOM_global.tag_mode)
        return MPIDI_PSCOM_tm_iprobe(source, tag, comm, context_offset, flag, message, status);
    pscom_request_t *preq = MPIDI_PSCOM_probe_req(source, tag, comm, context_offset);
    MPIR_ERR_CHKANDJUMP(preq == NULL, mpi_errno, MPI_ERR_OTHER, "**pscom_nomem");
    *flag = pscom_iprobe(preq);
    if (!*flag)
        goto fn_exit;

    /* Take the probed message now, before any other receive can: the first queued message
     * from that source with exactly that tag is the one we probed (per-sender FIFO). */
    const MPIDI_PSCOM_tagged_xhdr_t *xh = preq->xheader;
    size_t len = MPIDI_PSCOM_msg_len(preq);
    rpreq = MPIDI_PSCOM_probe_req(xh->src_rank, MPI_ANY_TAG, comm, context_offset);
    MPIR_ERR_CHKANDJUMP(rpreq == NULL, mpi_errno, MPI_ERR_OTHER, "**pscom_nomem");
    MPIDI_PSCOM_PREQ(rpreq)->tag = MPIR_TAG_MASK_ERROR_BITS(xh->tag);
    MPIDI_PSCOM_PREQ(rpreq)->complete = MPIDI_PSCOM_mrecv_done;
    if (len) {
        rpreq->data = MPIDI_PSCOM_stage_alloc(len);
        MPIR_ERR_CHKANDJUMP(rpreq->data == NULL, mpi_errno, MPI_ERR_OTHER, "**pscom_nomem");
        MPIDI_PSCOM_PREQ(rpreq)->buf = rpreq->data;
    }
    rpreq->data_len = len;

    MPIR_Request *req = MPIDI_PSCOM_mprobe_request(rpreq, NULL);
    MPIR_ERR_CHKANDSTMT(req == NULL, mpi_errno, MPIX_ERR_NOREQ, goto fn_fail, "**nomemreq");
    MPIDI_PSCOM_PREQ(rpreq)->req = req;
    MPIDI_PSCOM_fill_status(status, preq);
    pscom_post_recv(rpreq);
    rpreq = NULL;
    *message = req;

fn_exit:
    if (preq)
        pscom_request_free(preq);
    return mpi_errno;
fn_fail:
    if (rpreq)
        MPIDI_PSCOM_preq_free(rpreq);
    goto fn_exit;
}

#endif /* PSCOM_PROBE_H_INCLUDED */
