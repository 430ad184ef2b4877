/* Native MPI sends: one pscom message per MPI message (xheader: MPIDI_PSCOM_tagged_xhdr_t), or
   one tagged message of the transport (pscom_tagmatch.h). */
#ifndef PSCOM_SEND_H_INCLUDED
#define PSCOM_SEND_H_INCLUDED

#include "pscom_impl.h"
#include "pscom_tagmatch.h"
#include "pscom_gpu.h"

/* matched by pscom */
MPL_STATIC_INLINE_PREFIX int MPIDI_PSCOM_isend_pscom(const void *buf, MPI_Aint count,
                                                     MPI_Datatype datatype, int rank, int tag,
                                                     MPIR_Comm *comm, int context_offset,
                                                     MPIDI_av_entry_t *addr, MPIR_Request **request,
                                                     int is_sync)
{
    int mpi_errno = MPI_SUCCESS;
    int dt_contig;
    size_t data_sz;
    MPI_Aint dt_true_lb;
    MPIR_Datatype *dt_ptr;
    MPIR_Request *req = *request;
    MPIDI_PSCOM_tagged_xhdr_t *xh;

    MPIDI_Datatype_get_info(count, datatype, dt_contig, data_sz, dt_ptr, dt_true_lb);
    (void)dt_ptr;
    pscom_connection_t *con = addr ? MPIDI_PSCOM_av_con(addr) : MPIDI_PSCOM_comm_con(comm, rank);
    int staged = !dt_contig || MPIDI_PSCOM_IS_DEV(buf, dt_true_lb, data_sz);

    /* small contiguous message, no request of the caller's: if the transport takes it at once
       (room in the shm ring, UCX short message), no pscom request and a pre-completed MPI one */
    if (!staged && !is_sync && !req && con && data_sz <= MPIDI_PSCOM_SEND_NOW_MAX) {
        MPIDI_PSCOM_tagged_xhdr_t now = MPIDI_PSCOM_tagged_xhdr(comm, context_offset, tag);
        if (pscom_send_now(con, &now, MPIDI_PSCOM_TAGGED_XHDR_LEN,
                           data_sz ? MPIR_get_contig_ptr(buf, dt_true_lb) : NULL, data_sz)) {
            *request = MPIR_Request_create_complete(MPIR_REQUEST_KIND__SEND);
            return MPI_SUCCESS;
        }
    }

    /* contiguous device memory to a process on this node: the receiver copies it from here,
       device to device (pscom's device rendezvous, CUDA IPC) */
    int gpu_direct = unlikely(staged && dt_contig) && con && pscom_con_gpu_direct(con, data_sz);
    /* a large contiguous send from the device elsewhere: in chunks, copy and transfer overlap */
    if (unlikely(staged && dt_contig && !gpu_direct && !is_sync && con &&
                 data_sz >= MPIDI_PSCOM_pipe_min))
        return MPIDI_PSCOM_pipe_isend(MPIR_get_contig_ptr(buf, dt_true_lb), data_sz,
                                      MPIDI_PSCOM_tagged_xhdr(comm, context_offset, tag), con,
                                      request);

    pscom_request_t *preq = MPIDI_PSCOM_preq_create(sizeof(*xh), MPIDI_PSCOM_tagged_send_done);
    MPIR_ERR_CHKANDJUMP(preq == NULL, mpi_errno, MPI_ERR_OTHER, "**pscom_nomem");
    if (!staged || gpu_direct) {
        preq->data = data_sz ? (void *)MPIR_get_contig_ptr(buf, dt_true_lb) : NULL;
    } else {
        /* pscom sends one byte range of host memory: pack (or copy device memory) into a
           buffer the pscom request owns */
        void *pack = MPIDI_PSCOM_stage_alloc(data_sz);
        MPIR_ERR_CHKANDJUMP(pack == NULL && data_sz, mpi_errno, MPI_ERR_OTHER, "**pscom_nomem");
        MPIDI_PSCOM_PREQ(preq)->buf = pack;
        mpi_errno = MPIDI_PSCOM_pack(buf, count, datatype, pack, data_sz);
        MPIR_ERR_CHECK(mpi_errno);
        preq->data = pack;
    }

    /* from here on nothing fails: the MPICH request is never left half set up */
    if (req)
        MPIR_Request_add_ref(req);
    else
        req = MPIR_Request_create_from_pool(MPIR_REQUEST_KIND__SEND, 0, 2);
    MPIR_ERR_CHKANDSTMT(req == NULL, mpi_errno, MPIX_ERR_NOREQ, goto fn_fail, "**nomemreq");
    if (is_sync)
        MPIR_cc_inc(req->cc_ptr); /* completes on send done and on the receiver's ack */
    MPIDI_PSCOM_REQ(req).preq = preq;
    MPIDI_PSCOM_PREQ(preq)->req = req;

    xh = preq->xheader;
    *xh = MPIDI_PSCOM_tagged_xhdr(comm, context_offset, tag);
    if (is_sync) {
        xh->type = MPIDI_PSCOM_MSG_TAGGED_SYNC;
        xh->sreq = (uint64_t)(uintptr_t)req;
    }
    preq->xheader_len = is_sync ? sizeof(*xh) : MPIDI_PSCOM_TAGGED_XHDR_LEN;
    preq->data_len = data_sz;
    preq->connection = con;
    if (gpu_direct)
        pscom_post_send_gpu(preq);
    else
        pscom_post_send(preq);
    MPIDI_PSCOM_finish_posted(preq);
    *request = req;

fn_exit:
    return mpi_errno;
fn_fail:
    if (preq)
        MPIDI_PSCOM_preq_free(preq);
    goto fn_exit;
}

MPL_STATIC_INLINE_PREFIX int MPIDI_PSCOM_isend(const void *buf, MPI_Aint count,
                                               MPI_Datatype datatype, int rank, int tag,
                                               MPIR_Comm *comm, int context_offset,
                                               MPIDI_av_entry_t *addr, MPIR_Request **request,
                                               int is_sync)
{
    if (MPIDI_PSCOM_global.tag_mode) /* matched by the transport (pscom_tagmatch.h) */
        return MPIDI_PSCOM_tm_isend(buf, count, datatype, rank, tag, comm, context_offset, addr,
                                    request, is_sync);
    return MPIDI_PSCOM_isend_pscom(buf, count, datatype, rank, tag, comm, context_offset, addr,
                                   request, is_sync);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_isend(const void *buf, MPI_Aint count,
                                                MPI_Datatype datatype, int rank, int tag,
                                                MPIR_Comm *comm, int context_offset,
                                                MPIDI_av_entry_t *addr, MPIR_Request **request)
{
    return MPIDI_PSCOM_isend(buf, count, datatype, rank, tag, comm, context_offset, addr, request,
                             0);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_issend(const void *buf, MPI_Aint count,
                                                 MPI_Datatype datatype, int rank, int tag,
                                                 MPIR_Comm *comm, int context_offset,
                                                 MPIDI_av_entry_t *addr, MPIR_Request **request)
{
    return MPIDI_PSCOM_isend(buf, count, datatype, rank, tag, comm, context_offset, addr, request,
                             1);
}

/* Collective traffic: a failed earlier step travels in the tag's error bits. */
MPL_STATIC_INLINE_PREFIX int MPIDI_NM_isend_coll(const void *buf, MPI_Aint count,
                                                 MPI_Datatype datatype, int rank, int tag,
                                                 MPIR_Comm *comm, int context_offset,
                                                 MPIDI_av_entry_t *addr, MPIR_Request **request,
                                                 MPIR_Errflag_t *errflag)
{
    switch (*errflag) {
    case MPIR_ERR_NONE:
        break;
    case MPIR_ERR_PROC_FAILED:
        MPIR_TAG_SET_PROC_FAILURE_BIT(tag);
        break;
    default:
        MPIR_TAG_SET_ERROR_BIT(tag);
    }
    MPIDI_PSCOM_MSA_COUNT_COLL(comm, rank, addr, count, datatype); /* PSP_DEBUG_STATS */
    return MPIDI_PSCOM_isend(buf, count, datatype, rank, tag, comm, context_offset, addr, request,
                             0);
}

/* Sends are not cancelled (allowed by MPI; MPIDIG does the same). */
MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_cancel_send(MPIR_Request *sreq)
{
    (void)sreq;
    return MPI_SUCCESS;
}

#endif /* PSCOM_SEND_H_INCLUDED */
