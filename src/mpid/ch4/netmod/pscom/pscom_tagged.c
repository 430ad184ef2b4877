/*
 * Native MPI point-to-point over pscom: matching (recv_accept), completions, ssend acks.
 * A tagged message carries MPIDI_PSCOM_tagged_xhdr_t; receives are posted socket-wide
 * (connection NULL) and match on {context id, source rank, tag} from the xheader, so matching
 * never depends on which pscom connection object a message arrived on.
 */
#include "mpidimpl.h" /* first: it pulls in our inline headers, which need pscom_impl.h */
#include "pscom_impl.h"
#include "pscom_tagmatch.h"
#include "pscom_broken.h"

static void ack_recv_done(pscom_request_t *preq);

int MPIDI_PSCOM_tagged_accept(pscom_request_t *preq, pscom_connection_t *con,
                              pscom_header_net_t *header)
{
    const MPIDI_PSCOM_tagged_xhdr_t *xh = pscom_header_xheader(header);
    const MPIDI_PSCOM_preq_t *want = MPIDI_PSCOM_PREQ(preq);

    (void)con;
    if (header->xheader_len < MPIDI_PSCOM_TAGGED_XHDR_LEN ||
        xh->version != MPIDI_PSCOM_WIRE_VERSION)
        return 0;
    if (xh->type != MPIDI_PSCOM_MSG_TAGGED &&
        ((xh->type != MPIDI_PSCOM_MSG_TAGGED_SYNC && xh->type != MPIDI_PSCOM_MSG_TAGGED_PIPE) ||
         header->xheader_len < sizeof(*xh)))
        return 0;
    if (xh->context_id != want->context_id)
        return 0;
    if (want->src_rank != MPI_ANY_SOURCE && xh->src_rank != want->src_rank)
        return 0;
    /* error bits set by failed collectives must still match (MPIC_* check them) */
    if (want->tag != MPI_ANY_TAG && MPIR_TAG_MASK_ERROR_BITS(xh->tag) != want->tag)
        return 0;
    return 1;
}

/* A probed message's envelope into status (count: full message). MPI_ERROR stays as it is:
 * probe calls do not set it. */
void MPIDI_PSCOM_fill_status(MPI_Status *status, pscom_request_t *preq)
{
    const MPIDI_PSCOM_tagged_xhdr_t *xh = preq->xheader;
    if (status == MPI_STATUS_IGNORE)
        return;
    status->MPI_SOURCE = xh->src_rank;
    status->MPI_TAG = xh->tag;
    MPIR_STATUS_SET_COUNT(*status, MPIDI_PSCOM_msg_len(preq));
}

void MPIDI_PSCOM_tagged_send_done(pscom_request_t *preq)
{
    MPIR_Request *req = MPIDI_PSCOM_PREQ(preq)->req;
    const MPIDI_PSCOM_tagged_xhdr_t *xh = preq->xheader;
    int failed = MPIDI_PSCOM_preq_broken(preq);

    if (!pscom_req_successful(preq)) {
        req->status.MPI_ERROR = MPIR_Err_create_code(
            MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__, MPI_ERR_OTHER, "**pscom_send",
            "**pscom_send %s", pscom_req_state_str(preq->state));
        if (xh->type == MPIDI_PSCOM_MSG_TAGGED_SYNC)
            MPIDI_PSCOM_complete(req, failed); /* no ack will come: do not wait for it */
    }
    MPIDI_PSCOM_REQ(req).preq = NULL;
    MPIDI_PSCOM_preq_free(preq); /* also frees a pack buffer */
    MPIDI_PSCOM_complete(req, failed);
}

/* Tell a synchronous sender that its message was matched. */
static void send_ack(pscom_request_t *preq)
{
    const MPIDI_PSCOM_tagged_xhdr_t *xh = preq->xheader;
    MPIDI_PSCOM_ack_xhdr_t ack = {
        .type = MPIDI_PSCOM_MSG_SSEND_ACK, .version = MPIDI_PSCOM_WIRE_VERSION, .sreq = xh->sreq};
    if (preq->connection)
        pscom_send(preq->connection, &ack, sizeof(ack), NULL, 0);
}

/* A receive into a staging buffer (non-contiguous type): bytes of it arrived; unpack them into
   the user's buffer. Returns what landed there. */
static __attribute__((noinline)) size_t unpack_staged_now(MPIR_Request *rreq, size_t bytes)
{
    MPIDI_PSCOM_request_t *r = &MPIDI_PSCOM_REQ(rreq);
    MPI_Aint unpacked;
    int err = MPIDI_PSCOM_unpack(r->pack_buf, bytes, r->user_buf, r->count, r->datatype, &unpacked);
    if (err != MPI_SUCCESS && rreq->status.MPI_ERROR == MPI_SUCCESS)
        rreq->status.MPI_ERROR = err; /* device memory could not be written */
    /* bytes that do not make whole elements of the receive type: the signatures of the two
       sides differ */
    if ((size_t)unpacked != bytes && rreq->status.MPI_ERROR == MPI_SUCCESS)
        rreq->status.MPI_ERROR = MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__,
                                                      __LINE__, MPI_ERR_TYPE, "**dtypemismatch", 0);
    return (size_t)unpacked;
}

/* most receives go straight into the user's buffer: no call then */
static inline size_t unpack_staged(MPIR_Request *rreq, size_t bytes)
{
    return MPIDI_PSCOM_REQ(rreq).pack_buf && bytes ? unpack_staged_now(rreq, bytes) : bytes;
}

static inline void release_staged(MPIDI_PSCOM_request_t *r)
{
    if (r->pack_buf) {
        MPIDI_PSCOM_stage_free(r->pack_buf);
        r->pack_buf = NULL;
        MPIR_Datatype_release_if_not_builtin(r->datatype);
    }
}

/*
 * Finish a receive that pscom completed: status, truncation, unpack of staged non-contiguous
 * data, ssend ack. bytes: what landed in the buffer.
 */
static void recv_finish(MPIR_Request *rreq, pscom_request_t *preq)
{
    MPIDI_PSCOM_request_t *r = &MPIDI_PSCOM_REQ(rreq);
    const MPIDI_PSCOM_tagged_xhdr_t *xh = preq->xheader;
    size_t bytes = preq->data_len;

    if (preq->state & PSCOM_REQ_STATE_CANCELED) {
        MPIR_STATUS_SET_CANCEL_BIT(rreq->status, TRUE);
        MPIR_STATUS_SET_COUNT(rreq->status, 0);
    } else {
        rreq->status.MPI_SOURCE = xh->src_rank;
        rreq->status.MPI_TAG = xh->tag;
        rreq->status.MPI_ERROR = MPI_SUCCESS;
        if ((preq->state & PSCOM_REQ_STATE_TRUNCATED) || preq->header.data_len > bytes) {
            rreq->status.MPI_ERROR =
                MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                     MPI_ERR_TRUNCATE, "**truncate", "**truncate %d %d %d %d",
                                     xh->src_rank, xh->tag, (int)preq->header.data_len, (int)bytes);
        } else if (preq->state & PSCOM_REQ_STATE_ERROR) {
            rreq->status.MPI_ERROR = MPIR_Err_create_code(
                MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__, MPI_ERR_OTHER, "**pscom_con",
                "**pscom_con %s %s", preq->connection ? pscom_con_str(preq->connection) : "?",
                pscom_req_state_str(preq->state));
        }
        /* a device rendezvous put it in the user's device buffer already */
        MPIR_STATUS_SET_COUNT(rreq->status, preq->state & PSCOM_REQ_STATE_GPU_DIRECT
                                                ? bytes
                                                : unpack_staged(rreq, bytes));
        if (xh->type == MPIDI_PSCOM_MSG_TAGGED_SYNC)
            send_ack(preq);
    }
    release_staged(r);
    r->preq = NULL;
}

static void recv_done(pscom_request_t *preq)
{
    MPIR_Request *rreq = MPIDI_PSCOM_PREQ(preq)->req;
    int failed = MPIDI_PSCOM_preq_broken(preq);
    recv_finish(rreq, preq);
    MPIDI_PSCOM_preq_free(preq);
    MPIDI_PSCOM_complete(rreq, failed);
}

/* A staged receive into contiguous device memory: where its chunks go as they arrive. */
static void *pipe_dev(MPIR_Request *rreq)
{
    MPIDI_PSCOM_request_t *r = &MPIDI_PSCOM_REQ(rreq);
    int dt_contig;
    size_t data_sz;
    MPI_Aint true_lb;
    MPIR_Datatype *dt_ptr;
    if (!r->pack_buf)
        return NULL;
    MPIDI_Datatype_get_info(r->count, r->datatype, dt_contig, data_sz, dt_ptr, true_lb);
    (void)dt_ptr;
    return dt_contig && MPIDI_PSCOM_IS_DEV(r->user_buf, true_lb, data_sz)
               ? MPIR_get_contig_ptr(r->user_buf, true_lb)
               : NULL;
}

/* The chunks of a chunked message are in (pscom_pipe.c) */
static void pipe_recv_done(pscom_request_t *preq)
{
    MPIR_Request *rreq = MPIDI_PSCOM_PREQ(preq)->req;
    MPIDI_PSCOM_request_t *r = &MPIDI_PSCOM_REQ(rreq);
    if (pipe_dev(rreq)) { /* already copied on to the device chunk by chunk */
        MPIDI_PSCOM_stage_free(r->pack_buf);
        r->pack_buf = NULL;
        MPIR_Datatype_release_if_not_builtin(r->datatype);
    }
    recv_done(preq);
}

/* io_done of a receive into the user's buffer (pscom_recv.h): where nothing waits in the
   completion queue before it and finishing it calls nothing of pscom's (no ssend ack, no
   chunked message, no error), it is finished here, inside pscom's call, as pscom_tagmatch.h's
   completions are; else queued as every other request's. */
void MPIDI_PSCOM_tagged_recv_io_done(pscom_request_t *preq)
{
    const MPIDI_PSCOM_global_t *g = &MPIDI_PSCOM_global;
    const MPIDI_PSCOM_tagged_xhdr_t *xh = preq->xheader;
    if (!g->done_head && !g->in_drain && xh->type == MPIDI_PSCOM_MSG_TAGGED &&
        !(preq->state & (PSCOM_REQ_STATE_ERROR | PSCOM_REQ_STATE_CANCELED)))
        recv_done(preq);
    else
        MPIDI_PSCOM_io_done(preq);
}

void MPIDI_PSCOM_tagged_recv_done(pscom_request_t *preq)
{
    const MPIDI_PSCOM_tagged_xhdr_t *xh = preq->xheader;
    if (unlikely(xh->type == MPIDI_PSCOM_MSG_TAGGED_PIPE)) {
        MPIR_Request *rreq = MPIDI_PSCOM_PREQ(preq)->req;
        MPIDI_PSCOM_request_t *r = &MPIDI_PSCOM_REQ(rreq);
        size_t cap;
        if (r->pack_buf)
            MPIDI_Datatype_check_size(r->datatype, r->count, cap);
        else
            cap = (size_t)r->count; /* the contiguous receive's bytes (pscom_recv.h) */
        if (MPIDI_PSCOM_pipe_recv(preq, cap, pipe_dev(rreq), pipe_recv_done))
            return;
    }
    recv_done(preq);
}

/*
 * Matched-probe receive: MPI_Improbe posts a receive of exactly the probed message into a
 * staging buffer (pscom cannot dequeue on probe, and the user buffer is not known yet).
 * It finishes when both the data is here (mrecv_done) and MPI_Imrecv named the buffer.
 */
static void mrecv_finish(MPIR_Request *rreq, pscom_request_t *preq)
{
    MPIDI_PSCOM_request_t *r = &MPIDI_PSCOM_REQ(rreq);
    size_t room;
    MPIDI_Datatype_check_size(r->datatype, r->count, room);

    /* recv_finish unpacks pack_buf into the user buffer and frees it */
    r->pack_buf = preq->data;
    MPIDI_PSCOM_PREQ(preq)->buf = NULL;
    if (preq->data_len > room) {
        preq->data_len = room;
        preq->state |= PSCOM_REQ_STATE_TRUNCATED;
    }
    int failed = MPIDI_PSCOM_preq_broken(preq);
    recv_finish(rreq, preq);
    MPIDI_PSCOM_preq_free(preq);
    MPIDI_PSCOM_complete(rreq, failed);
}

static void mrecv_data_done(pscom_request_t *preq)
{
    MPIR_Request *rreq = MPIDI_PSCOM_PREQ(preq)->req;
    MPIDI_PSCOM_REQ(rreq).mrecv_state |= MPIDI_PSCOM_MRECV_DATA_DONE;
    if (MPIDI_PSCOM_REQ(rreq).mrecv_state & MPIDI_PSCOM_MRECV_POSTED)
        mrecv_finish(rreq, preq);
}

void MPIDI_PSCOM_mrecv_done(pscom_request_t *preq)
{
    const MPIDI_PSCOM_tagged_xhdr_t *xh = preq->xheader;
    /* the probe sized the staging buffer for the whole message (pscom_probe.h) */
    if (unlikely(xh->type == MPIDI_PSCOM_MSG_TAGGED_PIPE) &&
        MPIDI_PSCOM_pipe_recv(preq, (size_t)xh->sreq, NULL, mrecv_data_done))
        return;
    mrecv_data_done(preq);
}

void MPIDI_PSCOM_mrecv_post(MPIR_Request *rreq, void *buf, MPI_Aint count, MPI_Datatype datatype)
{
    MPIDI_PSCOM_request_t *r = &MPIDI_PSCOM_REQ(rreq);
    r->user_buf = buf;
    r->count = count;
    r->datatype = datatype;
    MPIR_Datatype_add_ref_if_not_builtin(datatype);
    r->mrecv_state |= MPIDI_PSCOM_MRECV_POSTED;
    if (r->mrecv_state & MPIDI_PSCOM_MRECV_DATA_DONE)
        mrecv_finish(rreq, r->preq);
}

/* ---- ssend acknowledgement ---- */

pscom_request_t *MPIDI_PSCOM_ack_recv(pscom_header_net_t *header)
{
    (void)header;
    pscom_request_t *preq = MPIDI_PSCOM_preq_create(sizeof(MPIDI_PSCOM_ack_xhdr_t), ack_recv_done);
    if (preq)
        preq->data_len = 0;
    return preq;
}

static void ack_recv_done(pscom_request_t *preq)
{
    const MPIDI_PSCOM_ack_xhdr_t *ack = preq->xheader;
    MPIR_Request *sreq = (MPIR_Request *)(uintptr_t)ack->sreq;
    MPIDI_PSCOM_preq_free(preq);
    MPIDIU_request_complete(sreq); /* the second of two completions (send done + ack) */
}

/* ---- matching in the transport (pscom_tagmatch.h) ---- */

/* The send and receive that are not the common case (inline in pscom_tagmatch.h): any datatype,
   a request of the caller's, the first send, the errors. */

int MPIDI_PSCOM_tm_send_failed(pscom_connection_t *con, int rc)
{
    return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                MPI_ERR_OTHER, "**pscom_con", "**pscom_con %s %s",
                                pscom_con_str(con), pscom_err_str((pscom_err_t)rc));
}

/* The receive req was not posted: drop our reference, and the caller's if we made it. */
int MPIDI_PSCOM_tm_recv_failed(MPIR_Request *req, int created, int rc)
{
    MPIR_Request_free(req);
    if (created)
        MPIR_Request_free(req);
    return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                MPI_ERR_OTHER, "**pscom_con", "**pscom_con %s %s", "(receive)",
                                pscom_err_str((pscom_err_t)rc));
}

int MPIDI_PSCOM_tm_isend_general(const void *buf, MPI_Aint count, MPI_Datatype datatype, int rank,
                                 int tag, MPIR_Comm *comm, int context_offset,
                                 MPIDI_av_entry_t *addr, MPIR_Request **request, int is_sync)
{
    MPIDI_PSCOM_global_t *g = &MPIDI_PSCOM_global;
    int mpi_errno = MPI_SUCCESS;
    int dt_contig;
    size_t data_sz;
    MPI_Aint dt_true_lb;
    MPIR_Datatype *dt_ptr;
    MPIR_Request *req = *request, *sreq;
    const void *sbuf;
    void *pack = NULL;

    if (unlikely(comm->rank > MPIDI_PSCOM_TM_RANK_MAX))
        return MPIDI_PSCOM_tm_rank_error(comm->rank);
    MPIDI_Datatype_get_info(count, datatype, dt_contig, data_sz, dt_ptr, dt_true_lb);
    (void)dt_ptr;
    pscom_connection_t *con = addr ? MPIDI_PSCOM_av_con(addr) : MPIDI_PSCOM_comm_con(comm, rank);
    if (likely(dt_contig) && !MPIDI_PSCOM_IS_DEV(buf, dt_true_lb, data_sz)) {
        sbuf = data_sz ? MPIR_get_contig_ptr(buf, dt_true_lb) : NULL;
    } else { /* host memory of the packed bytes (device memory copied) */
        pack = MPIDI_PSCOM_stage_alloc(data_sz);
        MPIR_ERR_CHKANDJUMP(pack == NULL && data_sz, mpi_errno, MPI_ERR_OTHER, "**pscom_nomem");
        mpi_errno = MPIDI_PSCOM_pack(buf, count, datatype, pack, data_sz);
        MPIR_ERR_CHECK(mpi_errno);
        sbuf = pack;
    }
    /* the request that completes later, if the send does not complete now: kept from call to
       call until one needs it, so that a send that completes at once makes none */
    sreq = req;
    if (!sreq) {
        sreq = g->spare_sreq;
        if (!sreq) {
            sreq = MPIR_Request_create_from_pool(MPIR_REQUEST_KIND__SEND, 0, 2);
            MPIR_ERR_CHKANDSTMT(sreq == NULL, mpi_errno, MPIX_ERR_NOREQ, goto fn_fail,
                                "**nomemreq");
            g->spare_sreq = sreq;
        }
    } else {
        MPIR_Request_add_ref(req);
    }
    MPIDI_PSCOM_REQ(sreq).pack_buf = pack;
    uint64_t tag64 = MPIDI_PSCOM_tm_tag(comm->context_id + context_offset, comm->rank, tag);
    int rc = pscom_tag_send(con, tag64, sbuf, data_sz, is_sync, sreq);
    if (likely(rc > 0)) { /* sent */
        if (unlikely(pack)) {
            MPIDI_PSCOM_REQ(sreq).pack_buf = NULL;
            MPIDI_PSCOM_stage_free(pack);
        }
        if (req)
            MPIDIU_request_complete(req);
        else
            req = MPIR_Request_create_complete(MPIR_REQUEST_KIND__SEND);
    } else if (rc == 0) { /* MPIDI_PSCOM_tm_done completes it */
        if (!req)
            req = sreq;
        if (sreq == g->spare_sreq)
            g->spare_sreq = NULL;
    } else {
        MPIDI_PSCOM_REQ(sreq).pack_buf = NULL; /* fn_fail frees it */
        if (req)
            MPIR_Request_free(req); /* our reference */
        mpi_errno = MPIDI_PSCOM_tm_send_failed(con, rc);
        goto fn_fail;
    }
    *request = req;

fn_exit:
    return mpi_errno;
fn_fail:
    MPIDI_PSCOM_stage_free(pack);
    goto fn_exit;
}

int MPIDI_PSCOM_tm_irecv_general(void *buf, MPI_Aint count, MPI_Datatype datatype, int rank,
                                 int tag, MPIR_Comm *comm, int context_offset,
                                 MPIR_Request **request)
{
    int mpi_errno = MPI_SUCCESS;
    int dt_contig;
    size_t data_sz;
    MPI_Aint dt_true_lb;
    MPIR_Datatype *dt_ptr;
    MPIR_Request *req = *request;
    void *rbuf, *op, *pack = NULL;
    int created = req == NULL;

    if (unlikely(rank != MPI_ANY_SOURCE && rank > MPIDI_PSCOM_TM_RANK_MAX))
        return MPIDI_PSCOM_tm_rank_error(rank);
    MPIDI_Datatype_get_info(count, datatype, dt_contig, data_sz, dt_ptr, dt_true_lb);
    (void)dt_ptr;
    if (likely(dt_contig) && !MPIDI_PSCOM_IS_DEV(buf, dt_true_lb, data_sz)) {
        rbuf = MPIR_get_contig_ptr(buf, dt_true_lb);
    } else { /* stage in host memory, unpack (or copy to the device) on completion */
        rbuf = pack = MPIDI_PSCOM_stage_alloc(data_sz);
        MPIR_ERR_CHKANDJUMP(pack == NULL && data_sz, mpi_errno, MPI_ERR_OTHER, "**pscom_nomem");
    }
    if (created)
        req = MPIR_Request_create_from_pool(MPIR_REQUEST_KIND__RECV, 0, 2);
    else
        MPIR_Request_add_ref(req);
    if (unlikely(req == NULL)) {
        MPIDI_PSCOM_stage_free(pack);
        MPIR_ERR_SETANDJUMP(mpi_errno, MPIX_ERR_NOREQ, "**nomemreq");
    }
    MPIDI_PSCOM_request_t *r = &MPIDI_PSCOM_REQ(req);
    r->preq = NULL;
    r->mrecv_state = 0;
    r->pack_buf = pack;
    if (likely(!pack)) {
        r->count = (MPI_Aint)data_sz; /* for a truncation's error message */
    } else {
        r->user_buf = buf;
        r->count = count;
        r->datatype = datatype;
        MPIR_Datatype_add_ref_if_not_builtin(datatype);
    }
    int rc = pscom_tag_recv(MPIDI_PSCOM_global.socket,
                            MPIDI_PSCOM_tm_tag(comm->recvcontext_id + context_offset,
                                               rank == MPI_ANY_SOURCE ? 0 : rank,
                                               tag == MPI_ANY_TAG ? 0 : tag),
                            MPIDI_PSCOM_tm_mask(rank, tag), rbuf, data_sz, req, &op);
    if (unlikely(rc < 0)) {
        if (pack) {
            MPIDI_PSCOM_stage_free(pack);
            MPIR_Datatype_release_if_not_builtin(datatype);
        }
        return MPIDI_PSCOM_tm_recv_failed(req, created, rc);
    }
    r->tag_op = op; /* NULL if done already */
    *request = req;
fn_fail:
    return mpi_errno;
}

/* Completion of a send (info NULL) or a receive: finish the MPI request. Runs inside the
   transport's progress (or inside the receive call, for a message that was there), hence
   PSCOM_TAG_DONE_INLINE: it calls no pscom. */
void MPIDI_PSCOM_tm_done(void *user, pscom_tag_status_t status, const pscom_tag_info_t *info)
{
    MPIR_Request *req = user;
    MPIDI_PSCOM_request_t *r = &MPIDI_PSCOM_REQ(req);

    if (likely(info && status == PSCOM_TAG_DONE && !r->pack_buf)) { /* the common receive */
        r->tag_op = NULL;
        req->status.MPI_SOURCE = MPIDI_PSCOM_tm_source(info->tag);
        req->status.MPI_TAG = MPIDI_PSCOM_tm_mpi_tag(info->tag);
        req->status.MPI_ERROR = MPI_SUCCESS;
        MPIR_STATUS_SET_COUNT(req->status, info->len);
        MPIDIU_request_complete(req);
        return;
    }
    if (!info) {
        if (status != PSCOM_TAG_DONE)
            req->status.MPI_ERROR = MPIR_Err_create_code(
                MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__, MPI_ERR_OTHER,
                "**pscom_send", "**pscom_send %s", "the connection failed");
        if (r->pack_buf) {
            MPIDI_PSCOM_stage_free(r->pack_buf);
            r->pack_buf = NULL;
        }
        MPIDI_PSCOM_complete(req, status == PSCOM_TAG_FAILED);
        return;
    }
    r->tag_op = NULL;
    if (status == PSCOM_TAG_CANCELED) {
        MPIR_STATUS_SET_CANCEL_BIT(req->status, TRUE);
        MPIR_STATUS_SET_COUNT(req->status, 0);
    } else {
        int src = MPIDI_PSCOM_tm_source(info->tag), tag = MPIDI_PSCOM_tm_mpi_tag(info->tag);
        size_t bytes = info->len;
        req->status.MPI_SOURCE = src;
        req->status.MPI_TAG = tag;
        req->status.MPI_ERROR = MPI_SUCCESS;
        if (status == PSCOM_TAG_TRUNCATED) {
            /* UCX (1.13) puts none of it in the buffer; the error names what the receive had */
            MPI_Aint room;
            if (r->pack_buf)
                MPIDI_Datatype_check_size(r->datatype, r->count, room);
            else
                room = r->count; /* the contiguous receive's bytes (pscom_tagmatch.h) */
            bytes = 0;
            req->status.MPI_ERROR = MPIR_Err_create_code(
                MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__, MPI_ERR_TRUNCATE,
                "**truncate", "**truncate %d %d %d %d", src, tag, (int)info->len, (int)room);
        } else if (status != PSCOM_TAG_DONE) {
            bytes = 0;
            req->status.MPI_ERROR = MPIR_Err_create_code(
                MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__, MPI_ERR_OTHER, "**pscom_con",
                "**pscom_con %s %s", "(receive)", "the connection failed");
        }
        MPIR_STATUS_SET_COUNT(req->status, unpack_staged(req, bytes));
    }
    release_staged(r);
    MPIDI_PSCOM_complete(req, status == PSCOM_TAG_FAILED);
}

/* Hand MPI's matching to the transport where pscom offers it (ucp the only transport). Before
   the socket's first connection; every process of a job decides alike (same environment). */
void MPIDI_PSCOM_tm_init(void)
{
    MPIDI_PSCOM_global.tag_mode =
        MPIR_Process.size <= MPIDI_PSCOM_TM_RANK_MAX + 1 &&
        pscom_socket_tag_matching(MPIDI_PSCOM_global.socket, MPIDI_PSCOM_tm_done,
                                  PSCOM_TAG_DONE_INLINE);
}

void MPIDI_PSCOM_tm_finalize(void)
{
    if (MPIDI_PSCOM_global.spare_sreq) {
        MPIR_Request_free(MPIDI_PSCOM_global.spare_sreq);
        MPIR_Request_free(MPIDI_PSCOM_global.spare_sreq); /* made with two references */
        MPIDI_PSCOM_global.spare_sreq = NULL;
    }
}
