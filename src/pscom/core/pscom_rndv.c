/*
 * Rendezvous for large messages. The sender posts a RNDV_REQ carrying the user's header and
 * where the data lies; the receiver matches it like any message (so order is kept) and pulls
 * the data in one copy if the transport can (shm: process_vm_readv), then sends RNDV_FIN.
 * Otherwise it sends RNDV_READ and the sender pushes the data as RNDV_DATA.
 */
#include <string.h>
#include "pscom_priv.h"

void pscom_rndv_prepare_send(pscom_con_t *con, pscom_req_t *req)
{
    req->id = con->next_rndv_id++;
    list_add_tail(&req->q_rndv, &con->rndv_sends);
    req->pub.state |= PSCOM_REQ_STATE_RENDEZVOUS;
    rndv_req_t r = {.send_id = req->id,
                    .addr = (uint64_t)(uintptr_t)req->pub.data,
                    .len = req->pub.data_len,
                    .reserved = 0};
    pscom_put_header(req->prefix, MSGTYPE_RNDV_REQ, RNDV_PREFIX_SIZE + req->pub.header.xheader_len,
                     0);
    memcpy(req->prefix + HDR_SIZE, &r, sizeof(r));
    req->iov[0].iov_base = req->prefix;
    req->iov[0].iov_len = HDR_SIZE + sizeof(rndv_req_t);
    req->iov[1].iov_base = &req->pub.header;
    req->iov[1].iov_len = HDR_SIZE + req->pub.header.xheader_len;
    req->iov[2].iov_len = 0;
    pscom_stats.rndv_sent++;
}

static pscom_req_t *find_by_id(list_head_t *list, uint64_t id)
{
    list_head_t *p;
    list_for_each(p, list)
    {
        pscom_req_t *req = list_entry(p, pscom_req_t, q_rndv);
        if (req->id == id)
            return req;
    }
    return NULL;
}

static pscom_req_t *take_by_id(list_head_t *list, uint64_t id)
{
    pscom_req_t *req = find_by_id(list, id);
    if (req)
        list_del(&req->q_rndv);
    return req;
}

void pscom_rndv_start_pull(pscom_con_t *con, pscom_req_t *req)
{
    uint64_t n = req->rndv_len;
    if (n > req->pub.data_len) {
        n = req->pub.data_len;
        req->pub.state |= PSCOM_REQ_STATE_TRUNCATED;
    }
    req->pub.data_len = n;
    pscom_stats.rndv_recv++;
    if (con->closed || !con->ops) {
        req->pub.state |= PSCOM_REQ_STATE_ERROR;
        pscom_req_complete(req);
        return;
    }
    if (con->ops->rndv_pull &&
        (n == 0 || con->ops->rndv_pull(con, req->pub.data, req->rndv_addr, n) == 0)) {
        rndv_fin_t fin = {.id = req->rndv_send_id};
        pscom_send_ctrl(con, MSGTYPE_RNDV_FIN, &fin, sizeof(fin), NULL, 0);
        pscom_stats.rndv_pull++;
        pscom_req_complete(req);
        return;
    }
    /* no single copy: the sender pushes the data to us */
    req->id = con->next_rndv_id++;
    list_add_tail(&req->q_rndv, &con->rndv_recvs);
    rndv_read_t rd = {.send_id = req->rndv_send_id, .recv_id = req->id};
    pscom_send_ctrl(con, MSGTYPE_RNDV_READ, &rd, sizeof(rd), NULL, 0);
    pscom_stats.rndv_sw_fallback++;
}

static void push_data(pscom_con_t *con, pscom_req_t *req, uint64_t recv_id)
{
    rndv_fin_t id = {.id = recv_id};
    size_t pad = pscom_pad_prefix(con, req->prefix, HDR_SIZE + sizeof(id), req->pub.data_len);
    pscom_put_header(req->prefix + pad, MSGTYPE_RNDV_DATA, sizeof(id), req->pub.data_len);
    memcpy(req->prefix + pad + HDR_SIZE, &id, sizeof(id));
    req->iov[0].iov_base = req->prefix;
    req->iov[0].iov_len = pad + HDR_SIZE + sizeof(id);
    req->iov[1].iov_len = 0;
    req->iov[2].iov_base = req->pub.data;
    req->iov[2].iov_len = req->pub.data_len;
    req->flags = (req->flags & ~RQ_RNDV_WAIT) | RQ_IOV_READY | RQ_PUSH;
    pscom_con_queue_send(con, req);
}

/* Returns the request that takes the message's data, NULL for none, (pscom_req_t *)-1 for a
   malformed message. */
pscom_req_t *pscom_rndv_dispatch(pscom_con_t *con, pscom_header_net_t *hdr)
{
    const unsigned char *xh = pscom_header_xheader(hdr);
    switch (hdr->msg_type) {
    case MSGTYPE_RNDV_REQ: {
        if (hdr->xheader_len < RNDV_PREFIX_SIZE || hdr->data_len)
            return (pscom_req_t *)-1;
        rndv_req_t r;
        memcpy(&r, xh, sizeof(r));
        pscom_header_net_t *inner = (pscom_header_net_t *)(xh + sizeof(rndv_req_t));
        if (inner->msg_type != MSGTYPE_USER || inner->version != PSCOM_WIRE_VERSION ||
            inner->xheader_len != hdr->xheader_len - RNDV_PREFIX_SIZE || inner->data_len != r.len ||
            r.len > PSCOM_DATA_LEN_MAX)
            return (pscom_req_t *)-1;
        if (r.len < con->rndv_threshold)
            pscom_fc_starved(con);
        /* match exactly like an eager message, then pull (or park the generated one) */
        pscom_req_t *req = pscom_recv_match(con, inner, 1);
        if (!req)
            return NULL;
        req->rndv_addr = r.addr;
        req->rndv_len = r.len;
        req->rndv_send_id = r.send_id;
        req->pub.state |= PSCOM_REQ_STATE_RENDEZVOUS;
        if (!(req->pub.state & PSCOM_REQ_STATE_GRECV))
            pscom_rndv_start_pull(con, req);
        return NULL;
    }
    case MSGTYPE_RNDV_FIN: {
        rndv_fin_t fin;
        if (hdr->xheader_len != sizeof(fin) || hdr->data_len)
            return (pscom_req_t *)-1;
        memcpy(&fin, xh, sizeof(fin));
        pscom_req_t *req = take_by_id(&con->rndv_sends, fin.id);
        if (!req)
            return (pscom_req_t *)-1;
        pscom_req_complete(req);
        return NULL;
    }
    case MSGTYPE_RNDV_READ: {
        rndv_read_t rd;
        if (hdr->xheader_len != sizeof(rd) || hdr->data_len)
            return (pscom_req_t *)-1;
        memcpy(&rd, xh, sizeof(rd));
        pscom_req_t *req = take_by_id(&con->rndv_sends, rd.send_id);
        if (!req)
            return (pscom_req_t *)-1;
        push_data(con, req, rd.recv_id);
        return NULL;
    }
    case MSGTYPE_RNDV_DATA: {
        rndv_fin_t id;
        if (hdr->xheader_len != sizeof(id))
            return (pscom_req_t *)-1;
        memcpy(&id, xh, sizeof(id));
        /* taken only when it fits: a malformed push fails the connection, and with it the
           receive, which must still be in rndv_recvs for that */
        pscom_req_t *req = find_by_id(&con->rndv_recvs, id.id);
        if (!req || hdr->data_len != req->rndv_len)
            return (pscom_req_t *)-1;
        list_del(&req->q_rndv);
        return req;
    }
    default:
        return (pscom_req_t *)-1;
    }
}
