/*
 * fuzz_wire: the pscom wire parser, the receive path of core/pscom_io.c that every transport
 * feeds (pscom_read_feed, pscom_read_direct_buf/done): message headers, user messages matched
 * against posted receives (on the connection and socket-wide) or kept as generated requests,
 * padding, EOF, the rendezvous messages (pscom_rndv.c).
 *
 * Input: a flags byte, a 4-byte feed seed (how the bytes are cut into feeds, fz_con_feed), then
 * the byte stream as the peer's transport delivers it.
 *   flags bits 0-2: receives posted before the stream (on the connection and socket-wide, with
 *                   buffers of 0 to 70000 bytes and user headers of 0 to 4096 bytes)
 *         bit 3:    more receives after it (they take the generated requests)
 *         bit 4:    a probe before those
 *         bit 5:    a default_recv hook takes messages of up to 4 KiB
 *         bit 6:    a rendezvous send of ours is pending (RNDV_READ and RNDV_FIN have one to
 *                   name: send id 1)
 */
#include <stdlib.h>
#include "fuzz_pscom.h"

#define RECV_MAX 16

static pscom_sock_t *sock;
static pscom_request_t *reqs[RECV_MAX + 2];
static int n_reqs;

static int accept_even(pscom_request_t *req, pscom_connection_t *con, pscom_header_net_t *header)
{
    (void)req, (void)con;
    const uint8_t *xh = pscom_header_xheader(header);
    return header->xheader_len == 0 || !(xh[header->xheader_len - 1] & 1);
}

static void recv_done(pscom_request_t *req)
{
    /* what it says it received lies in its buffers (ASan checks the ends) */
    volatile uint8_t sum = 0;
    if (req->xheader_len)
        sum += ((uint8_t *)req->xheader)[req->xheader_len - 1];
    if (req->data_len && req->data)
        sum += ((uint8_t *)req->data)[0] + ((uint8_t *)req->data)[req->data_len - 1];
    (void)sum;
}

static pscom_request_t *new_recv(unsigned k, pscom_con_t *con)
{
    static const size_t data_sizes[] = {0, 8, 100, 4096, 70000};
    static const size_t xh_sizes[] = {0, 16, 4096};
    pscom_request_t *req = pscom_request_create(xh_sizes[k % 3], 0);
    size_t len = data_sizes[k % 5];
    req->data = len ? malloc(len) : NULL;
    req->data_len = len;
    req->ops.io_done = recv_done;
    req->ops.recv_accept = k & 1 ? accept_even : NULL;
    if (con && (k & 2))
        req->connection = &con->pub;
    else
        req->socket = &sock->pub;
    reqs[n_reqs++] = req;
    return req;
}

static pscom_request_t *hook(pscom_connection_t *con, pscom_header_net_t *header)
{
    (void)con;
    if (header->data_len > 4096 || n_reqs == RECV_MAX + 2)
        return NULL;
    pscom_request_t *req = pscom_request_create(64, 0);
    req->data = malloc(header->data_len ? header->data_len : 1);
    req->data_len = header->data_len;
    req->ops.io_done = recv_done;
    reqs[n_reqs++] = req;
    return req;
}

static void sent(pscom_request_t *req)
{
    (void)req;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!sock) {
        fz_pscom_init(NULL);
        sock = get_sock(pscom_open_socket(0, 0));
    }
    fz_in_t in = {data, size};
    uint8_t flags = fz_u8(&in);
    uint32_t seed = fz_u32(&in);
    sock->pub.ops.default_recv = flags & 0x20 ? hook : NULL;
    pscom_con_t *con = fz_con_new(sock);
    n_reqs = 0;
    for (unsigned k = 0; k < (flags & 7u); k++)
        pscom_post_recv(new_recv(k * 7 + (seed & 0xff), con));
    static char rndv_data[2000];
    pscom_request_t *sreq = NULL;
    if (flags & 0x40) {
        pscom_con_set_rendezvous(con, 1024);
        sreq = pscom_request_create(8, 0);
        sreq->connection = &con->pub;
        sreq->data = rndv_data;
        sreq->data_len = sizeof(rndv_data);
        sreq->xheader_len = 8;
        sreq->ops.io_done = sent;
        pscom_post_send(sreq);
    }

    fz_con_feed(con, in.p, in.n, seed >> 8);

    if (flags & 0x10) {
        pscom_request_t *probe = pscom_request_create(4096, 0);
        probe->socket = &sock->pub;
        pscom_iprobe(probe);
        pscom_request_free(probe);
    }
    if (flags & 8)
        for (unsigned k = 0; k < 4 && n_reqs < RECV_MAX; k++)
            pscom_post_recv(new_recv(k * 5 + (seed >> 16), NULL));

    /* the peer is gone: whatever waits on the connection fails; then we close it */
    if (con->pub.state == PSCOM_CON_STATE_RW)
        fz_con_break(con);
    pscom_close_connection(&con->pub);
    for (int i = 0; i < n_reqs; i++) {
        if (!pscom_req_is_done(reqs[i]) && !pscom_cancel_recv(reqs[i]))
            abort(); /* a receive pscom neither completed nor can cancel: a leak */
        free(reqs[i]->data);
        pscom_request_free(reqs[i]);
    }
    if (sreq) {
        if (!pscom_req_is_done(sreq))
            abort();
        pscom_request_free(sreq);
    }
    /* nothing of this connection is left in the socket's queues */
    if (!list_empty(&sock->recvq_any) || !list_empty(&sock->genq_any))
        abort();
    return 0;
}

/* ---- seeds: streams as a peer's core writes them (pscom_priv.h's wire format) ---- */

static size_t put(uint8_t *p, uint8_t type, const void *xh, size_t xlen, const void *data,
                  size_t dlen)
{
    pscom_put_header(p, type, xlen, dlen);
    if (xlen)
        memcpy(p + HDR_SIZE, xh, xlen);
    if (dlen)
        memcpy(p + HDR_SIZE + xlen, data, dlen);
    return HDR_SIZE + xlen + dlen;
}

static void seed(const char *name, uint8_t flags, uint32_t seed, const uint8_t *s, size_t len)
{
    static uint8_t buf[1 << 16];
    buf[0] = flags;
    memcpy(buf + 1, &seed, 4);
    memcpy(buf + 5, s, len);
    fz_seed(name, buf, 5 + len);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    if (!fz_seeds_dir())
        return 0;
    static uint8_t s[1 << 15], d[6000];
    memset(d, 'd', sizeof(d));
    size_t n = 0;
    n += put(s + n, MSGTYPE_USER, "xheader8", 8, d, 100);
    n += put(s + n, MSGTYPE_USER, NULL, 0, NULL, 0);
    n += put(s + n, MSGTYPE_PAD, NULL, 0, d, 10);
    n += put(s + n, MSGTYPE_USER, "a user header of 20b", 20, d, 5000);
    n += put(s + n, MSGTYPE_USER, "x", 1, d, 3);
    size_t user_end = n;
    n += put(s + n, MSGTYPE_EOF, NULL, 0, NULL, 0);
    seed("posted", 0x07, 0, s, n);
    seed("unexpected-then-posted", 0x18, 0, s, n);
    seed("hook", 0x20, 0, s, n);
    seed("pieces16-direct", 0x03, 5u << 8, s, n);
    seed("pieces256", 0x00, 2u << 8, s, user_end);
    /* a rendezvous message: its request (the user's header inside), the push after our read */
    uint8_t rq[sizeof(rndv_req_t) + HDR_SIZE + 4];
    rndv_req_t r = {.send_id = 5, .addr = 0x1000, .len = 300};
    memcpy(rq, &r, sizeof(r));
    pscom_put_header(rq + sizeof(r), MSGTYPE_USER, 4, 300);
    memcpy(rq + sizeof(r) + HDR_SIZE, "rndv", 4);
    rndv_fin_t id = {.id = 1}; /* ours: the connection's first rendezvous id */
    n = put(s, MSGTYPE_RNDV_REQ, rq, sizeof(rq), NULL, 0);
    n += put(s + n, MSGTYPE_RNDV_DATA, &id, sizeof(id), d, 300);
    seed("rendezvous-recv", 0x07, 0, s, n);
    seed("rendezvous-unexpected", 0x08, 0, s, n);
    /* a device rendezvous (no CUDA here: we cannot open it, read, and the peer pushes) */
    uint8_t rg[sizeof(rndv_req_t) + sizeof(rndv_gpu_t) + HDR_SIZE + 4];
    rndv_req_t g = {.send_id = 6, .len = 300, .flags = RNDV_FLAG_GPU};
    rndv_gpu_t gh = {.offset = 64};
    memset(gh.ipc, 0x5a, sizeof(gh.ipc));
    memcpy(rg, &g, sizeof(g));
    memcpy(rg + sizeof(g), &gh, sizeof(gh));
    pscom_put_header(rg + sizeof(g) + sizeof(gh), MSGTYPE_USER, 4, 300);
    memcpy(rg + sizeof(g) + sizeof(gh) + HDR_SIZE, "rndv", 4);
    n = put(s, MSGTYPE_RNDV_REQ, rg, sizeof(rg), NULL, 0);
    n += put(s + n, MSGTYPE_RNDV_DATA, &id, sizeof(id), d, 300);
    seed("rendezvous-gpu", 0x07, 0, s, n);
    seed("rendezvous-gpu-unexpected", 0x08, 0, s, n);
    /* our own rendezvous send (flags bit 6: send id 1): the peer reads it, or pulled it */
    rndv_read_t rd = {.send_id = 1, .recv_id = 9};
    n = put(s, MSGTYPE_RNDV_READ, &rd, sizeof(rd), NULL, 0);
    seed("rendezvous-read", 0x40, 0, s, n);
    n = put(s, MSGTYPE_RNDV_FIN, &id, sizeof(id), NULL, 0);
    seed("rendezvous-fin", 0x40, 0, s, n);
    n = put(s, MSGTYPE_USER, NULL, 0, NULL, 0);
    s[offsetof(pscom_header_net_t, version)] = 0x52; /* another wire version */
    seed("bad-version", 0, 0, s, n);
    exit(0);
}
