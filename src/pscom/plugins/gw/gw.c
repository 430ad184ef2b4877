/*
 * gw transport: connections to ranks on another network, through a gateway daemon (psgwd).
 * Protocol and terms: gw_proto.h. Which gateway: gw_route.h.
 *
 * The connection's handshake is pscom's own, run over a socketpair whose other end this plugin
 * forwards through the tunnel (con_relay on the connecting side, pscom_relay_accept on the
 * other), so identities, the simultaneous-connect tie-break and timeouts are core's. After the
 * handshake the tunnel carries the connection's byte stream in fragments (pscom_write_get_iov
 * -> DATA -> pscom_read_feed). Usable only where PSP_GW_SERVER names a route file.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include "gw_proto.h"
#include "gw_route.h"
#include "pscom_plugin.h"

#define GW_RNDV       (1u << 20) /* as tcp: larger messages wait for the matching receive */
/* A message's data of at least this size travels in fragments of its own, sent straight from
   the sender's buffer and received straight into the matched receive buffer (no copy at
   either end); smaller messages are copied and gathered, several to a fragment. */
#define DIRECT_MIN 8192
#define FRAG_DATA_MAX (64u << 20)

static struct {
    const char *server, *key_path;
    size_t mtu;
    unsigned tokens;
} cfg;

static const pscom_env_row_t gw_env[] = {
    {"PSP_GW_SERVER", "",
     "Route file of the gateways (psgwd) that join this job's networks: lines "
     "'ADDR:PORT[,ADDR:PORT] NODE-PATTERN NODE-PATTERN' and 'key PATH'. Empty: no gateway.",
     PSCOM_ENV_STR, &cfg.server, 0, 0},
    {"PSP_GW_KEY", "",
     "The job's key file for the gateways (mode 0600); empty: the route file's 'key' line.",
     PSCOM_ENV_STR, &cfg.key_path, 0, 0},
    {"PSP_GW_MTU", "256k",
     "Largest fragment a gateway connection sends: the gateway forwards a fragment while the "
     "next one arrives.",
     PSCOM_ENV_SIZE, &cfg.mtu, 0, 0},
    {"PSP_GW_TOKENS", "16",
     "Fragments in flight per gateway connection (credits; 0: no limit, the gateway may then "
     "buffer without bound behind a slow receiver).",
     PSCOM_ENV_UINT, &cfg.tokens, 0, 0},
    {NULL, NULL, NULL, 0, NULL, 0, 0},
};

/* ---- state ---- */

typedef struct carrier {
    list_head_t link;
    pscom_connection_t *con;
    char addr[GW_ADDR_MAX]; /* the gateway's "ip:port" */
    char name[GW_ADDR_MAX + 16];
    char role;     /* our end: 'C' we connected, 'A' psgwd connected to us */
    int authed;    /* the gateway proved the key */
    int named;     /* an accepted carrier's addr is the gateway's (from its first OPEN) */
    int torn_down; /* failed, and its tunnels ended (teardown_poll) */
    char reason[GW_REASON_MAX + GW_ADDR_MAX + 32];
    int failed;
    uint8_t nonce[GW_NONCE_LEN]; /* our challenge */
    uint64_t msgs_sent, bytes_sent, msgs_recv, bytes_recv;
    uint64_t send_seq;
    gw_order_t order;
} carrier_t;

enum { T_OPENING, T_HANDSHAKE, T_DATA };

typedef struct tunnel {
    uint64_t id;   /* ours */
    uint64_t peer; /* the gateway's */
    carrier_t *carrier;
    pscom_con_t *con; /* connecting side: from con_relay; accepting side: from con_start */
    int fd, core_fd;  /* socketpair of the handshake: ours, core's */
    pscom_ufd_t ufd;
    int state, peer_gone;
    int writing, write_again; /* in gw_write_start: nested calls only ask for another round */
    char target[GW_ADDR_MAX];
    uint32_t credits, owed;
    unsigned inflight;   /* DATA fragments posted on the carrier, not yet written */
    size_t ahead;        /* bytes of the head message posted from its buffer, not yet written */
    pscom_request_t *pending, **pending_tail; /* DATA that came before con_start */
    list_head_t waiting; /* in waiting_open: the carrier is not authenticated yet */
} tunnel_t;

static pscom_socket_t *gw_sock;
static list_head_t carriers = LIST_HEAD_INIT(carriers);
static list_head_t waiting_open = LIST_HEAD_INIT(waiting_open);
static pscom_request_t *frag_pool;
static gw_ids_t tunnels;
static uint8_t key[GW_KEY_MAX];
static size_t key_len;
static const pscom_plugin_t pscom_plugin_gw;

static tunnel_t *tunnel_get(uint64_t id)
{
    return gw_ids_get(&tunnels, id);
}

static tunnel_t *tunnel_new(carrier_t *c)
{
    tunnel_t *t = calloc(1, sizeof(*t));
    if (!t || !(t->id = gw_ids_add(&tunnels, t))) {
        free(t);
        return NULL;
    }
    t->carrier = c;
    t->fd = t->core_fd = -1;
    t->credits = cfg.tokens;
    t->pending_tail = &t->pending;
    list_init(&t->waiting);
    return t;
}

/* ---- fragments: pscom requests with a buffer of their own (gw_buf_t) ---- */

static pscom_request_t *frag_get(size_t len)
{
    return gw_pool_get(&frag_pool, len);
}

/* keeps buffers up to the MTU; an unusually large one goes */
static void frag_put(pscom_request_t *req)
{
    gw_pool_put(&frag_pool, req, cfg.mtu + 4096);
}

/* ---- sending on a carrier ---- */

static void set_hdr(gw_msg_t *h, int type, tunnel_t *t)
{
    memset(h, 0, sizeof(*h));
    h->type = (uint8_t)type;
    h->version = GW_PROTO_VERSION;
    if (t) {
        h->dst = t->peer;
        h->src = t->id;
        h->credits = t->owed; /* credits ride along with anything going back */
        t->owed = 0;
    }
}

/* a small message, copied */
static void send_ctrl(carrier_t *c, gw_msg_t *h, const void *data, size_t len)
{
    if (c->failed)
        return;
    h->seq = c->send_seq++;
    c->msgs_sent++;
    c->bytes_sent += len;
    pscom_send(c->con, h, sizeof(*h), data, len);
}

static void tunnel_ctrl(tunnel_t *t, int type, uint16_t flags, const void *data, size_t len)
{
    gw_msg_t h;
    set_hdr(&h, type, t);
    h.flags = flags;
    send_ctrl(t->carrier, &h, data, len);
}

static void gw_write_start(pscom_con_t *con);

static void frag_sent(pscom_request_t *req)
{
    tunnel_t *t = tunnel_get(gw_buf(req)->tunnel);
    size_t direct = gw_buf(req)->direct;
    int sent = pscom_req_successful(req);
    frag_put(req);
    if (!t)
        return;
    t->inflight--;
    if (direct && t->con && sent) {
        /* the user's bytes are out: now they count as written (carrier sends complete in
           order, so these are the first t->ahead bytes of the head message) */
        t->ahead -= direct;
        pscom_con_t *con = t->con;
        uint64_t id = t->id;
        pscom_write_done(con, direct);
        if (tunnel_get(id) == t && pscom_write_pending(con))
            gw_write_start(con);
    }
}

/* data: the fragment's bytes (its own buffer, or the user's: gw_buf(req)->direct) */
static void send_frag(tunnel_t *t, pscom_request_t *req, void *data, size_t len)
{
    gw_msg_t *h = req->xheader;
    set_hdr(h, GW_DATA, t);
    h->seq = t->carrier->send_seq++;
    req->xheader_len = sizeof(*h);
    req->data = data;
    req->data_len = len;
    req->connection = t->carrier->con;
    req->ops.io_done = frag_sent;
    req->ops.recv_accept = NULL;
    gw_buf(req)->tunnel = t->id;
    t->inflight++;
    t->carrier->msgs_sent++;
    t->carrier->bytes_sent += len;
    pscom_post_send(req);
}

/* ---- tunnels ---- */

static void tunnel_free(tunnel_t *t)
{
    if (t->fd >= 0) {
        pscom_ufd_del(&t->ufd);
        close(t->fd);
    }
    while (t->pending) {
        pscom_request_t *req = t->pending;
        t->pending = gw_buf(req)->next;
        frag_put(req);
    }
    list_del(&t->waiting);
    gw_ids_del(&tunnels, t->id);
    free(t);
}

/* The other side closed the tunnel, or its carrier failed: core learns it from the connection
   (a transport failure; silent after the peer's EOF) or, during the handshake, from its stream
   ending. */
static void tunnel_down(tunnel_t *t, int error, const char *why)
{
    t->peer_gone = 1;
    if (t->state == T_DATA && t->con) {
        /* core closes the transport: gw_close frees t */
        pscom_con_transport_failed(t->con, PSCOM_OP_RW, PSCOM_ERR_IOERROR, why);
        return;
    }
    if (error)
        pscom_log(1, "gw: connection to %s via gw %s failed: %s", t->target,
                  t->carrier ? t->carrier->addr : "?", why);
    tunnel_free(t);
}

/* ---- the handshake stream: core's bytes <-> HS messages ---- */

static void pump_handler(pscom_ufd_t *ufd, uint32_t revents)
{
    tunnel_t *t = ufd->priv;
    (void)revents;
    for (;;) {
        char buf[4096];
        ssize_t n = recv(t->fd, buf, sizeof(buf), 0);
        if (n > 0) {
            tunnel_ctrl(t, GW_HS, 0, buf, (size_t)n);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        /* core ended the handshake without a connection (declined, timed out, duplicate) */
        tunnel_ctrl(t, GW_CLOSE, 0, NULL, 0);
        tunnel_free(t);
        return;
    }
}

static void pump_start(tunnel_t *t)
{
    t->state = T_HANDSHAKE;
    t->ufd = (pscom_ufd_t){.fd = t->fd, .events = EPOLLIN, .handler = pump_handler, .priv = t};
    pscom_ufd_add(&t->ufd);
}

static int write_all(int fd, const char *p, size_t len)
{
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
        } else if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
            continue; /* handshake frames are small: the socket buffer takes them */
        } else {
            return -1;
        }
    }
    return 0;
}

/* ---- carriers ---- */

static void carrier_challenge(carrier_t *c)
{
    gw_msg_t h;
    set_hdr(&h, GW_CHALLENGE, NULL);
    pscom_random_bytes(c->nonce, sizeof(c->nonce));
    send_ctrl(c, &h, c->nonce, sizeof(c->nonce));
}

static carrier_t *carrier_new(pscom_connection_t *con, const char *addr, char role)
{
    carrier_t *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->con = con;
    c->role = role;
    snprintf(c->addr, sizeof(c->addr), "%s", addr);
    snprintf(c->name, sizeof(c->name), "gateway %s", addr);
    *(carrier_t **)con->userdata = c;
    list_add_tail(&c->link, &carriers);
    carrier_challenge(c);
    return c;
}

static carrier_t *carrier_to(const char *addr)
{
    list_head_t *p;
    list_for_each(p, &carriers)
    {
        carrier_t *c = list_entry(p, carrier_t, link);
        if (!c->failed && c->role == 'C' && !strcmp(c->addr, addr))
            return c;
    }
    pscom_connection_t *con = pscom_open_connection(gw_sock);
    if (!con)
        return NULL;
    if (pscom_connect(con, addr, PSCOM_CON_FLAG_ONDEMAND) != PSCOM_SUCCESS) {
        pscom_close_connection(con);
        return NULL;
    }
    return carrier_new(con, addr, 'C');
}

static void send_open(tunnel_t *t)
{
    gw_open_t o;
    memset(&o, 0, sizeof(o));
    snprintf(o.target, sizeof(o.target), "%s", t->target);
    char host[64] = "";
    gethostname(host, sizeof(host) - 1);
    snprintf(o.origin, sizeof(o.origin), "%s on %s pid %d", pscom_con_pub(t->con)->socket->local_name,
             host, (int)getpid());
    tunnel_ctrl(t, GW_OPEN, 0, &o, sizeof(o));
}

/* The carrier failed: every tunnel through it fails */
/* Tunnels of failed carriers end from a poller, outside the plugin's own calls: a carrier
   fails inside a send (pscom reports a broken connection from the write), and the caller may
   still use the tunnel it sent for. */
static pscom_poller_t teardown_poller;
static int teardown_on;

static int teardown_poll(pscom_poller_t *p)
{
    (void)p;
    pscom_poller_del(&teardown_poller);
    teardown_on = 0;
    list_head_t *pos;
    list_for_each(pos, &carriers)
    {
        carrier_t *c = list_entry(pos, carrier_t, link);
        if (!c->failed || c->torn_down)
            continue;
        c->torn_down = 1;
        for (uint32_t i = 0; i < tunnels.n; i++) {
            tunnel_t *t = tunnels.obj[i];
            if (t && t->carrier == c)
                tunnel_down(t, 1, c->reason);
        }
    }
    return 1;
}

static void carrier_failed(carrier_t *c, const char *why)
{
    if (c->failed)
        return;
    c->failed = 1;
    while (c->order.held) {
        pscom_request_t *req = c->order.held;
        c->order.held = gw_buf(req)->next;
        frag_put(req);
    }
    snprintf(c->reason, sizeof(c->reason), "lost gateway %s: %s", c->addr, why);
    pscom_log(1, "gw: %s", c->reason);
    if (!teardown_on) {
        teardown_on = 1;
        teardown_poller.poll = teardown_poll;
        pscom_poller_add(&teardown_poller);
    }
}

static void gw_con_error(pscom_connection_t *con, pscom_op_t op, pscom_err_t err)
{
    (void)op;
    carrier_t *c = *(carrier_t **)con->userdata;
    if (c)
        carrier_failed(c, err == PSCOM_ERR_EOF ? "it closed the connection"
                          : err == PSCOM_ERR_CONNECTION_REFUSED ? "connection refused"
                                                                : "connection broken");
}

static void gw_con_accept(pscom_connection_t *con)
{
    pscom_con_info_t info;
    pscom_con_info(con, &info);
    carrier_new(con, info.peer_ep[0] ? info.peer_ep : info.peer_host, 'A');
}

/* ---- receiving: every carrier message lands in a fragment, then dispatch ---- */

static void on_open(carrier_t *c, const gw_msg_t *h, const void *data, size_t len)
{
    gw_open_t o;
    if (len != sizeof(o))
        return;
    memcpy(&o, data, sizeof(o));
    o.target[sizeof(o.target) - 1] = o.origin[sizeof(o.origin) - 1] = '\0';
    o.gateway[sizeof(o.gateway) - 1] = '\0';
    char gw[GW_ADDR_MAX];
    if (c->role == 'A' && !c->named && gw_route_local_addr(o.gateway, gw, sizeof(gw))) {
        c->named = 1; /* psgwd connected to us: now we know its address on our network */
        snprintf(c->addr, sizeof(c->addr), "%s", gw);
        snprintf(c->name, sizeof(c->name), "gateway %s", gw);
    }
    tunnel_t *t = tunnel_new(c);
    int sv[2];
    if (!t || socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
        gw_msg_t r;
        set_hdr(&r, GW_CLOSE, NULL);
        r.dst = h->src;
        r.flags = GW_F_ERROR;
        send_ctrl(c, &r, "out of resources", 16);
        if (t)
            tunnel_free(t);
        return;
    }
    t->peer = h->src;
    snprintf(t->target, sizeof(t->target), "%s", o.origin);
    t->fd = sv[0];
    t->core_fd = sv[1];
    char from[GW_ADDR_MAX + 32];
    snprintf(from, sizeof(from), "%s via gw %s", o.origin, c->addr);
    if (pscom_relay_accept(&pscom_plugin_gw, o.target, sv[1], from) != 0) {
        char why[GW_REASON_MAX];
        snprintf(why, sizeof(why), "no socket listens at %s in this process", o.target);
        tunnel_ctrl(t, GW_CLOSE, GW_F_ERROR, why, strlen(why));
        close(sv[1]);
        t->core_fd = -1;
        tunnel_free(t);
        return;
    }
    tunnel_ctrl(t, GW_OPEN_OK, 0, NULL, 0);
    pump_start(t);
}

static void feed(tunnel_t *t, pscom_request_t *req)
{
    t->owed++; /* before: what core calls back may close the connection and free t */
    pscom_read_feed(t->con, gw_buf(req)->data, req->data_len);
}

static void return_credits(tunnel_t *t)
{
    /* a sender waits for credits only when it has used them all: return them before that */
    if (cfg.tokens && t->owed >= (cfg.tokens + 1) / 2 && t->carrier && !t->peer_gone)
        tunnel_ctrl(t, GW_CREDIT, 0, NULL, 0);
}

/* 1: the fragment stays (kept on a tunnel) */
static int dispatch(carrier_t *c, pscom_request_t *req)
{
    const gw_msg_t *h = req->xheader;
    const void *data = gw_buf(req)->data;
    size_t len = req->data_len;
    if (h->type == GW_CHALLENGE) {
        if (len != GW_NONCE_LEN)
            return -1;
        gw_msg_t r;
        uint8_t mac[GW_MAC_LEN];
        gw_auth_mac(key, key_len, c->role, data, mac);
        set_hdr(&r, GW_RESPONSE, NULL);
        send_ctrl(c, &r, mac, sizeof(mac));
        return 0;
    }
    if (h->type == GW_RESPONSE) {
        uint8_t mac[GW_MAC_LEN];
        gw_auth_mac(key, key_len, c->role == 'C' ? 'A' : 'C', c->nonce, mac);
        if (len != GW_MAC_LEN || !pscom_auth_equal(mac, data, GW_MAC_LEN)) {
            carrier_failed(c, "it does not know this job's key (PSP_GW_KEY)");
            return -2;
        }
        c->authed = 1;
        list_head_t *p, *n;
        list_for_each_safe(p, n, &waiting_open)
        {
            tunnel_t *t = list_entry(p, tunnel_t, waiting);
            if (t->carrier == c) {
                list_del(&t->waiting);
                send_open(t);
            }
        }
        return 0;
    }
    if (h->type == GW_CLOSE && !h->dst) { /* the gateway ends the carrier, e.g. refuses us */
        char why[GW_REASON_MAX + 1];
        snprintf(why, sizeof(why), "%.*s", (int)(len < GW_REASON_MAX ? len : GW_REASON_MAX),
                 (const char *)data);
        carrier_failed(c, why[0] ? why : "closed by the gateway");
        return -2;
    }
    if (!c->authed)
        return -1;
    if (h->type == GW_OPEN)
        return on_open(c, h, data, len), 0;
    tunnel_t *t = tunnel_get(h->dst);
    if (!t || t->carrier != c)
        return 0; /* a tunnel that is gone already: its last messages */
    t->credits += h->credits;
    switch (h->type) {
    case GW_OPEN_OK:
        if (t->state != T_OPENING)
            return -1;
        t->peer = h->src;
        pump_start(t);
        return 0;
    case GW_HS:
        if (t->fd < 0 || write_all(t->fd, data, len) != 0) {
            /* core ended this handshake already (the other one of two simultaneous connects
               won, or it timed out): its decision, not a failure */
            PSCOM_LOG(3, "gw: handshake with %s through %s ended by core", t->target,
                      t->carrier->addr);
            tunnel_ctrl(t, GW_CLOSE, 0, NULL, 0);
            tunnel_free(t);
        }
        return 0;
    case GW_DATA:
        if (t->state != T_DATA || !t->con) {
            gw_buf(req)->next = NULL;
            *t->pending_tail = req;
            t->pending_tail = &gw_buf(req)->next;
            return 1;
        }
        if (gw_buf(req)->direct) { /* received in place (gw_default_recv) */
            t->owed++;
            pscom_read_direct_done(t->con, gw_buf(req)->direct);
        } else {
            feed(t, req);
        }
        if (!(t = tunnel_get(h->dst)))
            return 0;
        return_credits(t);
        break; /* credits may have come with it */
    case GW_CREDIT:
        break;
    case GW_CLOSE: {
        char why[GW_REASON_MAX + 1];
        snprintf(why, sizeof(why), "%.*s", (int)(len < GW_REASON_MAX ? len : GW_REASON_MAX),
                 (const char *)data);
        tunnel_down(t, h->flags & GW_F_ERROR, why[0] ? why : "closed by the peer");
        return 0;
    }
    default:
        return -1;
    }
    if (t->con && t->state == T_DATA && pscom_write_pending(t->con))
        gw_write_start(t->con);
    return 0;
}

static void handle(carrier_t *c, pscom_request_t *req)
{
    const gw_msg_t *h = req->xheader;
    int rc = -1;
    c->msgs_recv++;
    c->bytes_recv += req->data_len;
    if (!c->failed && h->version == GW_PROTO_VERSION)
        rc = dispatch(c, req);
    if (rc == -1) {
        char why[96];
        snprintf(why, sizeof(why), "protocol error (%s message, %zu bytes%s)",
                 gw_type_name(h->type), (size_t)req->data_len,
                 c->authed ? "" : ", before authentication");
        carrier_failed(c, why);
    }
    if (rc != 1)
        frag_put(req);
}

static void on_message(pscom_request_t *req)
{
    carrier_t *c = *(carrier_t **)req->connection->userdata;
    if (!pscom_req_successful(req) || !c || c->failed ||
        req->xheader_len != sizeof(gw_msg_t)) {
        if (c && pscom_req_successful(req))
            carrier_failed(c, "protocol error (malformed message)");
        frag_put(req);
        return; /* a failed carrier: con_error tells */
    }
    if (!gw_order_arrived(&c->order, req))
        return;
    do
        handle(c, req);
    while (!c->failed && (req = gw_order_next(&c->order)));
}

/* A DATA fragment that is next in order on its carrier and holds nothing but data of the
   message the tunnel's connection receives now goes straight into the receive buffer. */
static void *direct_target(pscom_connection_t *con, const pscom_header_net_t *header)
{
    const gw_msg_t *h = pscom_header_xheader(header);
    carrier_t *c = *(carrier_t **)con->userdata;
    if (header->xheader_len != sizeof(*h) || h->type != GW_DATA || header->data_len < DIRECT_MIN ||
        !c || !c->authed || h->seq != c->order.next_seq)
        return NULL;
    tunnel_t *t = tunnel_get(h->dst);
    void *buf;
    if (!t || t->carrier != c || t->state != T_DATA || !t->con || t->pending ||
        pscom_read_direct_buf(t->con, &buf) < header->data_len)
        return NULL;
    return buf;
}

static pscom_request_t *gw_default_recv(pscom_connection_t *con, pscom_header_net_t *header)
{
    void *direct = direct_target(con, header);
    size_t len = header->data_len <= FRAG_DATA_MAX ? header->data_len : 0; /* else truncated */
    pscom_request_t *req = frag_get(direct ? 0 : len ? len : 1);
    if (!req)
        return NULL;
    if (direct) {
        gw_buf(req)->direct = len;
        req->data = direct;
        req->data_len = len;
        req->ops.io_done = on_message;
        req->ops.recv_accept = NULL;
        return req;
    }
    req->data = gw_buf(req)->data;
    req->data_len = len;
    req->ops.io_done = on_message;
    req->ops.recv_accept = NULL;
    return req;
}

/* ---- the connection's data path ---- */

/* iov without its first skip bytes; the entries left */
static int iov_skip(struct iovec *iov, int n, size_t skip)
{
    int k = 0;
    while (k < n && skip >= iov[k].iov_len)
        skip -= iov[k++].iov_len;
    for (int i = k; i < n; i++)
        iov[i - k] = iov[i];
    n -= k;
    if (n && skip) {
        iov[0].iov_base = (char *)iov[0].iov_base + skip;
        iov[0].iov_len -= skip;
    }
    return n;
}

/* Copy whole small messages, and the headers of a large one, into one fragment; its length
   (0: nothing sent) */
static size_t send_gathered(tunnel_t *t, pscom_con_t *con, struct iovec *iov, int n)
{
    pscom_request_t *req = frag_get(cfg.mtu);
    if (!req)
        return 0;
    char *buf = gw_buf(req)->data;
    size_t len = 0;
    uint64_t id = t->id;
    while (n && len < cfg.mtu) {
        size_t took = 0;
        for (int k = 0; k < n && len < cfg.mtu; k++) {
            if (k == n - 1 && iov[k].iov_len >= DIRECT_MIN && (len || k))
                break; /* a large message's data: a fragment of its own, from its buffer */
            size_t c = iov[k].iov_len < cfg.mtu - len ? iov[k].iov_len : cfg.mtu - len;
            pscom_copy_data(buf + len, iov[k].iov_base, c);
            len += c;
            took += c;
            if (c < iov[k].iov_len)
                break;
        }
        if (!took)
            break;
        pscom_write_done(con, took);
        if (tunnel_get(id) != t || t->peer_gone) { /* closed by a completion */
            frag_put(req);
            return 0;
        }
        n = len < cfg.mtu ? pscom_write_get_iov(con, iov) : 0;
        if (n && iov[0].iov_len >= DIRECT_MIN && n == 1)
            break; /* the next message's data only (a rendezvous push): its own fragment */
    }
    if (!len) {
        frag_put(req);
        return 0;
    }
    send_frag(t, req, buf, len);
    return len;
}

/* Fragments leave in stream order: what a completion inside this loop queues (core calls
   write_start again from pscom_write_done's callbacks, or a credit arrives) is taken by the
   running loop, after the bytes gathered so far. */
static void gw_write_start(pscom_con_t *con)
{
    tunnel_t *t = pscom_con_transport_data(con);
    if (!t || t->peer_gone || t->carrier->failed)
        return;
    if (t->writing) {
        t->write_again = 1;
        return;
    }
    t->writing = 1;
    uint64_t id = t->id;
    do {
        t->write_again = 0;
        while ((!cfg.tokens || t->credits > 0) && tunnel_get(id) == t && !t->peer_gone) {
            struct iovec iov[3];
            int n = iov_skip(iov, pscom_write_get_iov(con, iov), t->ahead);
            if (!n)
                break; /* nothing, or the head message is all posted: its sends complete it */
            if (n == 1 && (t->ahead || iov[0].iov_len >= DIRECT_MIN)) {
                /* data from the user's buffer: written once the carrier has sent it */
                size_t len = iov[0].iov_len < cfg.mtu ? iov[0].iov_len : cfg.mtu;
                pscom_request_t *req = frag_get(0);
                if (!req)
                    break;
                gw_buf(req)->direct = len;
                t->ahead += len;
                if (cfg.tokens)
                    t->credits--;
                send_frag(t, req, iov[0].iov_base, len);
                continue;
            }
            if (!send_gathered(t, con, iov, n))
                break;
            if (cfg.tokens && tunnel_get(id) == t)
                t->credits--;
        }
    } while (tunnel_get(id) == t && t->write_again);
    if (tunnel_get(id) == t)
        t->writing = 0;
}

static void gw_close(pscom_con_t *con)
{
    tunnel_t *t = pscom_con_transport_data(con);
    pscom_con_set_transport(con, NULL, NULL);
    if (!t)
        return;
    if (!t->peer_gone && !t->carrier->failed)
        tunnel_ctrl(t, GW_CLOSE, 0, NULL, 0);
    tunnel_free(t);
}

static int gw_flushed(pscom_con_t *con)
{
    tunnel_t *t = pscom_con_transport_data(con);
    return !t || t->inflight == 0 || t->carrier->failed;
}

static void gw_con_dump(pscom_con_t *con, FILE *out)
{
    tunnel_t *t = pscom_con_transport_data(con);
    if (t)
        fprintf(out, "    gw %s tunnel %llx/%llx credits %u owed %u inflight %u\n",
                t->carrier->addr, (unsigned long long)t->id, (unsigned long long)t->peer,
                t->credits, t->owed, t->inflight);
}

static const pscom_con_ops_t gw_con_ops = {
    .write_start = gw_write_start,
    .close = gw_close,
    .flushed = gw_flushed,
    .dump = gw_con_dump,
};

/* ---- plugin interface ---- */

static tunnel_t *tunnel_by_con(pscom_con_t *con)
{
    for (uint32_t i = 0; i < tunnels.n; i++) {
        tunnel_t *t = tunnels.obj[i];
        if (t && t->con == con && t->state != T_DATA)
            return t;
    }
    return NULL;
}

static int gw_relay(pscom_con_t *con, const char *addr, int unreachable)
{
    char ip[GW_ADDR_MAX], gw[GW_ADDR_MAX];
    if (pscom_con_pub(con)->socket == gw_sock)
        return -1; /* a carrier goes straight to its gateway */
    snprintf(ip, sizeof(ip), "%s", addr);
    char *colon = strrchr(ip, ':');
    if (colon)
        *colon = '\0';
    if (!gw_route_pick(ip, unreachable, gw, sizeof(gw))) {
        if (unreachable)
            pscom_log(1, "gw: no gateway in %s reaches %s", cfg.server, addr);
        return -1;
    }
    carrier_t *c = carrier_to(gw);
    tunnel_t *t = c ? tunnel_new(c) : NULL;
    int sv[2];
    if (!t || socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
        if (t)
            tunnel_free(t);
        return -1;
    }
    t->con = con;
    t->fd = sv[0];
    t->core_fd = sv[1];
    snprintf(t->target, sizeof(t->target), "%s", addr);
    PSCOM_LOG(2, "gw: %s goes via gw %s", pscom_con_name(con), gw);
    if (c->authed)
        send_open(t);
    else
        list_add_tail(&t->waiting, &waiting_open);
    return sv[1];
}

static int gw_offer(pscom_con_t *con, void *blob, size_t *len)
{
    (void)blob;
    *len = 0;
    return tunnel_by_con(con) ? 0 : -1;
}

static int gw_accept(pscom_con_t *con, const void *offer, size_t offer_len, void *blob,
                     size_t *len)
{
    (void)con, (void)offer, (void)offer_len, (void)blob;
    *len = 0;
    return 0; /* core offers us only the handshakes we relay */
}

static int gw_finish(pscom_con_t *con, const void *reply, size_t reply_len)
{
    (void)con, (void)reply, (void)reply_len;
    return 0;
}

static void gw_start(pscom_con_t *con, int fd)
{
    tunnel_t *t = NULL;
    for (uint32_t i = 0; i < tunnels.n && !t; i++) {
        tunnel_t *x = tunnels.obj[i];
        if (x && x->core_fd == fd && x->state == T_HANDSHAKE)
            t = x;
    }
    if (!t) {
        close(fd);
        pscom_con_transport_failed(con, PSCOM_OP_CONNECT, PSCOM_ERR_PROTOCOL,
                                   "gw: no tunnel for this handshake");
        return;
    }
    /* core's last handshake frame is still in the socketpair: it goes before any data */
    pump_handler(&t->ufd, EPOLLIN);
    if (!tunnel_get(t->id))
        return;
    pscom_ufd_del(&t->ufd);
    close(t->fd);
    close(fd);
    t->fd = t->core_fd = -1;
    t->con = con;
    t->state = T_DATA;
    char via[GW_ADDR_MAX + 8];
    snprintf(via, sizeof(via), "gw %s", t->carrier->addr);
    pscom_con_set_via(con, via);
    pscom_con_set_transport(con, &gw_con_ops, t);
    while (t->pending && tunnel_get(t->id) == t && t->con) {
        pscom_request_t *req = t->pending;
        t->pending = gw_buf(req)->next;
        if (!t->pending)
            t->pending_tail = &t->pending;
        feed(t, req);
        frag_put(req);
    }
    if (tunnel_get(t->id) != t)
        return;
    return_credits(t);
}

static int gw_init(void)
{
    if (!cfg.server || !*cfg.server) {
        pscom_plugin_set_status("gw", "no route file (PSP_GW_SERVER)");
        return -1;
    }
    char key_path[1024] = "", why[256];
    if (gw_routes_load(cfg.server, key_path, sizeof(key_path), why, sizeof(why)) != 0) {
        pscom_log(1, "gw: PSP_GW_SERVER: %s; no gateway connections", why);
        pscom_plugin_set_status("gw", "PSP_GW_SERVER: %s", why);
        return -1;
    }
    if (cfg.key_path && *cfg.key_path)
        snprintf(key_path, sizeof(key_path), "%s", cfg.key_path);
    if (!key_path[0]) {
        pscom_log(1, "gw: no job key for the gateways: set PSP_GW_KEY or a 'key' line in %s",
                  cfg.server);
        pscom_plugin_set_status("gw", "no job key (PSP_GW_KEY)");
        return -1;
    }
    if (pscom_key_load(key_path, key, sizeof(key), &key_len, why, sizeof(why)) != 0) {
        pscom_log(1, "gw: job key %s: %s", key_path, why);
        pscom_plugin_set_status("gw", "job key %s: %s", key_path, why);
        return -1;
    }
    if (cfg.mtu < 1024)
        cfg.mtu = 1024;
    gw_sock = pscom_open_socket(0, sizeof(carrier_t *));
    if (!gw_sock)
        return -1;
    pscom_socket_set_name(gw_sock, "gw");
    gw_sock->ops.con_accept = gw_con_accept;
    gw_sock->ops.con_error = gw_con_error;
    gw_sock->ops.default_recv = gw_default_recv;
    pscom_socket_serve(gw_sock, GW_SERVICE);
    pscom_plugin_set_status("gw", "%d routes in %s", gw_routes_count(), cfg.server);
    return 0;
}

static void gw_destroy(void)
{
    char stats[8] = "";
    if (pscom_env_get("PSP_DEBUG_STATS", stats, sizeof(stats)) == 0 && atoi(stats) > 0) {
        list_head_t *p;
        list_for_each(p, &carriers)
        {
            carrier_t *c = list_entry(p, carrier_t, link);
            pscom_log(0, "stats: gw %s sent %llu msgs %llu bytes, received %llu msgs %llu bytes",
                      c->addr, (unsigned long long)c->msgs_sent, (unsigned long long)c->bytes_sent,
                      (unsigned long long)c->msgs_recv, (unsigned long long)c->bytes_recv);
        }
    }
    list_head_t *p, *n;
    if (teardown_on)
        pscom_poller_del(&teardown_poller);
    teardown_on = 0;
    list_for_each_safe(p, n, &carriers)
    {
        carrier_t *c = list_entry(p, carrier_t, link);
        list_del(&c->link);
        free(c);
    }
    gw_pool_free(&frag_pool);
    gw_routes_free();
    gw_ids_free(&tunnels);
}

static void gw_dump(FILE *out)
{
    list_head_t *p;
    list_for_each(p, &carriers)
    {
        carrier_t *c = list_entry(p, carrier_t, link);
        fprintf(out, "  gateway %s%s%s: sent %llu msgs %llu bytes, received %llu msgs %llu bytes\n",
                c->addr, c->authed ? "" : " (not authenticated)", c->failed ? " (failed)" : "",
                (unsigned long long)c->msgs_sent, (unsigned long long)c->bytes_sent,
                (unsigned long long)c->msgs_recv, (unsigned long long)c->bytes_recv);
    }
}

/* the priority is plugin.conf's (src/pscom/Makefile), which core reads without loading us */
#ifndef PSCOM_PLUGIN_PRIORITY
#error "PSCOM_PLUGIN_PRIORITY: built by src/pscom/Makefile from plugins/gw/plugin.conf"
#endif

static const pscom_plugin_t pscom_plugin_gw = {
    .name = "gw",
    .api_version = PSCOM_PLUGIN_API_VERSION,
    .priority = PSCOM_PLUGIN_PRIORITY,
    .rendezvous = GW_RNDV,
    .env = gw_env,
    .init = gw_init,
    .destroy = gw_destroy,
    .con_offer = gw_offer,
    .con_accept = gw_accept,
    .con_finish = gw_finish,
    .con_start = gw_start,
    .dump = gw_dump,
    .con_relay = gw_relay,
};
PSCOM_PLUGIN_DEFINE(pscom_plugin_gw);
