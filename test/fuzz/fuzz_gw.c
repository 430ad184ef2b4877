/*
 * fuzz_gw: the rank's side of the gateway protocol, the gw transport plugin
 * (src/pscom/plugins/gw/gw_carrier.c, gw.c): carrier messages as the plugin takes them in
 * (gw_default_recv, in-order delivery, the challenge-response), OPEN of a tunnel to a socket of
 * this process (pscom_relay_accept), the pscom handshake carried in HS messages, the tunnel's
 * byte stream in DATA fragments (into core's wire parser), CREDIT, CLOSE. The gateway is a
 * connection whose transport is the harness, accepted as the plugin accepts one from psgwd
 * (the socket that serves "gw"). At the end the gateway's transport breaks.
 *
 * Input: records (fuzz_msg.h), each a carrier message (gw_msg_t as its user header, data):
 *   op bit 0: instead of the record, the correct RESPONSE to the plugin's CHALLENGE
 *      bit 1: seq becomes the next one
 *      bit 2: dst becomes the last tunnel id the plugin named as src (ids differ from run to
 *             run)
 *      bit 3: an OPEN keeps its target (else it becomes the address of this process's socket)
 *      bit 4: fed in pieces drawn from op >> 5
 * Seeds: an OPEN, then a real pscom handshake (captured, its transport offer renamed gw) in HS
 * messages and the connection's first messages in DATA.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "fuzz_msg.h"
#include "gw_priv.h"

static pscom_sock_t *carriers; /* the plugin's socket (gw_sock) */
static pscom_sock_t *rank;     /* the socket tunnels go to */
static char rank_addr[64];
static uint8_t key[GW_KEY_MAX];
static size_t key_len;

static struct {
    uint64_t seq;
    uint8_t nonce[GW_NONCE_LEN];
    uint64_t src;
} gwd; /* the gateway's end of the carrier */

/* what the plugin wrote to the gateway */
static void out(pscom_con_t *con)
{
    size_t len, off = 0;
    const uint8_t *o = fz_out(con, &len, NULL);
    fz_msg_t m;
    while (o && fz_msg_next(o, len, &off, &m)) {
        gw_msg_t h;
        if (m.hdr.xheader_len != sizeof(h))
            continue;
        memcpy(&h, m.xh, sizeof(h));
        if (h.type == GW_CHALLENGE && m.hdr.data_len == GW_NONCE_LEN)
            memcpy(gwd.nonce, m.data, GW_NONCE_LEN);
        if (h.src)
            gwd.src = h.src;
    }
    fz_out_clear(con);
}

static void close_all(pscom_sock_t *s)
{
    while (!list_empty(&s->precons))
        pscom_precon_destroy((precon_t *)s->precons.next);
    while (!list_empty(&s->cons))
        pscom_close_connection(&list_entry(s->cons.next, pscom_con_t, next)->pub);
}

static void setup(void)
{
    char dir[] = "/tmp/fuzz_gw.XXXXXX", path[64], route[64], why[256];
    if (!mkdtemp(dir))
        abort();
    snprintf(path, sizeof(path), "%s/key", dir);
    snprintf(route, sizeof(route), "%s/route", dir);
    FILE *f;
    if (pscom_key_create(path, why, sizeof(why)) != 0 ||
        pscom_key_load(path, key, sizeof(key), &key_len, why, sizeof(why)) != 0 ||
        !(f = fopen(route, "w"))) {
        fprintf(stderr, "fuzz_gw: %s\n", why);
        abort();
    }
    fprintf(f, "key %s\n127.0.0.1:1 fuzz-node-a fuzz-node-b\n", path);
    fclose(f);
    setenv("PSP_GW_SERVER", route, 1);
    fz_pscom_init(NULL);
    unlink(path), unlink(route), rmdir(dir); /* read at init */
    if (!gw_sock)
        abort(); /* the plugin did not start */
    carriers = get_sock(gw_sock);
    rank = get_sock(pscom_open_socket(0, 0));
    pscom_socket_set_name(&rank->pub, "rank");
    if (pscom_listen_addr(&rank->pub, "127.0.0.1:0") != PSCOM_SUCCESS)
        abort();
    snprintf(rank_addr, sizeof(rank_addr), "127.0.0.1:%d", rank->pub.listen_portno);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!carriers)
        setup();
    fz_in_t in = {data, size};
    memset(&gwd, 0, sizeof(gwd));
    pscom_con_t *con = fz_con_new(carriers);
    carriers->pub.ops.con_accept(&con->pub); /* as for psgwd's connection */
    carrier_t *c = *(carrier_t **)con->pub.userdata;
    out(con);

    fz_rec_t r;
    while (fz_con_up(con) && fz_rec_next(&in, &r)) {
        gw_msg_t *h = (gw_msg_t *)r.xh;
        uint8_t mac[GW_MAC_LEN];
        if (r.op & 1) {
            memset(h, 0, sizeof(*h));
            h->type = GW_RESPONSE;
            h->version = GW_PROTO_VERSION;
            h->seq = gwd.seq++;
            gw_auth_mac(key, key_len, 'C', gwd.nonce, mac); /* the plugin's end: 'A' */
            r.xlen = sizeof(*h);
            r.data = mac;
            r.dlen = sizeof(mac);
        } else if (r.op & 2) {
            h->seq = gwd.seq++;
        }
        if (r.op & 4)
            h->dst = gwd.src;
        gw_open_t o;
        if (h->type == GW_OPEN && r.dlen == sizeof(o) && !(r.op & 8)) {
            memcpy(&o, r.data, sizeof(o));
            snprintf(o.target, sizeof(o.target), "%s", rank_addr);
            r.data = (const uint8_t *)&o;
        }
        fz_rec_feed(con, &r, r.op & 16 ? r.op >> 5 : 0);
        for (int k = 0; k < 3; k++) { /* core reads the handshake, the pump answers */
            fz_progress(1);
            if (con->ops)
                out(con);
        }
    }
    /* the gateway goes away: its tunnels end (a poller of the plugin), then what they carried */
    if (con->pub.state == PSCOM_CON_STATE_RW)
        fz_con_break(con);
    for (int k = 0; k < 4; k++)
        fz_progress(1);
    close_all(rank);
    for (int k = 0; k < 2; k++)
        fz_progress(1);
    for (uint32_t i = 0; i < gw_tunnels.n; i++)
        if (gw_tunnels.obj[i])
            abort(); /* a tunnel outlived its carrier */
    /* the plugin keeps a failed carrier (and its connection) for good: that is for us here */
    *(carrier_t **)con->pub.userdata = NULL;
    pscom_close_connection(&con->pub);
    list_del(&c->link);
    free(c);
    return 0;
}

/* ---- seeds ---- */

static size_t msg(uint8_t *buf, uint8_t op, uint8_t type, const void *data, size_t dlen)
{
    gw_msg_t h = {.type = type, .version = GW_PROTO_VERSION, .src = 0xa1};
    return fz_rec_put(buf, op | 2 | 4, &h, sizeof(h), data, dlen);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    if (!fz_seeds_dir())
        return 0;
    putenv("PSP_LOOP=0"), putenv("PSP_SHM=0"); /* fz_capture_connect: tcp */
    setup();
    static uint8_t cap[1 << 16], buf[1 << 17];
    size_t cuts[FZ_CUTS_MAX];
    int n_cuts;
    size_t len = fz_capture_connect(&rank->pub, cap, sizeof(cap), cuts, &n_cuts);
    /* HELLO, the transport offer (tcp's, empty: gw's is too), DONE; then the messages */
    uint8_t *name = memmem(cap + cuts[0], cuts[1] - cuts[0], "tcp", 4);
    if (!name)
        abort();
    memcpy(name, "gw\0", 4);
    gw_open_t o = {
        .target = "127.0.0.1:1", .origin = "r0000002 on node2 pid 2", .gateway = "127.0.0.1:7000"};
    size_t n = msg(buf, 1, 0, NULL, 0); /* the response */
    n += msg(buf + n, 0, GW_CHALLENGE, "the gateway's...", GW_NONCE_LEN);
    fz_seed("auth", buf, n);
    n += msg(buf + n, 0, GW_OPEN, &o, sizeof(o));
    size_t open_end = n;
    n += msg(buf + n, 0, GW_HS, cap, cuts[0]);
    n += msg(buf + n, 0, GW_HS, cap + cuts[0], cuts[1] - cuts[0]);
    n += msg(buf + n, 0, GW_HS, cap + cuts[1], cuts[2] - cuts[1]);
    n += msg(buf + n, 0, GW_DATA, cap + cuts[2], len - cuts[2]);
    size_t data_end = n;
    n += msg(buf + n, 0, GW_CREDIT, NULL, 0);
    n += msg(buf + n, 0, GW_CLOSE, NULL, 0);
    fz_seed("tunnel", buf, n);
    n = data_end;
    n += msg(buf + n, 0, GW_CLOSE, "the peer failed", 15);
    buf[data_end + 5 + 2] = GW_F_ERROR; /* flags */
    fz_seed("tunnel-error", buf, n);
    n = open_end;
    n += msg(buf + n, 0, GW_CLOSE, NULL, 0);
    fz_seed("open-close", buf, n);
    n = msg(buf, 0, GW_OPEN, &o, sizeof(o)); /* before authentication */
    fz_seed("open-unauthenticated", buf, n);
    exit(0);
}
