/*
 * Rendezvous for large messages. The sender posts a RNDV_REQ carrying the user's header and
 * where the data lies; the receiver matches it like any message (so order is kept) and pulls
 * the data in one copy if the transport can (shm: process_vm_readv), then sends RNDV_FIN.
 * Otherwise it sends RNDV_READ and the sender pushes the data as RNDV_DATA.
 *
 * Device memory (pscom_post_send_gpu) goes as a device rendezvous: the request carries the
 * exported allocation (rndv_gpu_t), and a receiver on the node copies from it with one driver
 * copy, to device memory (pscom_post_recv_gpu) or host memory. A receiver that cannot open it
 * sends RNDV_READ, and the sender pushes a host copy.
 */
#include <stdlib.h>
#include <string.h>
#include "pscom_priv.h"

void pscom_rndv_prepare_send(pscom_con_t *con, pscom_req_t *req)
{
    req->id = con->next_rndv_id++;
    list_add_tail(&req->q_rndv, &con->rndv_sends);
    req->pub.state |= PSCOM_REQ_STATE_RENDEZVOUS;
    /* device memory (exported by pscom_post_send_gpu): no address a CPU may read */
    int gpu = (req->flags & RQ_GPU) != 0;
    rndv_req_t r = {.send_id = req->id,
                    .addr = gpu ? 0 : (uint64_t)(uintptr_t)pscom_req_send_data(req),
                    .len = req->pub.data_len,
                    .flags = gpu ? RNDV_FLAG_GPU : 0};
    size_t pre = sizeof(r) + (gpu ? sizeof(rndv_gpu_t) : 0);
    pscom_put_header(req->prefix, MSGTYPE_RNDV_REQ, HDR_SIZE + pre + req->pub.header.xheader_len,
                     0);
    memcpy(req->prefix + HDR_SIZE, &r, sizeof(r));
    if (gpu)
        memcpy(req->prefix + HDR_SIZE + sizeof(r), &req->rndv_gpu, sizeof(rndv_gpu_t));
    req->iov[0].iov_base = req->prefix;
    req->iov[0].iov_len = HDR_SIZE + pre;
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

/* RNDV_READ: the sender pushes req's data as RNDV_DATA, which finds req in rndv_recvs */
static void ask_push(pscom_con_t *con, pscom_req_t *req)
{
    req->id = con->next_rndv_id++;
    list_add_tail(&req->q_rndv, &con->rndv_recvs);
    rndv_read_t rd = {.send_id = req->rndv_send_id, .recv_id = req->id};
    pscom_send_ctrl(con, MSGTYPE_RNDV_READ, &rd, sizeof(rd), NULL, 0);
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
    int pulled;
    if (req->flags & RQ_RNDV_GPU) { /* from the sender's device memory, where we can open it */
        int to_dev = (req->flags & RQ_GPU_DST) != 0;
        pulled = n == 0 ||
                 pscom_cuda_ipc_copy(to_dev ? req->gpu_dst : req->pub.data, &req->rndv_gpu, n) == 0;
        if (pulled && to_dev)
            req->pub.state |= PSCOM_REQ_STATE_GPU_DIRECT;
        pscom_stats.rndv_gpu += pulled;
    } else {
        pulled = con->ops->rndv_pull &&
                 (n == 0 || con->ops->rndv_pull(con, req->pub.data, req->rndv_addr, n) == 0);
    }
    if (pulled) {
        rndv_fin_t fin = {.id = req->rndv_send_id};
        pscom_send_ctrl(con, MSGTYPE_RNDV_FIN, &fin, sizeof(fin), NULL, 0);
        pscom_stats.rndv_pull++;
        pscom_req_complete(req);
        return;
    }
    /* no single copy: the sender pushes the data to us */
    ask_push(con, req);
    pscom_stats.rndv_sw_fallback++;
}

/* A parked generated rendezvous request (pscom_fc.c): its data asked for now, before a
   receive takes it; it then waits as an eager message would, its cost held. -1: no memory */
int pscom_rndv_fetch_ahead(pscom_con_t *con, pscom_req_t *gen, uint64_t cost)
{
    void *buf = malloc(gen->rndv_len ? gen->rndv_len : 1);
    if (!buf)
        return -1;
    gen->pub.data = buf;
    gen->pub.data_len = gen->rndv_len;
    gen->pub.state &= ~PSCOM_REQ_STATE_RENDEZVOUS;
    gen->flags |= RQ_FC_AHEAD;
    pscom_fc_gen_held(gen, cost);
    ask_push(con, gen);
    pscom_stats.fc_ahead++;
    return 0;
}

int pscom_rndv_stage_gpu(pscom_req_t *req)
{
    size_t len = req->pub.data_len;
    req->gpu_host = pscom_host_buffer_alloc(len, &req->gpu_host_cap);
    if (!req->gpu_host)
        return -1;
    req->flags |= RQ_GPU_HOST;
    if (pscom_gpu_memcpy(req->gpu_host, req->pub.data, len) == PSCOM_SUCCESS)
        return 0;
    memset(req->gpu_host, 0, len);
    return -1;
}

/* A device buffer the receiver could not open: pushed from a host copy. A copy that fails
   still pushes (zeros), so that the receiver waits for nothing, and the send fails. */
static void stage_gpu_push(pscom_req_t *req)
{
    if (pscom_rndv_stage_gpu(req) == 0)
        return;
    if (!(req->flags & RQ_GPU_HOST))
        pscom_fatal("out of memory staging %zu bytes of device memory", req->pub.data_len);
    req->pub.state |= PSCOM_REQ_STATE_ERROR;
}

static void push_data(pscom_con_t *con, pscom_req_t *req, uint64_t recv_id)
{
    rndv_fin_t id = {.id = recv_id};
    if ((req->flags & (RQ_GPU | RQ_GPU_HOST)) == RQ_GPU)
        stage_gpu_push(req);
    size_t pad = pscom_pad_prefix(con, req->prefix, HDR_SIZE + sizeof(id), req->pub.data_len);
    pscom_put_header(req->prefix + pad, MSGTYPE_RNDV_DATA, sizeof(id), req->pub.data_len);
    memcpy(req->prefix + pad + HDR_SIZE, &id, sizeof(id));
    req->iov[0].iov_base = req->prefix;
    req->iov[0].iov_len = pad + HDR_SIZE + sizeof(id);
    req->iov[1].iov_len = 0;
    req->iov[2].iov_base = pscom_req_send_data(req);
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
        if (r.flags & ~(uint64_t)RNDV_FLAG_GPU)
            return (pscom_req_t *)-1;
        size_t pre = RNDV_PREFIX_SIZE + (r.flags & RNDV_FLAG_GPU ? sizeof(rndv_gpu_t) : 0);
        if (hdr->xheader_len < pre)
            return (pscom_req_t *)-1;
        pscom_header_net_t *inner = (pscom_header_net_t *)(xh + pre - HDR_SIZE);
        if (inner->msg_type != MSGTYPE_USER || inner->version != PSCOM_WIRE_VERSION ||
            inner->xheader_len != hdr->xheader_len - pre || inner->data_len != r.len ||
            r.len > PSCOM_DATA_LEN_MAX)
            return (pscom_req_t *)-1;
        /* match exactly like an eager message, then pull (or park the generated one) */
        pscom_req_t *req = pscom_recv_match(con, inner, 1);
        if (!req)
            return NULL;
        /* sent so for want of credit into a receive that waits for it: credit was short, not
           the receiver. A receiver that is behind (the message waits unexpected) gets no more
           window: it would only let the sender run further ahead (a Bcast loop's root held
           60 MB of messages at a rank descheduled on a crowded node). */
        if (r.len < con->rndv_threshold && !(req->pub.state & PSCOM_REQ_STATE_GRECV))
            pscom_fc_starved(con);
        req->rndv_addr = r.addr;
        req->rndv_len = r.len;
        req->rndv_send_id = r.send_id;
        req->pub.state |= PSCOM_REQ_STATE_RENDEZVOUS;
        if (r.flags & RNDV_FLAG_GPU) {
            memcpy(&req->rndv_gpu, xh + sizeof(r), sizeof(rndv_gpu_t));
            req->flags |= RQ_RNDV_GPU;
        }
        if (!(req->pub.state & PSCOM_REQ_STATE_GRECV))
            pscom_rndv_start_pull(con, req);
        else if (r.len < con->rndv_threshold && !(r.flags & RNDV_FLAG_GPU))
            pscom_fc_park(con, req);
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
        req->flags &= ~RQ_FC_AHEAD;
        return req;
    }
    default:
        return (pscom_req_t *)-1;
    }
}
