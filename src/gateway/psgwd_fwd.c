/*
 * psgwd_fwd.c - psgwd's forwarder (psgwd_fwd.h): the carriers (pscom connections to ranks),
 * the tunnels through them, and the dispatch of the carriers' messages (gw_proto.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "gw_proto.h"
#include "psgwd_fwd.h"

#define FRAG_MAX       (64u << 20)
#define AUTH_TIMEOUT_S 10 /* a peer that has not proved a job key by then is dropped */

static struct {
    uint8_t bytes[GW_KEY_MAX];
    size_t len;
} keys[PSGWD_KEYS_MAX];
static int n_keys;
static FILE *log_out;

void psgwd_log(const char *fmt, ...)
{
    FILE *out = log_out ? log_out : stderr;
    char ts[32];
    time_t now = time(NULL);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", localtime(&now));
    va_list ap;
    va_start(ap, fmt);
    fprintf(out, "psgwd[%d] %s ", (int)getpid(), ts);
    vfprintf(out, fmt, ap);
    fputc('\n', out);
    va_end(ap);
}

void psgwd_log_to(FILE *out)
{
    log_out = out;
}

/* ---- carriers and tunnels ---- */

typedef struct gcar {
    pscom_connection_t *con;
    char name[192];
    char role;  /* 'A': a rank connected to us; 'C': we connected to a rank */
    int key;    /* the job key (index), -1 until the rank proved one */
    int authed; /* the peer proved the key */
    int failed, closing;
    int held_challenge; /* the rank's challenge, answered once we know its key */
    uint8_t nonce[GW_NONCE_LEN], peer_nonce[GW_NONCE_LEN];
    char target[64]; /* 'C': the rank listener we connected to */
    time_t since;    /* made at; one that has not proved a key within AUTH_TIMEOUT_S goes */
    char why[96];    /* car_failed's reason */
    uint64_t send_seq;
    gw_order_t order;
    struct gcar *next;
} gcar_t;

typedef struct fwd {
    uint64_t id;
    gcar_t *car[2];   /* 0: the opener's carrier, 1: the target's */
    uint64_t peer[2]; /* each end's id of the tunnel */
    int open_sent;
    gw_open_t open;
} fwd_t;

static pscom_socket_t *out_sock;
static gcar_t *cars;
static gw_ids_t fwds;
static uint64_t fwd_msgs, fwd_bytes, refused;

static fwd_t *fwd_get(uint64_t id)
{
    return gw_ids_get(&fwds, id);
}

static fwd_t *fwd_new(void)
{
    fwd_t *f = calloc(1, sizeof(*f));
    if (f && !(f->id = gw_ids_add(&fwds, f))) {
        free(f);
        return NULL;
    }
    return f;
}

static void fwd_free(fwd_t *f)
{
    gw_ids_del(&fwds, f->id);
    free(f);
}

/* ---- messages: requests with a buffer of their own, received into and sent on ---- */

static pscom_request_t *pool;

static pscom_request_t *req_get(size_t len)
{
    return gw_pool_get(&pool, len);
}

static void req_put(pscom_request_t *req)
{
    gw_pool_put(&pool, req, 1u << 20);
}

static void sent(pscom_request_t *req)
{
    req_put(req);
}

static void send_msg(gcar_t *c, int type, uint16_t flags, uint64_t dst, uint64_t src,
                     const void *data, size_t len)
{
    if (c->failed)
        return;
    gw_msg_t h = {.type = (uint8_t)type,
                  .version = GW_PROTO_VERSION,
                  .flags = flags,
                  .dst = dst,
                  .src = src,
                  .seq = c->send_seq++};
    pscom_send(c->con, &h, sizeof(h), data, len);
}

static void send_close(gcar_t *c, uint64_t dst, const char *why)
{
    send_msg(c, GW_CLOSE, GW_F_ERROR, dst, 0, why, strlen(why));
}

static void challenge(gcar_t *c)
{
    pscom_random_bytes(c->nonce, sizeof(c->nonce));
    send_msg(c, GW_CHALLENGE, 0, 0, 0, c->nonce, sizeof(c->nonce));
}

static void respond(gcar_t *c, const uint8_t *nonce)
{
    uint8_t mac[GW_MAC_LEN];
    gw_auth_mac(keys[c->key].bytes, keys[c->key].len, c->role, nonce, mac);
    send_msg(c, GW_RESPONSE, 0, 0, 0, mac, sizeof(mac));
}

/* ---- carriers ---- */

static gcar_t *car_new(pscom_connection_t *con, char role, int key)
{
    gcar_t *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->con = con;
    c->role = role;
    c->key = key;
    c->since = time(NULL);
    *(gcar_t **)con->userdata = c;
    c->next = cars;
    cars = c;
    return c;
}

/* a carrier to close once the current pscom call returned (not from inside its callbacks) */
static void car_drop(gcar_t *c)
{
    c->closing = 1;
}

/* The carrier failed or is dropped: its tunnels end in close_dropped, outside pscom's
   callbacks (a carrier also fails inside a send on it) */
static void car_failed(gcar_t *c, const char *why)
{
    if (c->failed)
        return;
    c->failed = 1;
    c->closing = 1;
    snprintf(c->why, sizeof(c->why), "%s", why);
}

/* every tunnel through c ends; the other end is told */
static void car_teardown(gcar_t *c)
{
    char reason[GW_REASON_MAX];
    snprintf(reason, sizeof(reason), "gateway lost %s: %s", c->name, c->why);
    for (uint32_t i = 0; i < fwds.n; i++) {
        fwd_t *f = fwds.obj[i];
        if (!f || (f->car[0] != c && f->car[1] != c))
            continue;
        /* gone from the table before the CLOSE goes out: sending may find another carrier
           broken, which marks it for the next round only */
        int other = f->car[0] == c;
        gcar_t *oc = f->car[other];
        uint64_t peer = f->peer[other];
        int tell = oc && (other == 0 || f->open_sent);
        fwd_free(f);
        if (tell)
            send_close(oc, peer, reason);
    }
}

static void on_con_error(pscom_connection_t *con, pscom_op_t op, pscom_err_t err)
{
    (void)op;
    gcar_t *c = *(gcar_t **)con->userdata;
    if (!c)
        return;
    if (err != PSCOM_ERR_EOF || !c->authed)
        psgwd_log("%s: connection %s", c->name,
                  err == PSCOM_ERR_EOF                  ? "closed"
                  : err == PSCOM_ERR_CONNECTION_REFUSED ? "refused"
                                                        : "lost");
    car_failed(c, err == PSCOM_ERR_EOF ? "it closed the connection" : "connection lost");
    car_drop(c);
}

static void on_con_accept(pscom_connection_t *con)
{
    gcar_t *c = car_new(con, 'A', -1);
    if (!c)
        return;
    pscom_con_info_t info;
    pscom_con_info(con, &info);
    snprintf(c->name, sizeof(c->name), "client %s (%s, %s pid %d)", info.peer_name,
             info.peer_ep[0] ? info.peer_ep : "-", info.peer_host, info.peer_pid);
    challenge(c);
}

static gcar_t *car_to(const char *target, int key)
{
    for (gcar_t *c = cars; c; c = c->next)
        if (c->role == 'C' && !c->failed && !c->closing && c->key == key &&
            !strcmp(c->target, target))
            return c;
    pscom_connection_t *con = pscom_open_connection(out_sock);
    if (!con)
        return NULL;
    if (pscom_connect(con, target, PSCOM_CON_FLAG_ONDEMAND) != PSCOM_SUCCESS) {
        pscom_close_connection(con);
        return NULL;
    }
    gcar_t *c = car_new(con, 'C', key);
    if (!c)
        return NULL;
    snprintf(c->target, sizeof(c->target), "%s", target);
    snprintf(c->name, sizeof(c->name), "rank at %s", target);
    challenge(c);
    return c;
}

static char my_eps[256]; /* our listen addresses, for the ranks' log lines */

static void send_open(fwd_t *f)
{
    f->open_sent = 1;
    snprintf(f->open.gateway, sizeof(f->open.gateway), "%s", my_eps);
    send_msg(f->car[1], GW_OPEN, 0, 0, f->id, &f->open, sizeof(f->open));
}

/* ---- dispatch ---- */

static int on_response(gcar_t *c, const void *data, size_t len)
{
    if (len != GW_MAC_LEN)
        return -1;
    char peer_role = c->role == 'C' ? 'A' : 'C';
    uint8_t mac[GW_MAC_LEN];
    int found = -1;
    for (int k = 0; k < n_keys && found < 0; k++) {
        if (c->key >= 0 && k != c->key)
            continue;
        gw_auth_mac(keys[k].bytes, keys[k].len, peer_role, c->nonce, mac);
        if (pscom_auth_equal(mac, data, GW_MAC_LEN))
            found = k;
    }
    if (found < 0) {
        refused++;
        psgwd_log("refused %s: it does not know the job key%s", c->name,
                  c->role == 'A' ? " of any job this gateway serves" : "");
        /* the rank learns why (a CLOSE of no tunnel ends the carrier) */
        send_close(c, 0, "refused by the gateway: this job's key is not one it serves");
        car_failed(c, "wrong job key");
        car_drop(c);
        return 0;
    }
    c->key = found;
    c->authed = 1;
    if (c->held_challenge) {
        c->held_challenge = 0;
        respond(c, c->peer_nonce);
    }
    if (c->role == 'C')
        for (uint32_t i = 0; i < fwds.n; i++) {
            fwd_t *f = fwds.obj[i];
            if (f && f->car[1] == c && !f->open_sent)
                send_open(f);
        }
    return 0;
}

static int on_open(gcar_t *c, const gw_msg_t *h, const void *data, size_t len)
{
    if (c->role != 'A' || len != sizeof(gw_open_t))
        return -1;
    fwd_t *f = fwd_new();
    if (!f) {
        send_close(c, h->src, "gateway out of memory");
        return 0;
    }
    memcpy(&f->open, data, sizeof(f->open));
    f->open.target[sizeof(f->open.target) - 1] = f->open.origin[sizeof(f->open.origin) - 1] = 0;
    f->car[0] = c;
    f->peer[0] = h->src;
    f->car[1] = car_to(f->open.target, c->key);
    if (!f->car[1]) {
        char why[160];
        snprintf(why, sizeof(why), "gateway cannot connect to %s", f->open.target);
        fwd_free(f);
        send_close(c, h->src, why);
        return 0;
    }
    if (f->car[1]->authed)
        send_open(f);
    return 0;
}

/* DATA, HS, CREDIT, OPEN_OK, CLOSE of a tunnel: on to its other end */
static int forward(gcar_t *c, pscom_request_t *req)
{
    gw_msg_t *h = req->xheader;
    fwd_t *f = fwd_get(h->dst);
    if (!f || (f->car[0] != c && f->car[1] != c))
        return 0; /* a tunnel that ended already: its last messages */
    int from = f->car[1] == c, to = !from;
    if (h->type == GW_OPEN_OK) {
        if (from != 1)
            return -1;
        f->peer[1] = h->src;
    }
    if (to == 1 && !f->peer[1] && h->type != GW_CLOSE)
        return -1; /* the opener sends nothing but CLOSE before OPEN_OK */
    gcar_t *out = f->car[to];
    int last = h->type == GW_CLOSE;
    uint64_t dst = f->peer[to], id = f->id;
    int opened = to == 0 || f->open_sent;
    if (last)
        fwd_free(f);
    if (out->failed || !opened || !dst)
        return 0; /* the target never answered: nothing to tell it */
    h->dst = dst;
    h->src = id;
    h->seq = out->send_seq++;
    fwd_msgs++;
    fwd_bytes += req->data_len;
    /* the same request and buffer go out on the other carrier */
    req->connection = out->con;
    req->data = gw_buf(req)->data;
    req->xheader_len = sizeof(*h);
    req->ops.io_done = sent;
    req->ops.recv_accept = NULL;
    pscom_post_send(req);
    return 1;
}

static void handle(gcar_t *c, pscom_request_t *req)
{
    const gw_msg_t *h = req->xheader;
    const void *data = gw_buf(req)->data;
    size_t len = req->data_len;
    int rc = -1;
    if (h->version != GW_PROTO_VERSION) {
        rc = -1;
    } else if (h->type == GW_CHALLENGE && len == GW_NONCE_LEN) {
        rc = 0;
        if (c->key >= 0) {
            respond(c, data);
        } else { /* a rank's: answered with its job's key once it proved that */
            memcpy(c->peer_nonce, data, GW_NONCE_LEN);
            c->held_challenge = 1;
        }
    } else if (h->type == GW_RESPONSE) {
        rc = on_response(c, data, len);
    } else if (!c->authed) {
        rc = -1;
    } else if (h->type == GW_OPEN) {
        rc = on_open(c, h, data, len);
    } else if (h->type > GW_OPEN && h->type < GW_TYPE_END) {
        rc = forward(c, req);
    }
    if (rc < 0) {
        refused += !c->authed;
        psgwd_log("dropped %s: protocol error (%s message of %zu bytes%s)", c->name,
                  gw_type_name(h->type), len, c->authed ? "" : " before authentication");
        car_failed(c, "protocol error");
        car_drop(c);
    }
    if (rc != 1)
        req_put(req);
}

static void on_message(pscom_request_t *req)
{
    gcar_t *c = *(gcar_t **)req->connection->userdata;
    if (!pscom_req_successful(req) || !c || c->failed) {
        req_put(req);
        return;
    }
    if (req->xheader_len != sizeof(gw_msg_t)) {
        psgwd_log("dropped %s: protocol error (malformed message)", c->name);
        refused += !c->authed;
        car_failed(c, "protocol error");
        car_drop(c);
        req_put(req);
        return;
    }
    if (!gw_order_arrived(&c->order, req))
        return;
    do
        handle(c, req);
    while (!c->failed && (req = gw_order_next(&c->order)));
}

static pscom_request_t *on_header(pscom_connection_t *con, pscom_header_net_t *header)
{
    gcar_t *c = *(gcar_t **)con->userdata;
    /* before authentication only the two small handshake messages are taken in */
    size_t max = c && c->authed ? FRAG_MAX : GW_MAC_LEN;
    size_t len = header->data_len <= max ? header->data_len : 0; /* else truncated: dropped */
    pscom_request_t *req = req_get(len ? len : 1);
    if (!req)
        return NULL;
    req->data = gw_buf(req)->data;
    req->data_len = len;
    req->ops.io_done = on_message;
    req->ops.recv_accept = NULL;
    return req;
}

static void close_dropped(void)
{
    time_t now = time(NULL);
    for (gcar_t *c = cars; c; c = c->next)
        if (!c->authed && !c->closing && now - c->since > AUTH_TIMEOUT_S) {
            refused++;
            psgwd_log("dropped %s: no job key proved within %d s", c->name, AUTH_TIMEOUT_S);
            car_failed(c, "no authentication");
            car_drop(c);
        }
    for (gcar_t **pp = &cars; *pp;) {
        gcar_t *c = *pp;
        if (!c->closing) {
            pp = &c->next;
            continue;
        }
        *pp = c->next;
        if (c->failed)
            car_teardown(c);
        while (c->order.held) {
            pscom_request_t *req = c->order.held;
            c->order.held = gw_buf(req)->next;
            req_put(req);
        }
        *(gcar_t **)c->con->userdata = NULL;
        pscom_close_connection(c->con);
        free(c);
    }
}

/* ---- the interface (psgwd_fwd.h) ---- */

int psgwd_key_add(const uint8_t *key, size_t len)
{
    if (n_keys == PSGWD_KEYS_MAX || len > GW_KEY_MAX)
        return -1;
    memcpy(keys[n_keys].bytes, key, len);
    keys[n_keys++].len = len;
    return 0;
}

pscom_socket_t *psgwd_socket(void)
{
    pscom_socket_t *s = pscom_open_socket(0, sizeof(gcar_t *));
    if (!s)
        return NULL;
    s->ops.con_accept = on_con_accept;
    s->ops.con_error = on_con_error;
    s->ops.default_recv = on_header;
    return s;
}

int psgwd_start(const char *eps)
{
    snprintf(my_eps, sizeof(my_eps), "%s", eps);
    out_sock = pscom_open_socket(0, sizeof(gcar_t *));
    if (!out_sock)
        return -1;
    pscom_socket_set_name(out_sock, "psgwd");
    pscom_socket_set_service(out_sock, GW_SERVICE);
    out_sock->ops.con_error = on_con_error;
    out_sock->ops.default_recv = on_header;
    return 0;
}

void psgwd_poll(void)
{
    close_dropped();
}

void psgwd_stop(const char *why)
{
    if (why)
        psgwd_log("%s: closing (forwarded %llu messages, %llu bytes; refused %llu clients)", why,
                  (unsigned long long)fwd_msgs, (unsigned long long)fwd_bytes,
                  (unsigned long long)refused);
    for (uint32_t i = 0; i < fwds.n; i++) {
        fwd_t *f = fwds.obj[i];
        if (!f)
            continue;
        fwd_t copy = *f;
        fwd_free(f); /* first: as in car_failed */
        for (int s = 0; s < 2; s++)
            if (copy.car[s] && (s == 0 || copy.open_sent))
                send_close(copy.car[s], copy.peer[s], "the gateway shut down");
    }
    for (gcar_t *c = cars; c; c = c->next)
        car_drop(c);
    close_dropped(); /* each carrier's connection flushes what it has to send */
}
