/*
 * fuzz_psnam_client: the client end of the psnamd protocol (src/psnam/psnam_client.c: replies
 * matched to pending requests by id, data straight into the caller's buffer, error reasons,
 * HELLO). The harness plays psnamd on a pscom socket of this process (the client connects to it
 * once, over the loop transport, with psnam_connect); each run posts requests with result
 * buffers of the sizes the input says, then answers with the input's replies, then answers
 * every request properly, and checks that all of them ended.
 *
 * Input: a byte n (n & 7 requests), n x (u8 type, u16 result buffer size), then records
 * (fuzz_msg.h), each a reply: psnam_msg_t as its user header, its data.
 *   op bit 0: its id becomes that of request (op >> 1) % requests of this run (ids carry a
 *             generation that changes from run to run)
 */
#include <stdio.h>
#include <stdlib.h>
#include "fuzz_msg.h"
#include "psnam_client.h"

#define POSTS_MAX 7

static pscom_socket_t *server;
static pscom_connection_t *server_con; /* psnamd's end of the client's connection */
static psnam_client_t *client;
static uint64_t ids[POSTS_MAX];
static int n_ids;

static void server_accept(pscom_connection_t *con)
{
    server_con = con;
    psnam_msg_t m = {.type = PSNAM_HELLO, .version = PSNAM_PROTO_VERSION};
    pscom_send(con, &m, sizeof(m), "nonce of 16 byte", PSNAM_NONCE_LEN);
}

static void request_in(pscom_request_t *req)
{
    if (pscom_req_successful(req) && req->xheader_len == sizeof(psnam_msg_t) && n_ids < POSTS_MAX)
        ids[n_ids++] = ((psnam_msg_t *)req->xheader)->id;
    free(req->data);
    pscom_request_free(req);
}

static pscom_request_t *server_recv(pscom_connection_t *con, pscom_header_net_t *header)
{
    (void)con;
    pscom_request_t *req = pscom_request_create(sizeof(psnam_msg_t), 0);
    req->data = malloc(header->data_len + 1);
    req->data_len = header->data_len;
    req->ops.io_done = request_in;
    return req;
}

static void connect_client(void)
{
    char addr[64], why[256];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", server->listen_portno);
    client = psnam_connect(addr, 10, why, sizeof(why));
    if (!client) {
        fprintf(stderr, "fuzz_psnam_client: %s\n", why);
        abort();
    }
}

static void setup(void)
{
    fz_pscom_init(NULL);
    server = pscom_open_socket(0, 0);
    pscom_socket_set_name(server, "psnamd");
    server->ops.con_accept = server_accept;
    server->ops.default_recv = server_recv;
    if (pscom_listen_addr(server, "127.0.0.1:0") != PSCOM_SUCCESS)
        abort();
    connect_client();
}

typedef struct post {
    int done, status;
    uint8_t *result;
} post_t;

/* psnam_client.h: on success len bytes of reply data are in the result buffer; else reason
   says why */
static void post_done(void *user, int status, const char *reason, size_t len)
{
    post_t *p = user;
    volatile size_t n = strlen(reason);
    if (status == PSNAM_OK && len)
        n += p->result[0] + p->result[len - 1]; /* ASan: within the buffer */
    (void)n;
    p->done++;
    p->status = status;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!client)
        setup();
    fz_in_t in = {data, size};
    int n = fz_u8(&in) & POSTS_MAX;
    post_t posts[POSTS_MAX] = {{0}};
    n_ids = 0;
    for (int i = 0; i < n; i++) {
        psnam_msg_t m = {.type = fz_u8(&in), .region = 1, .len = 16};
        size_t len = fz_u16(&in);
        posts[i].result = len ? malloc(len) : NULL;
        if (psnam_post(client, &m, "abc", 3, posts[i].result, len, post_done, &posts[i]) != 0) {
            /* the connection broke in an earlier run: a new one */
            psnam_disconnect(client);
            connect_client();
        }
    }
    for (int r = 0; r < 100 && n_ids < n; r++)
        fz_progress(1);

    fz_rec_t rec;
    while (server_con && fz_rec_next(&in, &rec)) {
        if ((rec.op & 1) && n_ids && rec.xlen >= sizeof(psnam_msg_t))
            ((psnam_msg_t *)rec.xh)->id = ids[(rec.op >> 1) % n_ids];
        pscom_send(server_con, rec.xh, rec.xlen, rec.data, rec.dlen);
        fz_progress(2);
    }
    /* every request gets its proper answer; those answered already ignore it */
    for (int i = 0; i < n_ids; i++) {
        psnam_msg_t m = {.type = PSNAM_REPLY, .version = PSNAM_PROTO_VERSION, .id = ids[i]};
        pscom_send(server_con, &m, sizeof(m), NULL, 0);
    }
    for (int r = 0; r < 1000 && psnam_pending(client); r++)
        fz_progress(1);
    if (psnam_pending(client))
        abort(); /* a request that never ends */
    for (int i = 0; i < n; i++) {
        if (posts[i].done != 1)
            abort(); /* done called once per request */
        free(posts[i].result);
    }
    return 0;
}

/* ---- seeds ---- */

static size_t reply(uint8_t *buf, uint8_t op, uint8_t type, int32_t status, const void *data,
                    size_t dlen)
{
    psnam_msg_t m = {.type = type, .version = PSNAM_PROTO_VERSION, .status = status};
    return fz_rec_put(buf, op, &m, sizeof(m), data, dlen);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    if (!fz_seeds_dir())
        return 0;
    uint8_t buf[4096];
    size_t n = 0;
    buf[n++] = 3;
    buf[n++] = PSNAM_GET, buf[n++] = 16, buf[n++] = 0;
    buf[n++] = PSNAM_PUT, buf[n++] = 0, buf[n++] = 0;
    buf[n++] = PSNAM_OPEN, buf[n++] = 64, buf[n++] = 0;
    n += reply(buf + n, 1, PSNAM_REPLY, PSNAM_OK, "sixteen bytes...", 16);
    n += reply(buf + n, 3, PSNAM_REPLY, PSNAM_E_RANGE, "outside the segment", 19);
    uint8_t more[65]; /* more data than the buffer (64 bytes) holds */
    memset(more, 'm', sizeof(more));
    n += reply(buf + n, 5, PSNAM_REPLY, PSNAM_OK, more, sizeof(more));
    fz_seed("replies", buf, n);
    n = 0;
    buf[n++] = 1;
    buf[n++] = PSNAM_LOCK, buf[n++] = 0, buf[n++] = 0;
    n += reply(buf + n, 0, PSNAM_HELLO, PSNAM_OK, "a new nonce.....", 16);
    n += reply(buf + n, 0, PSNAM_REPLY, PSNAM_OK, NULL, 0); /* an id nobody waits for */
    fz_seed("hello-unknown", buf, n);
    exit(0);
}
