/*
 * fuzz_psnamd: psnamd's request parser and what it applies (src/psnam/psnamd_serve.c, the
 * element operations of psnam_op.c): a client connects (a connection whose transport is the
 * harness, accepted as psnamd accepts one), gets psnamd's HELLO, and sends the fuzz input as
 * requests: OPEN (create, attach with a proof), PUT, GET, ACC, GACC, CAS, LOCK, UNLOCK, LIST,
 * INFO, FREE, CLOSE, garbage. Then it goes away (its transport breaks), and the regions of the
 * run are dropped. Regions live in memory (no backing files), at most 64 MiB.
 *
 * Input: records (fuzz_msg.h), each a request: psnam_msg_t as its user header, its data.
 *   op bit 0: the data is a psnam_open_t: its credential becomes the proof for its name on
 *             this connection, made from the verifier VERIFIER (the one the seeds create
 *             regions with): the fuzzer cannot compute an HMAC
 *      bit 1: fed in pieces (op >> 2 draws them)
 */
#include <stdio.h>
#include <stdlib.h>
#include "fuzz_msg.h"
#include "psnam_proto.h"
#include "psnam_op.h"
#include "psnamd_serve.h"

static pscom_sock_t *sock;
static const uint8_t VERIFIER[PSNAM_MAC_LEN] = "a verifier of 32 bytes, not 33.";

static void setup(void)
{
    fz_pscom_init(NULL);
    if (!getenv("FUZZ_LOG"))
        psnamd_log_to(fopen("/dev/null", "w"));
    psnamd_serve_init(64u << 20, NULL);
    sock = get_sock(psnamd_serve_socket());
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!sock)
        setup();
    fz_in_t in = {data, size};
    pscom_con_t *con = fz_con_new(sock);
    sock->pub.ops.con_accept(&con->pub); /* as for a client that connected */
    /* its HELLO: the nonce proofs on this connection are bound to */
    uint8_t nonce[PSNAM_NONCE_LEN] = {0};
    size_t len, off = 0;
    const uint8_t *out = fz_out(con, &len, NULL);
    fz_msg_t m;
    if (!fz_msg_next(out, len, &off, &m) || m.hdr.xheader_len != sizeof(psnam_msg_t) ||
        m.hdr.data_len != sizeof(nonce))
        abort();
    memcpy(nonce, m.data, sizeof(nonce));

    fz_rec_t r;
    while (fz_con_up(con) && fz_rec_next(&in, &r)) {
        fz_out_clear(con);
        uint8_t buf[PSNAM_CHUNK_MAX > 65536 ? 65536 : PSNAM_CHUNK_MAX];
        if ((r.op & 1) && r.dlen >= sizeof(psnam_open_t)) {
            psnam_open_t o;
            memcpy(buf, r.data, r.dlen);
            memcpy(&o, buf, sizeof(o));
            o.name[PSNAM_NAME_MAX - 1] = '\0';
            psnam_proof(VERIFIER, nonce, o.name, o.cred);
            memcpy(buf, &o, sizeof(o));
            r.data = buf;
        }
        fz_rec_feed(con, &r, r.op & 2 ? r.op >> 2 : 0);
    }
    if (con->pub.state == PSCOM_CON_STATE_RW)
        fz_con_break(con); /* the client goes away */
    psnamd_serve_poll();   /* and psnamd closes its connection */
    psnamd_serve_end(NULL);
    return 0;
}

/* ---- seeds ---- */

static size_t req(uint8_t *buf, uint8_t op, uint8_t type, uint32_t region, uint32_t seg,
                  uint64_t offset, uint64_t len, const void *data, size_t dlen)
{
    psnam_msg_t m = {.type = type,
                     .version = PSNAM_PROTO_VERSION,
                     .id = 7,
                     .region = region,
                     .seg = seg,
                     .offset = offset,
                     .len = len};
    return fz_rec_put(buf, op, &m, sizeof(m), data, dlen);
}

static size_t req_op(uint8_t *buf, uint8_t type, uint8_t op, uint8_t dtype, const void *data,
                     size_t dlen)
{
    psnam_msg_t m = {.type = type,
                     .version = PSNAM_PROTO_VERSION,
                     .op = op,
                     .dtype = dtype,
                     .region = 1,
                     .offset = 8};
    return fz_rec_put(buf, 0, &m, sizeof(m), data, dlen);
}

static size_t open_req(uint8_t *buf, uint8_t type, const char *name, uint32_t flags, int nseg)
{
    uint8_t d[sizeof(psnam_open_t) + 2 * sizeof(uint64_t)];
    psnam_open_t o = {.flags = flags, .nseg = (uint32_t)nseg, .uid = 1000};
    snprintf(o.name, sizeof(o.name), "%s", name);
    memcpy(o.cred, VERIFIER, sizeof(o.cred));
    memcpy(d, &o, sizeof(o));
    uint64_t sizes[2] = {4096, 100};
    size_t dlen = sizeof(o);
    if (flags & PSNAM_F_CREATE) {
        memcpy(d + sizeof(o), sizes, sizeof(uint64_t) * (size_t)nseg);
        dlen += sizeof(uint64_t) * (size_t)nseg;
    }
    return req(buf, flags & PSNAM_F_CREATE ? 0 : 1, type, 0, 0, 0, 0, d, dlen);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    if (!fz_seeds_dir())
        return 0;
    uint8_t buf[8192];
    size_t n;
    int32_t two[2] = {5, 7};
    double f = 2.5;
    n = open_req(buf, PSNAM_OPEN, "region-1", PSNAM_F_CREATE, 2);
    fz_seed("open-create", buf, n);
    n += req(buf + n, 0, PSNAM_PUT, 1, 0, 16, 0, "some bytes", 10);
    n += req(buf + n, 0, PSNAM_GET, 1, 0, 16, 10, NULL, 0);
    n += req(buf + n, 0, PSNAM_GET, 1, 1, 90, 20, NULL, 0); /* past the end */
    fz_seed("put-get", buf, n);
    n = open_req(buf, PSNAM_OPEN, "region-1", PSNAM_F_CREATE, 2);
    n += req_op(buf + n, PSNAM_ACC, PSNAM_OP_SUM, PSNAM_T_I32, two, sizeof(two));
    n += req_op(buf + n, PSNAM_GACC, PSNAM_OP_MAX, PSNAM_T_F64, &f, sizeof(f));
    n += req_op(buf + n, PSNAM_GACC, PSNAM_OP_BXOR, PSNAM_T_F64, &f, sizeof(f));
    n += req_op(buf + n, PSNAM_CAS, 0, PSNAM_T_I32, two, sizeof(two));
    fz_seed("atomics", buf, n);
    n = open_req(buf, PSNAM_OPEN, "region-1", PSNAM_F_CREATE | PSNAM_F_PERSISTENT, 2);
    n += req(buf + n, 0, PSNAM_LOCK, 1, 0, 0, 0, NULL, 0);
    buf[n - 8] = PSNAM_LOCK_EXCLUSIVE; /* arg: the last field */
    n += req(buf + n, 0, PSNAM_LOCK, 1, PSNAM_SEG_ALL, 0, 0, NULL, 0);
    n += req(buf + n, 0, PSNAM_UNLOCK, 1, 0, 0, 0, NULL, 0);
    n += req(buf + n, 0, PSNAM_CLOSE, 1, 0, 0, 0, NULL, 0);
    n += open_req(buf + n, PSNAM_OPEN, "region-1", 0, 2);
    n += open_req(buf + n, PSNAM_INFO, "region-1", 0, 0);
    n += open_req(buf + n, PSNAM_LIST, "", 0, 0);
    n += req(buf + n, 0, PSNAM_CLOSE, 2, 0, 0, 0, NULL, 0);
    n += open_req(buf + n, PSNAM_FREE, "region-1", 0, 0);
    fz_seed("locks-admin", buf, n);
    n = req(buf, 0, PSNAM_REPLY, 0, 0, 0, 0, "x", 1);
    fz_seed("not-a-request", buf, n);
    exit(0);
}
