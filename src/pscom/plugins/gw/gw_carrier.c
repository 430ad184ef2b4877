/*
 * gw transport: the gw_carriers, a process's connections to the gateways (psgwd) that its
 * gw_tunnels go through. Sending on them, the challenge-response with the job's gw_key, and
 * receiving: every carrier message lands in a fragment and is handled in sequence order
 * (gw_proto.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "gw_priv.h"

static pscom_request_t *frag_pool;

/* ---- fragments: pscom requests with a buffer of their own (gw_buf_t) ---- */

pscom_request_t *frag_get(size_t len)
{
    return gw_pool_get(&frag_pool, len);
}

/* keeps buffers up to the MTU; an unusually large one goes */
void frag_put(pscom_request_t *req)
{
    gw_pool_put(&frag_pool, req, gw_cfg.mtu + 4096);
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
void send_ctrl(carrier_t *c, gw_msg_t *h, const void *data, size_t len)
{
    if (c->failed)
        return;
    h->seq = c->send_seq++;
    c->msgs_sent++;
    c->bytes_sent += len;
    pscom_send(c->con, h, sizeof(*h), data, len);
}

void tunnel_ctrl(tunnel_t *t, int type, uint16_t flags, const void *data, size_t len)
{
    gw_msg_t h;
    set_hdr(&h, type, t);
    h.flags = flags;
    send_ctrl(t->carrier, &h, data, len);
}

static void frag_sent(pscom_request_t *req)
{
    tunnel_t *t = tunnel_get(gw_buf(req)->tunnel);
    size_t direct = gw_buf(req)->direct;
    int sent = pscom_req_successful(req);
    frag_put(req);
    if (!t)
        return;
    t->inflight--;
    if (direct && t->down_deferred) {
        t->ahead -= direct;
        if (!t->ahead) {
            t->down_deferred = 0;
            tunnel_down(t, t->down_error, t->down_why);
        }
        return;
    }
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
void send_frag(tunnel_t *t, pscom_request_t *req, void *data, size_t len)
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

/* ---- gw_carriers ---- */

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
    list_add_tail(&c->link, &gw_carriers);
    carrier_challenge(c);
    return c;
}

carrier_t *carrier_to(const char *addr)
{
    list_head_t *p;
    list_for_each(p, &gw_carriers)
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

void send_open(tunnel_t *t)
{
    gw_open_t o;
    memset(&o, 0, sizeof(o));
    snprintf(o.target, sizeof(o.target), "%s", t->target);
    char host[64] = "";
    gethostname(host, sizeof(host) - 1);
    snprintf(o.origin, sizeof(o.origin), "%s on %s pid %d",
             pscom_con_pub(t->con)->socket->local_name, host, (int)getpid());
    tunnel_ctrl(t, GW_OPEN, 0, &o, sizeof(o));
}

/* The carrier failed: every tunnel through it fails */
/* Tunnels of failed gw_carriers end from a poller, outside the plugin's own calls: a carrier
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
    list_for_each(pos, &gw_carriers)
    {
        carrier_t *c = list_entry(pos, carrier_t, link);
        if (!c->failed || c->torn_down)
            continue;
        c->torn_down = 1;
        for (uint32_t i = 0; i < gw_tunnels.n; i++) {
            tunnel_t *t = gw_tunnels.obj[i];
            if (t && t->carrier == c)
                tunnel_down(t, 1, c->reason);
        }
    }
    return 1;
}

void carrier_failed(carrier_t *c, const char *why)
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

void gw_con_error(pscom_connection_t *con, pscom_op_t op, pscom_err_t err)
{
    (void)op;
    carrier_t *c = *(carrier_t **)con->userdata;
    if (c)
        carrier_failed(c, err == PSCOM_ERR_EOF                  ? "it closed the connection"
                          : err == PSCOM_ERR_CONNECTION_REFUSED ? "connection refused"
                                                                : "connection broken");
}

void gw_con_accept(pscom_connection_t *con)
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

void feed(tunnel_t *t, pscom_request_t *req)
{
    t->owed++; /* before: what core calls back may close the connection and free t */
    pscom_read_feed(t->con, gw_buf(req)->data, req->data_len);
}

void return_credits(tunnel_t *t)
{
    /* a sender waits for credits only when it has used them all: return them before that */
    if (gw_cfg.tokens && t->owed >= (gw_cfg.tokens + 1) / 2 && t->carrier && !t->peer_gone)
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
        gw_auth_mac(gw_key, gw_key_len, c->role, data, mac);
        set_hdr(&r, GW_RESPONSE, NULL);
        send_ctrl(c, &r, mac, sizeof(mac));
        return 0;
    }
    if (h->type == GW_RESPONSE) {
        uint8_t mac[GW_MAC_LEN];
        gw_auth_mac(gw_key, gw_key_len, c->role == 'C' ? 'A' : 'C', c->nonce, mac);
        if (len != GW_MAC_LEN || !pscom_auth_equal(mac, data, GW_MAC_LEN)) {
            carrier_failed(c, "it does not know this job's key (PSP_GW_KEY)");
            return -2;
        }
        c->authed = 1;
        list_head_t *p, *n;
        list_for_each_safe(p, n, &gw_waiting_open)
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
        if (t->state == T_DATA)
            return -1; /* the handshake is over: the connection owns the tunnel now */
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
    if (!pscom_req_successful(req) || !c || c->failed || req->xheader_len != sizeof(gw_msg_t)) {
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

pscom_request_t *gw_default_recv(pscom_connection_t *con, pscom_header_net_t *header)
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

/* at the plugin's end: the carriers' memory and the fragments' pool */
void carriers_free(void)
{
    list_head_t *p, *n;
    if (teardown_on)
        pscom_poller_del(&teardown_poller);
    teardown_on = 0;
    list_for_each_safe(p, n, &gw_carriers)
    {
        carrier_t *c = list_entry(p, carrier_t, link);
        list_del(&c->link);
        free(c);
    }
    gw_pool_free(&frag_pool);
}
