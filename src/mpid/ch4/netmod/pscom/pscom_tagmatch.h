/*
 * MPI point-to-point matched by the transport (pscom_socket_tag_matching: UCX's tag matching,
 * where ucp is the only transport). An MPI envelope becomes the 64-bit tag, as in MPICH's ucx
 * netmod; a receive masks out what it leaves open. No pscom request, header or queue on the way,
 * and a send that the transport completes at once needs no request of its own either.
 *
 *   63..48 context id (16 bits)   47..31 source rank (17 bits)   30..0 MPI tag (31 bits, with
 *   MPICH's two error bits on top, which a receive of a given tag ignores)
 *
 * Completions (MPIDI_PSCOM_tm_done, pscom_tagged.c) finish the MPI request from inside the
 * transport's progress (PSCOM_TAG_DONE_INLINE, as MPICH's ucx netmod does from UCX's callbacks):
 * nothing there calls pscom again.
 */
#ifndef PSCOM_TAGMATCH_H_INCLUDED
#define PSCOM_TAGMATCH_H_INCLUDED

#include "pscom_impl.h"
#include "pscom_gpu.h"

#define MPIDI_PSCOM_TM_TAG_BITS   31
#define MPIDI_PSCOM_TM_RANK_BITS  17
#define MPIDI_PSCOM_TM_RANK_MAX   ((1 << MPIDI_PSCOM_TM_RANK_BITS) - 1)
#define MPIDI_PSCOM_TM_RANK_SHIFT MPIDI_PSCOM_TM_TAG_BITS
#define MPIDI_PSCOM_TM_CTX_SHIFT  (MPIDI_PSCOM_TM_TAG_BITS + MPIDI_PSCOM_TM_RANK_BITS)
#define MPIDI_PSCOM_TM_TAG_MASK   ((UINT64_C(1) << MPIDI_PSCOM_TM_TAG_BITS) - 1)
#define MPIDI_PSCOM_TM_RANK_MASK  ((uint64_t)MPIDI_PSCOM_TM_RANK_MAX << MPIDI_PSCOM_TM_RANK_SHIFT)
#define MPIDI_PSCOM_TM_CTX_MASK   (UINT64_C(0xffff) << MPIDI_PSCOM_TM_CTX_SHIFT)
/* MPIR_TAG_ERROR_BIT and MPIR_TAG_PROC_FAILURE_BIT of a 31-bit tag */
#define MPIDI_PSCOM_TM_ERR_BITS (UINT64_C(3) << (MPIDI_PSCOM_TM_TAG_BITS - 2))
_Static_assert(MPIR_TAG_BITS_DEFAULT == MPIDI_PSCOM_TM_TAG_BITS, "the MPI tag fills its field");
_Static_assert(MPIDI_PSCOM_TM_CTX_SHIFT + 16 == 64, "the fields fill the 64-bit tag");

MPL_STATIC_INLINE_PREFIX uint64_t MPIDI_PSCOM_tm_tag(int context_id, int rank, int tag)
{
    return (uint64_t)(uint16_t)context_id << MPIDI_PSCOM_TM_CTX_SHIFT |
           (uint64_t)(uint32_t)rank << MPIDI_PSCOM_TM_RANK_SHIFT |
           ((uint64_t)(uint32_t)tag & MPIDI_PSCOM_TM_TAG_MASK);
}

MPL_STATIC_INLINE_PREFIX uint64_t MPIDI_PSCOM_tm_mask(int rank, int tag)
{
    return MPIDI_PSCOM_TM_CTX_MASK | (rank == MPI_ANY_SOURCE ? 0 : MPIDI_PSCOM_TM_RANK_MASK) |
           (tag == MPI_ANY_TAG ? 0 : MPIDI_PSCOM_TM_TAG_MASK & ~MPIDI_PSCOM_TM_ERR_BITS);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_PSCOM_tm_source(uint64_t tag)
{
    return (int)((tag & MPIDI_PSCOM_TM_RANK_MASK) >> MPIDI_PSCOM_TM_RANK_SHIFT);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_PSCOM_tm_mpi_tag(uint64_t tag)
{
    return (int)(tag & MPIDI_PSCOM_TM_TAG_MASK);
}

/* A rank that does not fit its 17 bits (communicators of more than 131072 processes). */
MPL_STATIC_INLINE_PREFIX int MPIDI_PSCOM_tm_rank_error(int rank)
{
    char why[128];
    snprintf(why, sizeof(why), "rank %d does not fit UCX's tag (more than %d ranks: PSP_UCP_TAG=0)",
             rank, MPIDI_PSCOM_TM_RANK_MAX + 1);
    return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                MPI_ERR_OTHER, "**pscom_send", "**pscom_send %s", why);
}

/* Out of line (pscom_tagged.c): any datatype, a request of the caller's (persistent), the first
   send, the errors. */
int MPIDI_PSCOM_tm_isend_general(const void *buf, MPI_Aint count, MPI_Datatype datatype, int rank,
                                 int tag, MPIR_Comm *comm, int context_offset,
                                 MPIDI_av_entry_t *addr, MPIR_Request **request, int is_sync);
int MPIDI_PSCOM_tm_irecv_general(void *buf, MPI_Aint count, MPI_Datatype datatype, int rank,
                                 int tag, MPIR_Comm *comm, int context_offset,
                                 MPIR_Request **request);
int MPIDI_PSCOM_tm_send_failed(pscom_connection_t *con, int rc);
int MPIDI_PSCOM_tm_recv_failed(MPIR_Request *req, int created, int rc);

/* The common send, inline and small: a builtin type, no request of the caller's, the spare
   request ready (its pack_buf is NULL). A send the transport completes at once returns MPICH's
   pre-completed request; otherwise the spare one becomes the send's. */
MPL_STATIC_INLINE_PREFIX int MPIDI_PSCOM_tm_isend(const void *buf, MPI_Aint count,
                                                  MPI_Datatype datatype, int rank, int tag,
                                                  MPIR_Comm *comm, int context_offset,
                                                  MPIDI_av_entry_t *addr, MPIR_Request **request,
                                                  int is_sync)
{
    MPIR_Request *sreq = MPIDI_PSCOM_global.spare_sreq;
    if (unlikely(!HANDLE_IS_BUILTIN(datatype) || *request || !sreq ||
                 comm->rank > MPIDI_PSCOM_TM_RANK_MAX || MPIDI_PSCOM_IS_DEV(buf, 0, count)))
        return MPIDI_PSCOM_tm_isend_general(buf, count, datatype, rank, tag, comm, context_offset,
                                            addr, request, is_sync);
    pscom_connection_t *con = addr ? MPIDI_PSCOM_av_con(addr) : MPIDI_PSCOM_comm_con(comm, rank);
    size_t data_sz = (size_t)count * MPIR_Datatype_get_basic_size(datatype);
    int rc =
        pscom_tag_send(con, MPIDI_PSCOM_tm_tag(comm->context_id + context_offset, comm->rank, tag),
                       data_sz ? buf : NULL, data_sz, is_sync, sreq);
    if (likely(rc > 0)) {
        *request = MPIR_Request_create_complete(MPIR_REQUEST_KIND__SEND);
        return MPI_SUCCESS;
    }
    if (unlikely(rc < 0))
        return MPIDI_PSCOM_tm_send_failed(con, rc);
    MPIDI_PSCOM_global.spare_sreq = NULL; /* MPIDI_PSCOM_tm_done completes it */
    *request = sreq;
    return MPI_SUCCESS;
}

/* The common receive, inline and small: a builtin type. */
MPL_STATIC_INLINE_PREFIX int MPIDI_PSCOM_tm_irecv(void *buf, MPI_Aint count, MPI_Datatype datatype,
                                                  int rank, int tag, MPIR_Comm *comm,
                                                  int context_offset, MPIR_Request **request)
{
    MPIR_Request *req = *request;
    int created = req == NULL;
    if (unlikely(!HANDLE_IS_BUILTIN(datatype) || rank > MPIDI_PSCOM_TM_RANK_MAX ||
                 MPIDI_PSCOM_IS_DEV(buf, 0, count)))
        return MPIDI_PSCOM_tm_irecv_general(buf, count, datatype, rank, tag, comm, context_offset,
                                            request);
    if (created) {
        req = MPIR_Request_create_from_pool(MPIR_REQUEST_KIND__RECV, 0, 2);
        if (unlikely(req == NULL)) /* reports it */
            return MPIDI_PSCOM_tm_irecv_general(buf, count, datatype, rank, tag, comm,
                                                context_offset, request);
    } else {
        MPIR_Request_add_ref(req);
    }
    size_t data_sz = (size_t)count * MPIR_Datatype_get_basic_size(datatype);
    MPIDI_PSCOM_request_t *r = &MPIDI_PSCOM_REQ(req);
    void *op;
    r->preq = NULL;
    r->mrecv_state = 0;
    r->pack_buf = NULL;
    r->count = (MPI_Aint)data_sz; /* for a truncation's error message */
    int rc = pscom_tag_recv(MPIDI_PSCOM_global.socket,
                            MPIDI_PSCOM_tm_tag(comm->recvcontext_id + context_offset,
                                               rank == MPI_ANY_SOURCE ? 0 : rank,
                                               tag == MPI_ANY_TAG ? 0 : tag),
                            MPIDI_PSCOM_tm_mask(rank, tag), buf, data_sz, req, &op);
    if (unlikely(rc < 0))
        return MPIDI_PSCOM_tm_recv_failed(req, created, rc);
    r->tag_op = op; /* NULL if done already */
    *request = req;
    return MPI_SUCCESS;
}

MPL_STATIC_INLINE_PREFIX void MPIDI_PSCOM_tm_status(MPI_Status *status,
                                                    const pscom_tag_info_t *info)
{
    if (status == MPI_STATUS_IGNORE)
        return;
    status->MPI_SOURCE = MPIDI_PSCOM_tm_source(info->tag);
    status->MPI_TAG = MPIDI_PSCOM_tm_mpi_tag(info->tag);
    MPIR_STATUS_SET_COUNT(*status, info->len);
}

/* Probe; with message, a matched probe: the message leaves matching, *message receives it. */
MPL_STATIC_INLINE_PREFIX int MPIDI_PSCOM_tm_iprobe(int source, int tag, MPIR_Comm *comm,
                                                   int context_offset, int *flag,
                                                   MPIR_Request **message, MPI_Status *status)
{
    int mpi_errno = MPI_SUCCESS;
    pscom_tag_info_t info;
    void *msg = NULL;
    MPIR_Request *req = NULL;

    if (unlikely(source != MPI_ANY_SOURCE && source > MPIDI_PSCOM_TM_RANK_MAX))
        return MPIDI_PSCOM_tm_rank_error(source);
    if (message) { /* before the message leaves UCX's matching: it must not get lost */
        req = MPIDI_PSCOM_mprobe_request(NULL, NULL);
        MPIR_ERR_CHKANDJUMP(req == NULL, mpi_errno, MPIX_ERR_NOREQ, "**nomemreq");
    }
    *flag = pscom_tag_probe(MPIDI_PSCOM_global.socket,
                            MPIDI_PSCOM_tm_tag(comm->recvcontext_id + context_offset,
                                               source == MPI_ANY_SOURCE ? 0 : source,
                                               tag == MPI_ANY_TAG ? 0 : tag),
                            MPIDI_PSCOM_tm_mask(source, tag), &info, message ? &msg : NULL);
    if (!*flag) {
        if (req) {
            MPIR_Request_free(req); /* both references */
            MPIR_Request_free(req);
        }
        return MPI_SUCCESS;
    }
    if (message) {
        MPIDI_PSCOM_REQ(req).tag_op = msg;
        *message = req;
    }
    MPIDI_PSCOM_tm_status(status, &info);
fn_fail:
    return mpi_errno;
}

MPL_STATIC_INLINE_PREFIX int MPIDI_PSCOM_tm_imrecv(void *buf, MPI_Aint count, MPI_Datatype datatype,
                                                   MPIR_Request *message)
{
    int mpi_errno = MPI_SUCCESS;
    int dt_contig;
    size_t data_sz;
    MPI_Aint dt_true_lb;
    MPIR_Datatype *dt_ptr;
    MPIDI_PSCOM_request_t *r = &MPIDI_PSCOM_REQ(message);
    void *rbuf, *msg = r->tag_op;

    MPIDI_Datatype_get_info(count, datatype, dt_contig, data_sz, dt_ptr, dt_true_lb);
    (void)dt_ptr;
    r->tag_op = NULL; /* the message is taken: nothing to cancel */
    if (dt_contig && !MPIDI_PSCOM_IS_DEV(buf, dt_true_lb, data_sz)) {
        rbuf = MPIR_get_contig_ptr(buf, dt_true_lb);
        r->count = (MPI_Aint)data_sz;
    } else {
        rbuf = MPIDI_PSCOM_stage_alloc(data_sz);
        MPIR_ERR_CHKANDJUMP(rbuf == NULL && data_sz, mpi_errno, MPI_ERR_OTHER, "**pscom_nomem");
        r->pack_buf = rbuf;
        r->user_buf = buf;
        r->count = count;
        r->datatype = datatype;
        MPIR_Datatype_add_ref_if_not_builtin(datatype);
    }
    int rc = pscom_tag_msg_recv(MPIDI_PSCOM_global.socket, msg, rbuf, data_sz, message);
    MPIR_ERR_CHKANDJUMP2(rc < 0, mpi_errno, MPI_ERR_OTHER, "**pscom_con", "**pscom_con %s %s",
                         "(matched receive)", pscom_err_str((pscom_err_t)rc));
fn_fail:
    return mpi_errno;
}

/* Cancel a receive the transport has not matched yet; MPIDI_PSCOM_tm_done completes it. */
MPL_STATIC_INLINE_PREFIX void MPIDI_PSCOM_tm_cancel_recv(MPIR_Request *rreq)
{
    void *op = MPIDI_PSCOM_REQ(rreq).tag_op;
    if (op && !MPIR_Request_is_complete(rreq) && rreq->kind == MPIR_REQUEST_KIND__RECV)
        pscom_tag_cancel(MPIDI_PSCOM_global.socket, op);
}

#endif /* PSCOM_TAGMATCH_H_INCLUDED */
