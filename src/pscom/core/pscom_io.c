/*
 * Messages: send queues, the receive parser that transports feed, matching against posted
 * receives, generated requests for unexpected messages, probe, cancel and waiting.
 */
#include <stdlib.h>
#include <string.h>
#include "pscom_priv.h"

/* An unexpected message of up to this size is kept inside its generated request (size classes
   of 64, 256, 1024 bytes, so the request cache finds them again): no malloc and free per
   message in a stream of early arrivals (an 8-byte Bcast loop spent ~150 instructions there). */
#define GEN_INLINE_MAX 1024

static size_t gen_inline_class(uint64_t len)
{
    return len <= 64 ? 64 : len <= 256 ? 256 : GEN_INLINE_MAX;
}

/* Receiving a small message is one function (pscom_read_feed_user, and recv_whole in the
   parser): the pieces it needs are forced inline into it. */
#define MSG_PATH inline __attribute__((always_inline))

static MSG_PATH void req_complete(pscom_req_t *req)
{
    if (unlikely(req->flags & RQ_GPU_HOST)) { /* a send's host copy of its device memory */
        pscom_host_buffer_free(req->gpu_host, req->gpu_host_cap);
        req->flags &= ~RQ_GPU_HOST;
    }
    req->pub.state |= PSCOM_REQ_STATE_IO_DONE | PSCOM_REQ_STATE_DONE;
    if (unlikely(pscom_reactor_blocker))
        pscom_reactor_wake_blocker(); /* it may be waiting for this request */
    if (req->flags & RQ_INTERNAL) {
        pscom_req_release(req);
        return;
    }
    if (req->pub.ops.io_done)
        req->pub.ops.io_done(&req->pub); /* may free req */
}

void pscom_req_complete(pscom_req_t *req)
{
    req_complete(req);
}

static void req_fail(pscom_req_t *req, int canceled)
{
    req->pub.state |= canceled ? PSCOM_REQ_STATE_CANCELED : PSCOM_REQ_STATE_ERROR;
    pscom_req_complete(req);
}

/* ------------------------------------------------------------------------------------------ */
/* Sending */

/* transports call back into core (completions, user callbacks that send again): the outer
   call keeps writing, nested ones only queue. The library lock serialises all callers. */
static int write_depth;
/* connections kicked while another one wrote (a transport that sends through other pscom
   connections, like gw): the outer call starts them when it is done */
static list_head_t kick_later = LIST_HEAD_INIT(kick_later);

static void kick_write(pscom_con_t *con)
{
    if (con->closed || !con->ops)
        return;
    if (write_depth) {
        if (list_empty(&con->kick_link))
            list_add_tail(&con->kick_link, &kick_later);
        return;
    }
    write_depth++;
    con->ops->write_start(con);
    while (!list_empty(&kick_later)) {
        pscom_con_t *c = list_entry(kick_later.next, pscom_con_t, kick_link);
        list_del(&c->kick_link);
        if (!c->closed && c->ops && c->pub.state == PSCOM_CON_STATE_RW)
            c->ops->write_start(c);
    }
    write_depth--;
}

void pscom_con_queue_send(pscom_con_t *con, pscom_req_t *req)
{
    switch (con->pub.state) {
    case PSCOM_CON_STATE_RW:
        if (con->closed) /* the peer said goodbye and its transport is gone: nothing goes */
            break;
        list_add_tail(&req->q, &con->sendq);
        kick_write(con);
        return;
    case PSCOM_CON_STATE_ONDEMAND:
        list_add_tail(&req->q, &con->sendq);
        pscom_con_start_connect(con);
        return;
    case PSCOM_CON_STATE_CONNECTING:
    case PSCOM_CON_STATE_ACCEPTING:
        list_add_tail(&req->q, &con->sendq);
        return;
    default:
        /* closed by the peer: pscom's own messages may still go while the transport lives */
        if ((req->flags & RQ_INTERNAL) && con->ops && !con->closed) {
            list_add_tail(&req->q, &con->sendq);
            kick_write(con);
            return;
        }
        break;
    }
    req_fail(req, 0);
}

static int send_user_now(pscom_con_t *con, const void *xheader, size_t xheader_len,
                         const void *data, size_t data_len);

static inline void send_start(pscom_req_t *req, const char *caller)
{
    pscom_request_t *pub = &req->pub;
    if (unlikely(req->magic != REQ_MAGIC || !pub->connection ||
                 get_con(pub->connection)->magic != CON_MAGIC))
        pscom_fatal("%s: bad request or connection (%p)", caller, (void *)pub);
    if (unlikely(pub->xheader_len > pub->max_xheader_len || pub->data_len > PSCOM_DATA_LEN_MAX))
        pscom_fatal("%s: xheader_len %zu > max %zu or data_len %zu too large", caller,
                    pub->xheader_len, pub->max_xheader_len, pub->data_len);
    pub->state = PSCOM_REQ_STATE_SEND | PSCOM_REQ_STATE_POSTED;
    req->flags &= RQ_INTERNAL;
    pscom_set_header(&pub->header, MSGTYPE_USER, pub->xheader_len, pub->data_len);
}

PSCOM_API void pscom_post_send(pscom_request_t *pub)
{
    pscom_req_t *req = get_req(pub);
    pscom_lock();
    send_start(req, "pscom_post_send");
    pscom_con_t *con = get_con(pub->connection);
    /* what the transport takes at once completes here, as it would after the queued write,
       without the queue and its iov (pscom_pp over UCX's shared memory, 8 B: see README) */
    if (send_user_now(con, pub->xheader, pub->xheader_len, pub->data, pub->data_len))
        req_complete(req);
    else
        pscom_con_queue_send(con, req);
    pscom_unlock();
}

/* A PAD message at dst that puts the data of a message (data_len bytes, before bytes of header
   and xheader in front of it) at the connection's data alignment from the start of dst; returns
   its length, 0 where the connection wants none (pscom_con_set_data_align). Aligned to the
   stream, not to the sender's buffer: the kernel's copy into its socket buffer is then aligned
   whatever the buffer's alignment (aligning to the buffer instead measured 18-36 us at 64 KiB
   over loopback, against 17.5-20). */
size_t pscom_pad_prefix(const pscom_con_t *con, unsigned char *dst, size_t before,
                        uint64_t data_len)
{
    if (!con->data_align || data_len < con->data_align_min)
        return 0;
    size_t k = (0 - (HDR_SIZE + before)) & (con->data_align - 1);
    pscom_put_header(dst, MSGTYPE_PAD, 0, k);
    memset(dst + HDR_SIZE, 0, k);
    return HDR_SIZE + k;
}

/* Decide eager or rendezvous once the transport (and so the threshold) is known. 0: not yet,
   the receiver's first grant (sent when its side was established, whatever it does then) is
   still on its way. */
static int prepare_iov(pscom_con_t *con, pscom_req_t *req)
{
    size_t xlen = req->pub.header.xheader_len;
    uint64_t dlen = req->pub.data_len;
    if (!(req->flags & RQ_INTERNAL)) {
        /* device memory: the receiver copies it from where it is */
        int rndv = (dlen >= con->rndv_threshold || (req->flags & RQ_GPU)) && dlen > 0;
        if (!rndv && !pscom_fc_take(con, xlen, dlen)) {
            if (!con->fc_granted)
                return 0;
            rndv = 1; /* the receiver takes no more unexpected bytes from us now */
            pscom_stats.fc_rndv++;
            req->flags |= RQ_FC_RNDV;
            req->seq = pscom_now_ns() / 1000000;
        }
        if (rndv) {
            pscom_rndv_prepare_send(con, req);
            req->flags |= RQ_RNDV_WAIT | RQ_IOV_READY;
            return 1;
        }
    } else if (req->pub.header.msg_type == MSGTYPE_USER) {
        con->fc_credit -= (int64_t)pscom_fc_cost(xlen, dlen); /* pscom_send: always eager */
    }
    req->flags |= RQ_IOV_READY;
    req->iov[0].iov_base = req->prefix;
    req->iov[0].iov_len = pscom_pad_prefix(con, req->prefix, HDR_SIZE + req->pub.header.xheader_len,
                                           req->pub.data_len);
    req->iov[1].iov_base = &req->pub.header;
    req->iov[1].iov_len = HDR_SIZE + req->pub.header.xheader_len;
    req->iov[2].iov_base = pscom_req_send_data(req);
    req->iov[2].iov_len = req->pub.header.data_len;
    return 1;
}

int pscom_write_get_iov(pscom_con_t *con, struct iovec iov[3])
{
    if (list_empty(&con->sendq))
        return 0;
    pscom_req_t *req = list_entry(con->sendq.next, pscom_req_t, q);
    if (unlikely(!(req->flags & RQ_IOV_READY)) && !prepare_iov(con, req))
        return 0;
    int n = 0;
    for (int i = 0; i < 3; i++)
        if (req->iov[i].iov_len)
            iov[n++] = req->iov[i];
    if (n == 0) { /* cannot happen: every message has a header */
        iov[0] = req->iov[1];
        n = 1;
    }
    return n;
}

pscom_req_t *pscom_write_hold(pscom_con_t *con)
{
    pscom_req_t *req = list_entry(con->sendq.next, pscom_req_t, q);
    for (int i = 0; i < 3; i++) {
        pscom_stats.bytes_sent += req->iov[i].iov_len;
        req->iov[i].iov_len = 0;
    }
    list_del(&req->q);
    list_add_tail(&req->q, &con->held_sends);
    pscom_stats.msgs_sent++;
    return req;
}

void pscom_write_release(pscom_con_t *con, pscom_req_t *req, int failed)
{
    (void)con;
    list_del(&req->q);
    if (failed)
        req_fail(req, 0);
    else if (!(req->flags & RQ_RNDV_WAIT)) /* else it waits in con->rndv_sends */
        pscom_req_complete(req);
}

int pscom_write_pending(pscom_con_t *con)
{
    return !list_empty(&con->sendq);
}

void pscom_write_done(pscom_con_t *con, size_t len)
{
    pscom_req_t *req = list_entry(con->sendq.next, pscom_req_t, q);
    pscom_stats.bytes_sent += len;
    for (int i = 0; i < 3 && len; i++) {
        size_t n = req->iov[i].iov_len < len ? req->iov[i].iov_len : len;
        req->iov[i].iov_base = (char *)req->iov[i].iov_base + n;
        req->iov[i].iov_len -= n;
        len -= n;
    }
    if (req->iov[0].iov_len | req->iov[1].iov_len | req->iov[2].iov_len)
        return;
    list_del(&req->q);
    pscom_stats.msgs_sent++;
    if (req->flags & RQ_RNDV_WAIT)
        return; /* waits in con->rndv_sends */
    pscom_req_complete(req);
}

pscom_req_t *pscom_req_create_internal(size_t xheader_len, size_t data_len)
{
    pscom_req_t *req = pscom_req_alloc(xheader_len, data_len);
    if (!req)
        pscom_fatal("out of memory for a %zu byte control message", data_len);
    req->flags = RQ_INTERNAL;
    req->pub.data = req->pub.user;
    req->pub.data_len = data_len;
    req->pub.xheader_len = xheader_len;
    req->pub.state = PSCOM_REQ_STATE_SEND | PSCOM_REQ_STATE_POSTED;
    return req;
}

void pscom_send_ctrl(pscom_con_t *con, uint8_t type, const void *xh, size_t xlen, const void *data,
                     size_t dlen)
{
    pscom_req_t *req = pscom_req_create_internal(xlen, dlen);
    if (xlen)
        memcpy(req->pub.xheader, xh, xlen);
    if (dlen)
        pscom_memcpy(req->pub.data, data, dlen);
    pscom_set_header(&req->pub.header, type, xlen, dlen);
    pscom_con_queue_send(con, req);
}

/* A control message ahead of the queued sends (behind one that may be partly written): what
   they may wait for, like the first credit grant. */
void pscom_send_ctrl_first(pscom_con_t *con, uint8_t type, const void *xh, size_t xlen)
{
    pscom_req_t *req = pscom_req_create_internal(xlen, 0);
    memcpy(req->pub.xheader, xh, xlen);
    pscom_set_header(&req->pub.header, type, xlen, 0);
    if (con->pub.state != PSCOM_CON_STATE_RW || con->closed || list_empty(&con->sendq)) {
        pscom_con_queue_send(con, req);
        return;
    }
    list_head_t *first = con->sendq.next;
    /* list_add_tail(e, p) puts e before p */
    list_add_tail(&req->q,
                  list_entry(first, pscom_req_t, q)->flags & RQ_IOV_READY ? first->next : first);
    kick_write(con);
}

PSCOM_API void pscom_send(pscom_connection_t *connection, const void *xheader, size_t xheader_len,
                          const void *data, size_t data_len)
{
    pscom_lock();
    if (xheader_len > PSCOM_XHEADER_MAX)
        pscom_fatal("pscom_send: xheader_len %zu > %d", xheader_len, PSCOM_XHEADER_MAX);
    pscom_con_t *con = get_con(connection);
    pscom_req_t *req = pscom_req_create_internal(xheader_len, data_len);
    if (xheader_len)
        memcpy(req->pub.xheader, xheader, xheader_len);
    if (data_len)
        pscom_memcpy(req->pub.data, data, data_len);
    pscom_set_header(&req->pub.header, MSGTYPE_USER, xheader_len, data_len);
    /* user data: may go by rendezvous, so it is not flagged internal for prepare_iov; the
       buffer lives in the request, which frees itself */
    req->flags = RQ_INTERNAL;
    pscom_con_queue_send(con, req);
    pscom_unlock();
}

/* A user message straight to the transport, if it takes it at once: no request, no send queue.
   Only where nothing else is queued (order) and not from inside a transport's write (see
   kick_write). The lock is held. 1 sent, 0 not. */
static int send_user_now(pscom_con_t *con, const void *xheader, size_t xheader_len,
                         const void *data, size_t data_len)
{
    const pscom_con_ops_t *ops = con->ops;
    int64_t cost = (int64_t)pscom_fc_cost(xheader_len, data_len);
    if (con->pub.state != PSCOM_CON_STATE_RW || !ops || write_depth || con->closed ||
        !list_empty(&con->sendq) || data_len >= con->rndv_threshold ||
        xheader_len > PSCOM_XHEADER_MAX || cost > con->fc_credit)
        return 0;
    size_t len = HDR_SIZE + xheader_len + data_len;
    int sent = 0;
    if (ops->write_user_now) {
        sent = ops->write_user_now(con, xheader, xheader_len, data, data_len) == 1;
    } else if (ops->write_now) {
        pscom_header_net_t h;
        pscom_set_header(&h, MSGTYPE_USER, xheader_len, data_len);
        struct iovec iov[3] = {{&h, HDR_SIZE},
                               {(void *)(uintptr_t)xheader, xheader_len},
                               {(void *)(uintptr_t)data, data_len}};
        /* no empty data entry: a 0-byte message (data may be NULL) costs no copy call */
        sent = ops->write_now(con, iov, data_len ? 3 : 2, len) == 1;
    }
    if (sent) {
        con->fc_credit -= cost;
        pscom_stats.msgs_sent++;
        pscom_stats.bytes_sent += len;
    }
    return sent;
}

PSCOM_API int pscom_send_now(pscom_connection_t *connection, const void *xheader,
                             size_t xheader_len, const void *data, size_t data_len)
{
    pscom_con_t *con = get_con(connection);
    pscom_lock();
    int sent = send_user_now(con, xheader, xheader_len, data, data_len);
    pscom_unlock();
    return sent;
}

/* ------------------------------------------------------------------------------------------ */
/* Receiving: matching */

static MSG_PATH int accepts(pscom_req_t *req, pscom_con_t *con, pscom_header_net_t *hdr)
{
    return !req->pub.ops.recv_accept || req->pub.ops.recv_accept(&req->pub, &con->pub, hdr);
}

static MSG_PATH pscom_req_t *first_accepting(list_head_t *q, pscom_con_t *con,
                                             pscom_header_net_t *hdr)
{
    list_head_t *p;
    list_for_each(p, q)
    {
        pscom_req_t *req = list_entry(p, pscom_req_t, q);
        if (accepts(req, con, hdr))
            return req;
    }
    return NULL;
}

/* Copy the header and as much xheader as fits into the receive request. */
static MSG_PATH void take_header(pscom_req_t *req, pscom_con_t *con, const pscom_header_net_t *hdr)
{
    size_t xlen = hdr->xheader_len;
    if (xlen > req->pub.max_xheader_len) {
        xlen = req->pub.max_xheader_len;
        req->pub.state |= PSCOM_REQ_STATE_TRUNCATED;
    }
    req->pub.header = *hdr;
    req->pub.header.xheader_len = (uint16_t)xlen;
    pscom_copy_small(req->pub.xheader, pscom_header_xheader(hdr), xlen);
    req->pub.xheader_len = xlen;
    req->pub.connection = &con->pub;
}

static pscom_req_t *unposted_recv_req(pscom_con_t *con, pscom_header_net_t *hdr, int rndv);

/* The request that takes a message: posted (con or any, earliest posted first), the socket's
   default_recv hook, or a new generated request. */
static MSG_PATH pscom_req_t *find_recv_req(pscom_con_t *con, pscom_header_net_t *hdr, int rndv)
{
    pscom_req_t *a = list_empty(&con->recvq) ? NULL : first_accepting(&con->recvq, con, hdr);
    pscom_req_t *b =
        list_empty(&con->sock->recvq_any) ? NULL : first_accepting(&con->sock->recvq_any, con, hdr);
    pscom_req_t *req = (a && b) ? (a->seq < b->seq ? a : b) : (a ? a : b);
    if (!req)
        return unposted_recv_req(con, hdr, rndv);
    if (!rndv)
        pscom_fc_consumed(con, pscom_fc_cost(hdr->xheader_len, hdr->data_len));
    list_del(&req->q);
    req->pub.state |= PSCOM_REQ_STATE_IO_STARTED;
    take_header(req, con, hdr);
    return req;
}

/* No posted receive takes it (kept out of line: the posted case is the fast one). */
static __attribute__((noinline)) pscom_req_t *unposted_recv_req(pscom_con_t *con,
                                                                pscom_header_net_t *hdr, int rndv)
{
    pscom_req_t *req;
    if (con->sock->pub.ops.default_recv) {
        pscom_request_t *r = con->sock->pub.ops.default_recv(&con->pub, hdr);
        if (r) {
            req = get_req(r);
            req->flags = 0;
            req->pub.state =
                PSCOM_REQ_STATE_RECV | PSCOM_REQ_STATE_POSTED | PSCOM_REQ_STATE_IO_STARTED;
            take_header(req, con, hdr);
            if (!rndv)
                pscom_fc_consumed(con, pscom_fc_cost(hdr->xheader_len, hdr->data_len));
            return req;
        }
    }
    /* unexpected: keep it in arrival order until a receive or probe asks */
    int inl = !rndv && hdr->data_len && hdr->data_len <= GEN_INLINE_MAX;
    req = pscom_req_alloc(hdr->xheader_len, inl ? gen_inline_class(hdr->data_len) : 0);
    if (!req)
        return NULL;
    req->pub.state = PSCOM_REQ_STATE_RECV | PSCOM_REQ_STATE_GRECV | PSCOM_REQ_STATE_IO_STARTED;
    take_header(req, con, hdr);
    req->pub.data_len = 0;
    if (inl) {
        req->flags |= RQ_GEN_INLINE;
        req->pub.data = req->pub.user;
        req->pub.data_len = hdr->data_len;
    } else if (!rndv && hdr->data_len) {
        req->pub.data = malloc(hdr->data_len);
        if (req->pub.data)
            req->pub.data_len = hdr->data_len;
        else
            req->pub.state |= PSCOM_REQ_STATE_ERROR;
    }
    list_add_tail(&req->q, &con->genq);
    list_add_tail(&req->q_any, &con->sock->genq_any);
    if (!rndv) {
        pscom_stats.eager_unexpected++;
        pscom_fc_gen_held(req, pscom_fc_cost(hdr->xheader_len, hdr->data_len));
    }
    return req;
}

static void free_generated(pscom_req_t *gen)
{
    pscom_fc_unpark(gen);
    if (gen->fc_cost)
        pscom_fc_gen_dropped(gen);
    if (!(gen->flags & RQ_GEN_INLINE))
        free(gen->pub.data);
    pscom_req_release(gen);
}

/* A generated request's data is complete (or failed): hand it to its receive, if any. */
static void gen_finish_merge(pscom_req_t *gen, pscom_req_t *req)
{
    size_t n = gen->pub.data_len;
    if (n > req->pub.data_len) {
        n = req->pub.data_len;
        req->pub.state |= PSCOM_REQ_STATE_TRUNCATED;
    }
    if (n)
        pscom_memcpy(req->pub.data, gen->pub.data, n);
    req->pub.data_len = n;
    req->pub.state |= gen->pub.state & (PSCOM_REQ_STATE_ERROR | PSCOM_REQ_STATE_TRUNCATED);
    free_generated(gen);
    pscom_req_complete(req);
}

static MSG_PATH void recv_done(pscom_req_t *req)
{
    pscom_stats.msgs_recv++;
    if (req->pub.state & PSCOM_REQ_STATE_GRECV) {
        req->pub.state |= PSCOM_REQ_STATE_IO_DONE;
        if (req->partner)
            gen_finish_merge(req, req->partner);
        return;
    }
    req_complete(req);
}

/* Data of the current message goes to req (NULL: discard). */
static void start_data(pscom_con_t *con, pscom_req_t *req, uint64_t data_len)
{
    recv_state_t *rs = &con->rs;
    rs->req = req;
    rs->data_left = data_len;
    rs->dst = req ? req->pub.data : NULL;
    rs->dst_left = 0;
    if (req) {
        uint64_t room = req->pub.data_len;
        if (data_len > room)
            req->pub.state |= PSCOM_REQ_STATE_TRUNCATED;
        rs->dst_left = data_len < room ? data_len : room;
        req->pub.data_len = rs->dst_left;
    }
    pscom_stats.bytes_recv += data_len;
    if (!data_len) {
        rs->req = NULL;
        if (req)
            recv_done(req);
    }
}

pscom_req_t *pscom_recv_match(pscom_con_t *con, pscom_header_net_t *hdr, int rndv)
{
    return find_recv_req(con, hdr, rndv);
}

static __attribute__((noinline, cold)) int protocol_error(pscom_con_t *con, const char *what,
                                                          const pscom_header_net_t *h)
{
    pscom_log(1,
              "malformed message from %s: %s (type %u, version 0x%x, xheader %u, data %llu); "
              "closing the connection",
              con->log_name, what, h->msg_type, h->version, h->xheader_len,
              (unsigned long long)h->data_len);
    pscom_con_fail(con, PSCOM_OP_READ, PSCOM_ERR_PROTOCOL);
    return -1;
}

static inline int check_header(pscom_con_t *con, const pscom_header_net_t *h)
{
    if (unlikely(h->version != PSCOM_WIRE_VERSION))
        return protocol_error(con, "wrong wire version", h);
    if (unlikely(h->msg_type >= MSGTYPE_COUNT || h->reserved))
        return protocol_error(con, "unknown message type", h);
    if (unlikely(h->xheader_len > WIRE_XHEADER_MAX || h->data_len > PSCOM_DATA_LEN_MAX))
        return protocol_error(con, "length out of range", h);
    return 0;
}

static int dispatch(pscom_con_t *con, pscom_header_net_t *hdr)
{
    switch (hdr->msg_type) {
    case MSGTYPE_USER:
        if (unlikely(hdr->xheader_len > PSCOM_XHEADER_MAX))
            return protocol_error(con, "user header too long", hdr);
        start_data(con, find_recv_req(con, hdr, 0), hdr->data_len);
        return 0;
    case MSGTYPE_CREDIT:
        if (pscom_fc_credit_received(con, hdr))
            return protocol_error(con, "bad credit", hdr);
        if (!list_empty(&con->sendq))
            kick_write(con); /* a send may wait for the first grant */
        return 0;
    case MSGTYPE_PAD:
        if (hdr->xheader_len || hdr->data_len > PAD_MAX)
            return protocol_error(con, "bad padding", hdr);
        start_data(con, NULL, hdr->data_len);
        return 0;
    case MSGTYPE_EOF:
        con->eof_received = 1;
        if (con->pub.state == PSCOM_CON_STATE_RW) {
            PSCOM_LOG(3, "%s closed the connection", con->log_name);
            con->pub.state = PSCOM_CON_STATE_CLOSED;
            /* receives posted on this connection can never be satisfied now */
            list_head_t q = LIST_HEAD_INIT(q), rs = LIST_HEAD_INIT(rs), *p, *t;
            list_splice_tail_init(&con->recvq, &q);
            list_for_each_safe(p, t, &q)
            {
                list_del(p);
                req_fail(list_entry(p, pscom_req_t, q), 0);
            }
            /* nor will it pull the data of our rendezvous sends */
            list_splice_tail_init(&con->rndv_sends, &rs);
            list_for_each_safe(p, t, &rs)
            {
                list_del(p);
                req_fail(list_entry(p, pscom_req_t, q_rndv), 0);
            }
            if (!con->error_reported) {
                con->error_reported = 1;
                if (con->sock->pub.ops.con_error)
                    con->sock->pub.ops.con_error(&con->pub, PSCOM_OP_READ, PSCOM_ERR_EOF);
            }
        }
        start_data(con, NULL, hdr->data_len);
        return 0;
    default: {
        pscom_req_t *req = pscom_rndv_dispatch(con, hdr);
        if (req == (pscom_req_t *)-1)
            return protocol_error(con, "bad rendezvous message", hdr);
        start_data(con, req, hdr->data_len);
        return 0;
    }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Receiving: the parser that transports feed */

static void data_done(pscom_con_t *con)
{
    pscom_req_t *req = con->rs.req;
    con->rs.req = NULL;
    if (req)
        recv_done(req);
}

/* A user message whose data is all in this feed (small messages, eager in one piece): match,
   copy and complete at once, without the parser's per-message state. */
static MSG_PATH void recv_whole(pscom_con_t *con, pscom_header_net_t *hdr, const char *data,
                                uint64_t dlen)
{
    pscom_req_t *req = find_recv_req(con, hdr, 0);
    pscom_stats.bytes_recv += dlen;
    if (unlikely(!req))
        return; /* out of memory for an unexpected message: dropped (as in start_data) */
    uint64_t n = req->pub.data_len;
    if (unlikely(dlen > n))
        req->pub.state |= PSCOM_REQ_STATE_TRUNCATED;
    else
        n = dlen;
    req->pub.data_len = n;
    pscom_copy_data(req->pub.data, data, n);
    recv_done(req);
}

PSCOM_PLUGIN_API int pscom_header_user_xlen(const void *hdr, size_t len)
{
    pscom_header_net_t h;
    if (len < HDR_SIZE)
        return -1;
    memcpy(&h, hdr, HDR_SIZE);
    if (h.version != PSCOM_WIRE_VERSION || h.msg_type != MSGTYPE_USER || h.reserved ||
        h.xheader_len > PSCOM_XHEADER_MAX || HDR_SIZE + h.xheader_len + h.data_len != len)
        return -1;
    return h.xheader_len;
}

PSCOM_PLUGIN_API void pscom_read_feed_user(pscom_con_t *con, const void *xheader, size_t xlen,
                                           const void *data, size_t dlen)
{
    _Alignas(16) unsigned char buf[HDR_SIZE + 256];
    pscom_header_net_t *h = (pscom_header_net_t *)buf;
    if (likely(!con->rs.data_left && !con->rs.hlen && xlen <= sizeof(buf) - HDR_SIZE)) {
        pscom_set_header(h, MSGTYPE_USER, xlen, dlen);
        pscom_copy_small(buf + HDR_SIZE, xheader, xlen);
        recv_whole(con, h, data, dlen);
        return;
    }
    /* in the middle of another message (a transport bug) or a long user header: the parser,
       which also refuses one that is too long */
    pscom_header_net_t hdr;
    pscom_set_header(&hdr, MSGTYPE_USER, xlen > UINT16_MAX ? UINT16_MAX : xlen, dlen);
    pscom_read_feed(con, &hdr, HDR_SIZE);
    if (xlen && con->pub.state != PSCOM_CON_STATE_ERROR)
        pscom_read_feed(con, xheader, xlen);
    if (dlen && con->pub.state != PSCOM_CON_STATE_ERROR)
        pscom_read_feed(con, data, dlen);
}

/* Larger user headers of an unaligned message go through the assembly buffer. */
#define FEED_COPY_XHEADER 256

/* The header at p (len >= HDR_SIZE bytes there) if it can be read in place or from an
   aligned copy: UCX hands over payloads at any alignment. NULL: assemble it in hbuf. */
static inline pscom_header_net_t *feed_header(const char *p, size_t len, unsigned char *copy)
{
    if (!((uintptr_t)p & 7))
        return (pscom_header_net_t *)p;
    uint16_t xlen;
    memcpy(&xlen, p + offsetof(pscom_header_net_t, xheader_len), sizeof(xlen));
    if (xlen > FEED_COPY_XHEADER || HDR_SIZE + xlen > len)
        return NULL;
    memcpy(copy, p, HDR_SIZE + xlen);
    return (pscom_header_net_t *)copy;
}

void pscom_read_feed(pscom_con_t *con, const void *buf, size_t len)
{
    const char *p = buf;
    recv_state_t *rs = &con->rs;
    _Alignas(16) unsigned char copy[HDR_SIZE + FEED_COPY_XHEADER];
    /* the common case first: exactly one whole user message (a shm ring record, a UCX short
       message), its header read in place or, where the transport hands it over unaligned,
       from an aligned copy. Anything else, or anything odd, takes the general parser below. */
    pscom_header_net_t *h1 = NULL; /* not a whole message: the loop starts with this header */
    if (likely(!rs->data_left && !rs->hlen && len >= HDR_SIZE &&
               (h1 = feed_header(p, len, copy)) != NULL)) {
        if (check_header(con, h1))
            return;
        size_t need = HDR_SIZE + h1->xheader_len;
        if (likely(h1->msg_type == MSGTYPE_USER && h1->xheader_len <= PSCOM_XHEADER_MAX &&
                   need <= len && h1->data_len == len - need)) {
            recv_whole(con, h1, p + need, h1->data_len);
            return;
        }
    }
    while (len) {
        if (rs->data_left) {
            size_t n = len < rs->data_left ? len : rs->data_left;
            if (rs->dst_left) {
                size_t c = n < rs->dst_left ? n : rs->dst_left;
                pscom_memcpy(rs->dst, p, c);
                rs->dst += c;
                rs->dst_left -= c;
            }
            p += n;
            len -= n;
            rs->data_left -= n;
            if (!rs->data_left)
                data_done(con);
            continue;
        }
        /* fast path: a whole header in the buffer. UCX hands over payloads at any alignment:
           a small header is read from an aligned copy on the stack (no hbuf round trip). */
        pscom_header_net_t *h = h1;
        h1 = NULL;
        if (!h && rs->hlen == 0 && len >= HDR_SIZE)
            h = feed_header(p, len, copy);
        if (h) {
            if (check_header(con, h))
                return;
            size_t need = HDR_SIZE + h->xheader_len;
            if (len >= need) {
                p += need;
                len -= need;
                uint64_t dlen = h->data_len;
                if (h->msg_type == MSGTYPE_USER && dlen <= len &&
                    h->xheader_len <= PSCOM_XHEADER_MAX) {
                    recv_whole(con, h, p, dlen);
                    p += dlen;
                    len -= dlen;
                    if (con->pub.state == PSCOM_CON_STATE_ERROR)
                        return;
                    continue;
                }
                if (dispatch(con, h))
                    return;
                if (con->pub.state == PSCOM_CON_STATE_ERROR)
                    return;
                continue;
            }
        }
        /* slow path: assemble the header */
        if (!rs->hbuf) {
            /* aligned_alloc wants a multiple of the alignment */
            rs->hbuf = aligned_alloc(16, (HDR_SIZE + WIRE_XHEADER_MAX + 15) & ~(size_t)15);
            if (!rs->hbuf)
                pscom_fatal("out of memory");
        }
        h = (pscom_header_net_t *)rs->hbuf;
        size_t need = rs->hlen >= HDR_SIZE ? HDR_SIZE + h->xheader_len : HDR_SIZE;
        size_t c = need - rs->hlen < len ? need - rs->hlen : len;
        memcpy(rs->hbuf + rs->hlen, p, c);
        rs->hlen += c;
        p += c;
        len -= c;
        if (rs->hlen == HDR_SIZE) {
            if (check_header(con, h))
                return;
            need = HDR_SIZE + h->xheader_len;
        }
        if (rs->hlen == need) {
            rs->hlen = 0;
            if (dispatch(con, h) || con->pub.state == PSCOM_CON_STATE_ERROR)
                return;
        }
    }
}

size_t pscom_read_direct_buf(pscom_con_t *con, void **buf)
{
    recv_state_t *rs = &con->rs;
    if (!rs->data_left || !rs->dst_left)
        return 0;
    *buf = rs->dst;
    return rs->dst_left;
}

void pscom_read_direct_done(pscom_con_t *con, size_t len)
{
    recv_state_t *rs = &con->rs;
    rs->dst += len;
    rs->dst_left -= len;
    rs->data_left -= len;
    if (!rs->data_left)
        data_done(con);
}

/* ------------------------------------------------------------------------------------------ */
/* Posting receives, probe, cancel */

/* A receive takes over a generated request. */
static void merge(pscom_req_t *req, pscom_req_t *gen)
{
    pscom_con_t *con = get_con(gen->pub.connection);
    list_del(&gen->q);
    list_del(&gen->q_any);
    pscom_fc_gen_taken(con, gen);
    req->pub.state |= PSCOM_REQ_STATE_IO_STARTED | PSCOM_REQ_STATE_MERGED;
    take_header(req, con, &gen->pub.header);
    memcpy(req->pub.xheader, gen->pub.xheader,
           gen->pub.xheader_len < req->pub.max_xheader_len ? gen->pub.xheader_len
                                                           : req->pub.max_xheader_len);
    if (gen->pub.state & PSCOM_REQ_STATE_RENDEZVOUS) {
        req->rndv_addr = gen->rndv_addr;
        req->rndv_len = gen->rndv_len;
        req->rndv_send_id = gen->rndv_send_id;
        if (gen->flags & RQ_RNDV_GPU) {
            req->rndv_gpu = gen->rndv_gpu;
            req->flags |= RQ_RNDV_GPU;
        }
        req->pub.state |= PSCOM_REQ_STATE_RENDEZVOUS;
        int failed = gen->pub.state & PSCOM_REQ_STATE_ERROR;
        free_generated(gen);
        if (failed)
            req_fail(req, 0);
        else
            pscom_rndv_start_pull(con, req);
    } else if (gen->pub.state & PSCOM_REQ_STATE_IO_DONE) {
        gen_finish_merge(gen, req);
    } else if ((gen->pub.state & PSCOM_REQ_STATE_ERROR) && con->rs.req != gen) {
        /* failed and nothing more comes for it (its connection failed) */
        free_generated(gen);
        req_fail(req, 0);
    } else {
        /* still arriving, also one that failed (no memory for its data) while the parser
           still passes its data over: recv_done hands it on, the error with it */
        gen->partner = req; /* still arriving */
    }
}

static pscom_req_t *find_generated_in(pscom_req_t *req)
{
    list_head_t *p;
    if (req->pub.connection) {
        pscom_con_t *con = get_con(req->pub.connection);
        list_for_each(p, &con->genq)
        {
            pscom_req_t *gen = list_entry(p, pscom_req_t, q);
            if (accepts(req, con, &gen->pub.header))
                return gen;
        }
    } else {
        list_for_each(p, &get_sock(req->pub.socket)->genq_any)
        {
            pscom_req_t *gen = list_entry(p, pscom_req_t, q_any);
            if (accepts(req, get_con(gen->pub.connection), &gen->pub.header))
                return gen;
        }
    }
    return NULL;
}

/* most receives find nothing waiting: no call then */
static inline pscom_req_t *find_generated(pscom_req_t *req)
{
    const list_head_t *q = req->pub.connection ? &get_con(req->pub.connection)->genq
                                               : &get_sock(req->pub.socket)->genq_any;
    return list_empty(q) ? NULL : find_generated_in(req);
}

static void post_recv(pscom_request_t *pub, void *gpu_dst)
{
    pscom_req_t *req = get_req(pub);
    pscom_lock();
    if (unlikely(req->magic != REQ_MAGIC || (!pub->connection && !pub->socket)))
        pscom_fatal("pscom_post_recv: bad request or neither connection nor socket (%p)",
                    (void *)pub);
    pub->state = PSCOM_REQ_STATE_RECV | PSCOM_REQ_STATE_POSTED;
    req->flags = 0;
    req->partner = NULL;
    if (unlikely(gpu_dst)) { /* pscom_post_recv_gpu; else gpu_dst is not read (RQ_GPU_DST) */
        req->gpu_dst = gpu_dst;
        req->flags = RQ_GPU_DST;
    }
    pscom_req_t *gen = find_generated(req);
    if (gen) {
        merge(req, gen);
    } else if (pub->connection) {
        pscom_con_t *con = get_con(pub->connection);
        if (con->pub.state >= PSCOM_CON_STATE_CLOSED) {
            req_fail(req, 0);
        } else {
            req->seq = ++pscom_global.recv_seq;
            list_add_tail(&req->q, &con->recvq);
        }
    } else {
        req->seq = ++pscom_global.recv_seq;
        list_add_tail(&req->q, &get_sock(pub->socket)->recvq_any);
    }
    pscom_unlock();
}

PSCOM_API void pscom_post_recv(pscom_request_t *pub)
{
    post_recv(pub, NULL);
}

PSCOM_API void pscom_post_recv_gpu(pscom_request_t *pub, void *dev)
{
    post_recv(pub, dev);
}

/* Device memory by rendezvous (pscom_rndv.c). A buffer that cannot be exported goes as host
   memory from a host copy: the send then fails only if that copy does. */
PSCOM_API void pscom_post_send_gpu(pscom_request_t *pub)
{
    pscom_req_t *req = get_req(pub);
    pscom_lock();
    send_start(req, "pscom_post_send_gpu");
    pscom_con_t *con = get_con(pub->connection);
    if (pscom_cuda_ipc_export(pub->data, &req->rndv_gpu) == 0) {
        req->flags |= RQ_GPU;
    } else if (pub->data_len && pscom_rndv_stage_gpu(req) != 0) {
        req_fail(req, 0);
        pscom_unlock();
        return;
    }
    pscom_con_queue_send(con, req);
    pscom_unlock();
}

PSCOM_API int pscom_con_gpu_direct(pscom_connection_t *pub, size_t len)
{
    pscom_con_t *con = get_con(pub);
    return pscom_cuda_ipc_enabled() && len >= pscom_cuda_ipc_min() && len &&
           pscom_con_peer_same_node(con) && con->peer_pid != pscom_global.pid;
}

PSCOM_API int pscom_iprobe(pscom_request_t *pub)
{
    pscom_req_t *req = get_req(pub);
    pscom_lock();
    pscom_progress_poll();
    pscom_req_t *gen = find_generated(req);
    if (gen) {
        pscom_con_t *con = get_con(gen->pub.connection);
        unsigned int state = pub->state;
        take_header(req, con, &gen->pub.header);
        memcpy(pub->xheader, gen->pub.xheader,
               gen->pub.xheader_len < pub->max_xheader_len ? gen->pub.xheader_len
                                                           : pub->max_xheader_len);
        pub->state = state; /* probing changes no state */
        pub->data_len = gen->pub.header.data_len;
    }
    pscom_unlock();
    return gen != NULL;
}

PSCOM_API void pscom_probe(pscom_request_t *pub)
{
    while (!pscom_iprobe(pub))
        pscom_progress(1);
}

PSCOM_API int pscom_cancel_recv(pscom_request_t *pub)
{
    pscom_req_t *req = get_req(pub);
    int done = 0;
    pscom_lock();
    if ((pub->state & (PSCOM_REQ_STATE_RECV | PSCOM_REQ_STATE_POSTED)) ==
            (PSCOM_REQ_STATE_RECV | PSCOM_REQ_STATE_POSTED) &&
        !(pub->state & (PSCOM_REQ_STATE_IO_STARTED | PSCOM_REQ_STATE_DONE)) &&
        list_linked(&req->q)) {
        list_del(&req->q);
        req_fail(req, 1);
        done = 1;
    }
    pscom_unlock();
    return done;
}

/* ------------------------------------------------------------------------------------------ */
/* Failing a connection's requests */

static void move_all(list_head_t *from, list_head_t *to, size_t link_offset)
{
    (void)link_offset;
    while (!list_empty(from)) {
        list_head_t *p = from->next;
        list_del(p);
        list_add_tail(p, to);
    }
}

void pscom_con_fail_requests(pscom_con_t *con, pscom_err_t err)
{
    (void)err;
    pscom_tag_con_failed(con);
    list_head_t sends = LIST_HEAD_INIT(sends), recvs = LIST_HEAD_INIT(recvs);
    list_head_t rsends = LIST_HEAD_INIT(rsends), rrecvs = LIST_HEAD_INIT(rrecvs), *p;
    move_all(&con->sendq, &sends, 0);
    move_all(&con->held_sends, &sends, 0);
    move_all(&con->recvq, &recvs, 0);
    move_all(&con->rndv_sends, &rsends, 0);
    move_all(&con->rndv_recvs, &rrecvs, 0);

    /* the message being received: a receive fails; a generated one is marked */
    pscom_req_t *cur = con->rs.req;
    con->rs.req = NULL;
    con->rs.data_left = con->rs.dst_left = 0;
    con->rs.hlen = 0;
    list_for_each(p, &con->genq)
    {
        pscom_req_t *gen = list_entry(p, pscom_req_t, q);
        if (!(gen->pub.state & PSCOM_REQ_STATE_IO_DONE))
            gen->pub.state |= PSCOM_REQ_STATE_ERROR;
    }

    while (!list_empty(&sends)) {
        pscom_req_t *r = list_entry(sends.next, pscom_req_t, q);
        list_del(&r->q);
        if (r->flags & RQ_RNDV_WAIT)
            list_del(&r->q_rndv);
        req_fail(r, 0);
    }
    while (!list_empty(&rsends)) {
        pscom_req_t *r = list_entry(rsends.next, pscom_req_t, q_rndv);
        list_del(&r->q_rndv);
        req_fail(r, 0);
    }
    while (!list_empty(&recvs)) {
        pscom_req_t *r = list_entry(recvs.next, pscom_req_t, q);
        list_del(&r->q);
        req_fail(r, 0);
    }
    while (!list_empty(&rrecvs)) {
        pscom_req_t *r = list_entry(rrecvs.next, pscom_req_t, q_rndv);
        list_del(&r->q_rndv);
        if (r->pub.state & PSCOM_REQ_STATE_GRECV) { /* fetched ahead: its data comes no more */
            r->flags &= ~RQ_FC_AHEAD;
            r->pub.state |= PSCOM_REQ_STATE_ERROR | PSCOM_REQ_STATE_IO_DONE;
            if (r != cur && r->partner)
                gen_finish_merge(r, r->partner);
            continue;
        }
        req_fail(r, 0);
    }
    if (cur) {
        if (cur->pub.state & PSCOM_REQ_STATE_GRECV) {
            cur->pub.state |= PSCOM_REQ_STATE_ERROR | PSCOM_REQ_STATE_IO_DONE;
            if (cur->partner)
                gen_finish_merge(cur, cur->partner);
        } else {
            req_fail(cur, 0);
        }
    }
}

/* Generated requests left when a socket's connection goes away. */
void pscom_con_drop_generated(pscom_con_t *con)
{
    while (!list_empty(&con->genq)) {
        pscom_req_t *gen = list_entry(con->genq.next, pscom_req_t, q);
        list_del(&gen->q);
        list_del(&gen->q_any);
        if (gen->partner)
            req_fail(gen->partner, 0);
        free_generated(gen);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Waiting */

static int req_done(void *arg)
{
    return (((pscom_request_t *)arg)->state & PSCOM_REQ_STATE_DONE) != 0;
}

PSCOM_API void pscom_wait(pscom_request_t *pub)
{
    pscom_lock();
    pscom_wait_until(req_done, pub);
    pscom_unlock();
}

static int all_done(void *arg)
{
    for (pscom_request_t **r = arg; *r; r++)
        if (!((*r)->state & PSCOM_REQ_STATE_DONE))
            return 0;
    return 1;
}

PSCOM_API void pscom_wait_all(pscom_request_t **reqs)
{
    pscom_lock();
    pscom_wait_until(all_done, reqs);
    pscom_unlock();
}

static int any_done(void *arg)
{
    for (pscom_request_t **r = arg; *r; r++)
        if ((*r)->state & PSCOM_REQ_STATE_DONE)
            return 1;
    return 0;
}

PSCOM_API int pscom_wait_any(pscom_request_t **reqs)
{
    pscom_lock();
    pscom_wait_until(any_done, reqs);
    pscom_unlock();
    for (int i = 0; reqs[i]; i++)
        if (reqs[i]->state & PSCOM_REQ_STATE_DONE)
            return i;
    return -1;
}

PSCOM_API int pscom_test(pscom_request_t *pub)
{
    if (pub->state & PSCOM_REQ_STATE_DONE)
        return 1;
    pscom_lock();
    pscom_progress_poll();
    pscom_unlock();
    return (pub->state & PSCOM_REQ_STATE_DONE) != 0;
}

PSCOM_API pscom_err_t pscom_recv(pscom_connection_t *con, pscom_socket_t *socket, void *xheader,
                                 size_t xheader_len, void *data, size_t data_len,
                                 pscom_connection_t **con_out)
{
    pscom_request_t *req = pscom_request_create(xheader_len, 0);
    if (!req)
        return PSCOM_ERR_NOMEM;
    req->connection = con;
    req->socket = con ? con->socket : socket;
    req->data = data;
    req->data_len = data_len;
    pscom_post_recv(req);
    pscom_wait(req);
    if (xheader_len)
        memcpy(xheader, req->xheader, req->xheader_len);
    pscom_err_t ret = pscom_req_successful(req)                  ? PSCOM_SUCCESS
                      : (req->state & PSCOM_REQ_STATE_TRUNCATED) ? PSCOM_ERR_INVALID
                                                                 : PSCOM_ERR_IOERROR;
    if (con_out)
        *con_out = req->connection;
    pscom_request_free(req);
    return ret;
}
