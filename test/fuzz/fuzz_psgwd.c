/*
 * fuzz_psgwd: the gateway daemon's side of the gw protocol (src/gateway/psgwd_fwd.c): carrier
 * messages as psgwd takes them in (on_header, on_message and the in-order delivery of
 * gw_proto.h), the challenge-response, OPEN and the forwarding of a tunnel's messages between
 * its two carriers. Rank A is a connection whose transport is the harness, accepted as psgwd
 * accepts a rank's carrier; rank B is a pscom socket of this process that serves "gw": an OPEN
 * makes psgwd connect to it (the target of every OPEN is rewritten to B's address, so psgwd
 * connects nowhere else), and B answers psgwd's challenge. At the end rank A's transport
 * breaks and psgwd stops (every tunnel and carrier closed).
 *
 * Input: records (fuzz_msg.h), each a carrier message (gw_msg_t as its user header, data):
 *   op bit 0: from rank B (else from rank A)
 *      bit 1: instead of the record, the correct RESPONSE to psgwd's last CHALLENGE to that
 *             rank (the fuzzer cannot compute an HMAC)
 *      bit 2: seq becomes that rank's next one
 *      bit 3: dst becomes the last tunnel id psgwd named as src to that rank (ids differ from
 *             run to run)
 *      bit 4: (rank A) fed in pieces drawn from op >> 5
 */
#include <stdio.h>
#include <stdlib.h>
#include "fuzz_msg.h"
#include "gw_proto.h"
#include "psgwd_fwd.h"

static const uint8_t KEY[32] = "the job key of the fuzz target.";

typedef struct rank {
    uint64_t seq;                /* of our next message to psgwd */
    uint8_t nonce[GW_NONCE_LEN]; /* psgwd's last challenge */
    int challenged;
    uint64_t src; /* the last tunnel id psgwd named as src */
    char role;    /* our end of the carrier: 'C' connected, 'A' accepted */
} rank_t;

static pscom_sock_t *gw; /* psgwd's listening socket */
static pscom_socket_t *b_sock;
static pscom_connection_t *b_con;      /* rank B's carrier, when psgwd connected to it */
static pscom_connection_t *b_gone[16]; /* B's carriers that failed: closed outside callbacks */
static int n_b_gone;
static rank_t ra, rb;
static char b_addr[64];

/* a message psgwd sent to rank r */
static void seen(rank_t *r, const pscom_header_net_t *hdr, const uint8_t *xh, const uint8_t *data)
{
    gw_msg_t h;
    if (hdr->xheader_len != sizeof(h))
        return;
    memcpy(&h, xh, sizeof(h));
    if (h.type == GW_CHALLENGE && hdr->data_len == GW_NONCE_LEN) {
        memcpy(r->nonce, data, GW_NONCE_LEN);
        r->challenged = 1;
    }
    if (h.src)
        r->src = h.src;
}

static void send_b(const void *xh, size_t xlen, const void *data, size_t dlen);

static void respond(rank_t *r, gw_msg_t *h, uint8_t mac[GW_MAC_LEN])
{
    memset(h, 0, sizeof(*h));
    h->type = GW_RESPONSE;
    h->version = GW_PROTO_VERSION;
    h->seq = r->seq++;
    gw_auth_mac(KEY, sizeof(KEY), r->role, r->nonce, mac);
}

/* ---- rank B: a socket of this process that psgwd connects to ---- */

static void b_msg_in(pscom_request_t *req)
{
    if (pscom_req_successful(req)) {
        seen(&rb, &req->header, req->xheader, req->data);
        gw_msg_t h;
        memcpy(&h, req->xheader, sizeof(h));
        if (req->xheader_len == sizeof(h) && h.type == GW_CHALLENGE && rb.challenged) {
            gw_msg_t r;
            uint8_t mac[GW_MAC_LEN];
            respond(&rb, &r, mac);
            send_b(&r, sizeof(r), mac, sizeof(mac));
        }
    }
    free(req->data);
    pscom_request_free(req);
}

static pscom_request_t *b_recv(pscom_connection_t *con, pscom_header_net_t *header)
{
    (void)con;
    pscom_request_t *req = pscom_request_create(sizeof(gw_msg_t), 0);
    req->data = malloc(header->data_len + 1);
    req->data_len = header->data_len;
    req->ops.io_done = b_msg_in;
    return req;
}

static void b_accept(pscom_connection_t *con)
{
    b_con = con;
    rb = (rank_t){.role = 'A'};
}

static void b_error(pscom_connection_t *con, pscom_op_t op, pscom_err_t err)
{
    (void)op, (void)err;
    if (con == b_con)
        b_con = NULL;
    if (n_b_gone < 16)
        b_gone[n_b_gone++] = con;
}

static void send_b(const void *xh, size_t xlen, const void *data, size_t dlen)
{
    if (b_con)
        pscom_send(b_con, xh, xlen, data, dlen);
}

static void setup(void)
{
    fz_pscom_init(NULL);
    if (!getenv("FUZZ_LOG"))
        psgwd_log_to(fopen("/dev/null", "w"));
    psgwd_key_add(KEY, sizeof(KEY));
    gw = get_sock(psgwd_socket());
    pscom_socket_set_name(&gw->pub, "psgwd");
    if (psgwd_start("127.0.0.1:7000") != 0)
        abort();
    b_sock = pscom_open_socket(0, 0);
    pscom_socket_set_name(b_sock, "rank-b");
    b_sock->ops.con_accept = b_accept;
    b_sock->ops.con_error = b_error;
    b_sock->ops.default_recv = b_recv;
    pscom_socket_serve(b_sock, GW_SERVICE); /* psgwd's connections ask for it */
    if (pscom_listen_addr(b_sock, "127.0.0.1:0") != PSCOM_SUCCESS)
        abort();
    snprintf(b_addr, sizeof(b_addr), "127.0.0.1:%d", b_sock->listen_portno);
}

/* what psgwd wrote to rank A */
static void a_out(pscom_con_t *a)
{
    size_t len, off = 0;
    const uint8_t *out = fz_out(a, &len, NULL);
    fz_msg_t m;
    while (out && fz_msg_next(out, len, &off, &m))
        seen(&ra, &m.hdr, m.xh, m.data);
    fz_out_clear(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!gw)
        setup();
    fz_in_t in = {data, size};
    ra = (rank_t){.role = 'C'};
    pscom_con_t *a = fz_con_new(gw);
    gw->pub.ops.con_accept(&a->pub); /* as for a rank that connected */
    a_out(a);

    fz_rec_t r;
    while (fz_rec_next(&in, &r)) {
        int from_b = r.op & 1;
        rank_t *rk = from_b ? &rb : &ra;
        gw_msg_t *h = (gw_msg_t *)r.xh;
        uint8_t mac[GW_MAC_LEN];
        if (r.op & 2) {
            respond(rk, h, mac);
            r.xlen = sizeof(*h);
            r.data = mac;
            r.dlen = sizeof(mac);
        } else if (r.op & 4) {
            h->seq = rk->seq++;
        }
        if (r.op & 8)
            h->dst = rk->src;
        int open = h->type == GW_OPEN && r.dlen == sizeof(gw_open_t);
        gw_open_t o;
        if (open) { /* psgwd connects to rank B, nowhere else */
            memcpy(&o, r.data, sizeof(o));
            snprintf(o.target, sizeof(o.target), "%s", b_addr);
            r.data = (const uint8_t *)&o;
        }
        if (from_b) {
            send_b(r.xh, r.xlen, r.data, r.dlen);
        } else if (fz_con_up(a)) {
            fz_rec_feed(a, &r, r.op & 16 ? r.op >> 5 : 0);
            a_out(a);
        }
        /* an OPEN: psgwd connects to rank B, B answers its challenge, psgwd sends the OPEN */
        for (int k = 0; k < (open ? 40 : 2); k++) {
            fz_progress(1);
            if (fz_con_up(a))
                a_out(a);
        }
    }
    /* psgwd closes what it dropped only from its loop (psgwd_poll): a stays until then */
    if (a->pub.state == PSCOM_CON_STATE_RW)
        fz_con_break(a); /* rank A goes away */
    psgwd_poll();
    psgwd_stop(NULL);
    for (int k = 0; k < 4; k++)
        fz_progress(1); /* rank B sees its carrier close */
    if (b_con)
        b_error(b_con, PSCOM_OP_READ, PSCOM_ERR_EOF);
    while (n_b_gone)
        pscom_close_connection(b_gone[--n_b_gone]);
    return 0;
}

/* ---- seeds ---- */

static size_t msg(uint8_t *buf, uint8_t op, uint8_t type, const void *data, size_t dlen)
{
    /* the ranks' own tunnel ids: A's 0xa1, B's 0xb1 */
    gw_msg_t h = {.type = type, .version = GW_PROTO_VERSION, .src = op & 1 ? 0xb1 : 0xa1};
    return fz_rec_put(buf, op | 4, &h, sizeof(h), data, dlen);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    if (!fz_seeds_dir())
        return 0;
    uint8_t buf[8192];
    size_t n = 0;
    gw_open_t o = {.target = "127.0.0.1:1", .origin = "r0000001 on node1 pid 1"};
    n += msg(buf + n, 2, 0, NULL, 0); /* A's response */
    fz_seed("auth", buf, n);
    n += msg(buf + n, 0, GW_CHALLENGE, "a's nonce.......", GW_NONCE_LEN);
    n += msg(buf + n, 0, GW_OPEN, &o, sizeof(o));
    n += msg(buf + n, 1 | 8, GW_OPEN_OK, NULL, 0); /* B's answer */
    size_t open_end = n;
    n += msg(buf + n, 8, GW_HS, "handshake bytes", 15);
    n += msg(buf + n, 1 | 8, GW_HS, "handshake reply", 15);
    n += msg(buf + n, 8, GW_DATA, "data of a message", 17);
    n += msg(buf + n, 1 | 8, GW_CREDIT, NULL, 0);
    n += msg(buf + n, 1 | 8, GW_DATA, "data the other way", 18);
    n += msg(buf + n, 8, GW_CLOSE, NULL, 0);
    fz_seed("tunnel", buf, n);
    n = open_end;
    n += msg(buf + n, 1 | 8, GW_CLOSE, "refused", 7);
    fz_seed("tunnel-refused", buf, n);
    n = msg(buf, 0, GW_OPEN, &o, sizeof(o)); /* before authentication */
    fz_seed("open-unauthenticated", buf, n);
    exit(0);
}
