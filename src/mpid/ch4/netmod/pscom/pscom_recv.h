/* Native MPI receives: posted socket-wide, matched in MPIDI_PSCOM_tagged_accept, or by the
   transport (pscom_tagmatch.h). */
#ifndef PSCOM_RECV_H_INCLUDED
#define PSCOM_RECV_H_INCLUDED

#include "pscom_impl.h"
#include "pscom_tagmatch.h"
#include "pscom_gpu.h"

/* matched by pscom */
MPL_STATIC_INLINE_PREFIX int MPIDI_PSCOM_irecv_pscom(void *buf, MPI_Aint count,
                                                     MPI_Datatype datatype, int rank, int tag,
                                                     MPIR_Comm *comm, int context_offset,
                                                     MPIR_Request **request)
{
    int mpi_errno = MPI_SUCCESS;
    int dt_contig;
    size_t data_sz;
    MPI_Aint dt_true_lb;
    MPIR_Datatype *dt_ptr;
    MPIR_Request *req = *request;
    pscom_request_t *preq = NULL;
    void *pack_buf = NULL;

    MPIDI_Datatype_get_info(count, datatype, dt_contig, data_sz, dt_ptr, dt_true_lb);
    (void)dt_ptr;

    if (!dt_contig || MPIDI_PSCOM_IS_DEV(buf, dt_true_lb, data_sz)) {
        /* pscom receives one byte range of host memory: stage, unpack (or copy to the device)
           on completion (recv_finish) */
        pack_buf = MPIDI_PSCOM_stage_alloc(data_sz);
        MPIR_ERR_CHKANDJUMP(pack_buf == NULL && data_sz, mpi_errno, MPI_ERR_OTHER, "**pscom_nomem");
    }
    preq = MPIDI_PSCOM_preq_create(sizeof(MPIDI_PSCOM_tagged_xhdr_t), MPIDI_PSCOM_tagged_recv_done);
    MPIR_ERR_CHKANDJUMP(preq == NULL, mpi_errno, MPI_ERR_OTHER, "**pscom_nomem");
    if (req)
        MPIR_Request_add_ref(req);
    else
        req = MPIR_Request_create_from_pool(MPIR_REQUEST_KIND__RECV, 0, 2);
    MPIR_ERR_CHKANDSTMT(req == NULL, mpi_errno, MPIX_ERR_NOREQ, goto fn_fail, "**nomemreq");

    MPIDI_PSCOM_request_t *r = &MPIDI_PSCOM_REQ(req);
    r->preq = preq;
    r->pack_buf = pack_buf;
    r->mrecv_state = 0;
    if (pack_buf) {
        r->user_buf = buf;
        r->count = count;
        r->datatype = datatype;
        MPIR_Datatype_add_ref_if_not_builtin(datatype);
        preq->data = pack_buf;
    } else {
        preq->data = MPIR_get_contig_ptr(buf, dt_true_lb);
        r->count = (MPI_Aint)data_sz; /* its room, should a chunked message come (pscom_pipe.c) */
        preq->ops.io_done = MPIDI_PSCOM_tagged_recv_io_done;
    }
    preq->data_len = data_sz;

    MPIDI_PSCOM_preq_t *want = MPIDI_PSCOM_PREQ(preq);
    want->req = req;
    want->context_id = comm->recvcontext_id + context_offset;
    want->src_rank = rank;
    want->tag = tag;
    preq->ops.recv_accept = MPIDI_PSCOM_tagged_accept;
    preq->connection = NULL;
    if (pack_buf && dt_contig) /* device memory: a device rendezvous lands there directly */
        pscom_post_recv_gpu(preq, MPIR_get_contig_ptr(buf, dt_true_lb));
    else
        pscom_post_recv(preq);
    MPIDI_PSCOM_finish_posted(preq);
    *request = req;

fn_exit:
    return mpi_errno;
fn_fail:
    MPIDI_PSCOM_stage_free(pack_buf);
    if (preq)
        pscom_request_free(preq);
    goto fn_exit;
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_irecv(void *buf, MPI_Aint count, MPI_Datatype datatype,
                                                int rank, int tag, MPIR_Comm *comm,
                                                int context_offset, MPIDI_av_entry_t *addr,
                                                MPIR_Request **request, MPIR_Request *partner)
{
    (void)addr;                      /* matching uses the source rank, not the connection */
    (void)partner;                   /* direct-netmod build: no shmmod partner request */
    if (MPIDI_PSCOM_global.tag_mode) /* matched by the transport (pscom_tagmatch.h) */
        return MPIDI_PSCOM_tm_irecv(buf, count, datatype, rank, tag, comm, context_offset, request);
    return MPIDI_PSCOM_irecv_pscom(buf, count, datatype, rank, tag, comm, context_offset, request);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_imrecv(void *buf, MPI_Aint count, MPI_Datatype datatype,
                                                 MPIR_Request *message)
{
    if (MPIDI_PSCOM_global.tag_mode)
        return MPIDI_PSCOM_tm_imrecv(buf, count, datatype, message);
    MPIDI_PSCOM_mrecv_post(message, buf, count, datatype);
    return MPI_SUCCESS;
}

/* Cancel only a receive pscom has not started filling; complete it here exactly once. */
MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_cancel_recv(MPIR_Request *rreq)
{
    pscom_request_t *preq = MPIDI_PSCOM_REQ(rreq).preq;

    if (MPIDI_PSCOM_global.tag_mode) {
        MPIDI_PSCOM_tm_cancel_recv(rreq);
        return MPI_SUCCESS;
    }
    if (preq == NULL || MPIR_Request_is_complete(rreq))
        return MPI_SUCCESS;
    if (!pscom_cancel_recv(preq))
        return MPI_SUCCESS; /* already matched: it completes normally */
    if (!pscom_req_is_done(preq)) {
        /* pscom did not run io_done for the cancel: finish as the callback would */
        preq->state |= PSCOM_REQ_STATE_CANCELED;
        MPIDI_PSCOM_tagged_recv_done(preq);
    }
    /* else io_done queued it; tagged_recv_done sees CANCELED in progress */
    return MPI_SUCCESS;
}

#endif /* PSCOM_RECV_H_INCLUDED */
