/*
 * fuzz_am: the ch4:pscom netmod's decoding of the messages no posted receive took
 * (src/mpid/ch4/netmod/pscom/pscom_am.c: MPIDI_PSCOM_default_recv sorts them by the type and
 * wire version of their user header; active messages are received whole and handed to their
 * MPIDIG handler, with their am_hdr in the user header or in front of the data), and the
 * completion queue they go through (pscom_queue.c). Compiled with MPICH's headers (an MPICH
 * build tree, test/fuzz/Makefile). MPICH's own handlers are not called: every handler id MPICH
 * registers statically gets the harness's, which reads the am_hdr and data it is given (the
 * sizes the message declared: ASan checks they lie inside what was received).
 *
 * Not covered: the ack of a synchronous send (MPIDI_PSCOM_MSG_SSEND_ACK) carries a pointer to
 * the sender's own MPI request, which it completes (pscom_tagged.c): trusted by design, the
 * harness leaves acks unexpected (MPIDI_PSCOM_ack_recv returns NULL here). Tagged messages are
 * matched by MPIDI_PSCOM_tagged_accept when MPI receives are posted, not here.
 *
 * Input: records (fuzz_msg.h), each a message: its user header (MPIDI_PSCOM_am_xhdr_t and the
 * am_hdr, or another type's header), its data. op bit 0: fed in pieces drawn from op >> 1.
 */
#include "mpidimpl.h"
#include "pscom_impl.h"
#undef likely /* MPL's; pscom's core headers define them the same way */
#undef unlikely
#include "fuzz_msg.h"

MPIDIG_global_t MPIDIG_global;

static pscom_sock_t *sock;
static size_t hdr_declared; /* am_hdr_sz of the message being fed */

int MPIR_Assert_fail(const char *cond, const char *file_name, int line_num)
{
    fprintf(stderr, "MPIR_Assert_fail: %s at %s:%d\n", cond, file_name, line_num);
    abort();
}

pscom_request_t *MPIDI_PSCOM_ack_recv(pscom_header_net_t *header)
{
    (void)header;
    return NULL;
}

/* pscom_gpu.c's staging memory, as without PSP_CUDA (pscom_gpu.c needs MPICH's datatypes) */
void *MPIDI_PSCOM_stage_alloc(size_t len)
{
    return malloc(len);
}

void MPIDI_PSCOM_stage_free(void *p)
{
    free(p);
}

static int handler(void *am_hdr, void *data, MPI_Aint data_sz, uint32_t attr, MPIR_Request **req)
{
    (void)attr, (void)req;
    if (data_sz < 0 || (data_sz && !data) || !am_hdr)
        abort();
    volatile uint8_t sum = 0;
    if (hdr_declared)
        sum += ((uint8_t *)am_hdr)[0] + ((uint8_t *)am_hdr)[hdr_declared - 1];
    if (data_sz)
        sum += ((uint8_t *)data)[0] + ((uint8_t *)data)[data_sz - 1];
    (void)sum;
    return MPI_SUCCESS;
}

static void setup(void)
{
    fz_pscom_init(NULL);
    sock = get_sock(pscom_open_socket(0, 0));
    sock->pub.ops.default_recv = MPIDI_PSCOM_default_recv;
    MPIDI_PSCOM_global.socket = &sock->pub;
    for (int i = 0; i < MPIDIG_HANDLER_STATIC_MAX; i++)
        MPIDIG_global.target_msg_cbs[i] = handler; /* the rest: not registered (NULL) */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!sock)
        setup();
    fz_in_t in = {data, size};
    pscom_con_t *con = fz_con_new(sock);
    fz_rec_t r;
    while (fz_con_up(con) && fz_rec_next(&in, &r)) {
        MPIDI_PSCOM_am_xhdr_t xh;
        memcpy(&xh, r.xh, sizeof(xh));
        hdr_declared = xh.type == MPIDI_PSCOM_MSG_AM ? xh.am_hdr_sz : 0;
        fz_rec_feed(con, &r, r.op & 1 ? r.op >> 1 : 0);
        MPIDI_PSCOM_drain(); /* what MPIDI_NM_progress does after pscom's progress */
    }
    hdr_declared = 0;
    if (con->pub.state == PSCOM_CON_STATE_RW)
        fz_con_break(con);
    MPIDI_PSCOM_drain();
    pscom_close_connection(&con->pub);
    return 0;
}

/* ---- seeds ---- */

static size_t am(uint8_t *buf, int handler_id, const void *hdr, uint32_t hdr_sz, int in_data,
                 const void *payload, size_t len)
{
    uint8_t x[256], d[512];
    MPIDI_PSCOM_am_xhdr_t xh = {.type = MPIDI_PSCOM_MSG_AM,
                                .version = MPIDI_PSCOM_WIRE_VERSION,
                                .flags = in_data ? MPIDI_PSCOM_AM_FLAG_HDR_IN_DATA : 0,
                                .handler_id = (uint8_t)handler_id,
                                .am_hdr_sz = hdr_sz};
    memcpy(x, &xh, sizeof(xh));
    size_t xlen = sizeof(xh), dlen = 0;
    if (in_data) {
        memcpy(d, hdr, hdr_sz);
        dlen = hdr_sz;
    } else {
        memcpy(x + xlen, hdr, hdr_sz);
        xlen += hdr_sz;
    }
    if (len)
        memcpy(d + dlen, payload, len);
    return fz_rec_put(buf, 0, x, xlen, d, dlen + len);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    if (!fz_seeds_dir())
        return 0;
    uint8_t buf[4096], hdr[64];
    memset(hdr, 0x5a, sizeof(hdr));
    size_t n = am(buf, MPIDIG_SEND, hdr, 40, 0, "payload", 7);
    fz_seed("am-hdr-in-xheader", buf, n);
    n = am(buf, MPIDIG_PUT_REQ, hdr, 48, 1, "data after the header", 21);
    fz_seed("am-hdr-in-data", buf, n);
    n = am(buf, MPIDIG_SEND, hdr, 0, 0, NULL, 0);
    n += am(buf + n, MPIDIG_SSEND_ACK, hdr, 16, 0, NULL, 0);
    fz_seed("am-two", buf, n);
    MPIDI_PSCOM_tagged_xhdr_t t = {.type = MPIDI_PSCOM_MSG_TAGGED,
                                   .version = MPIDI_PSCOM_WIRE_VERSION,
                                   .tag = 7,
                                   .src_rank = 1};
    n = fz_rec_put(buf, 0, &t, MPIDI_PSCOM_TAGGED_XHDR_LEN, "tagged", 6);
    MPIDI_PSCOM_ack_xhdr_t ack = {.type = MPIDI_PSCOM_MSG_SSEND_ACK,
                                  .version = MPIDI_PSCOM_WIRE_VERSION};
    n += fz_rec_put(buf + n, 0, &ack, sizeof(ack), NULL, 0);
    fz_seed("tagged-ack", buf, n);
    exit(0);
}
