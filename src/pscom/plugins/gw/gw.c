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
#include "gw_priv.h"

#define GW_RNDV (1u << 20) /* as tcp: larger messages wait for the matching receive */

gw_cfg_t gw_cfg;

static const pscom_env_row_t gw_env[] = {
    {"PSP_GW_SERVER", "",
     "Route file of the gateways (psgwd) that join this job's networks: lines "
     "'ADDR:PORT[,ADDR:PORT] NODE-PATTERN NODE-PATTERN' and 'key PATH'. Empty: no gateway.",
     PSCOM_ENV_STR, &gw_cfg.server, 0, 0},
    {"PSP_GW_KEY", "",
     "The job's key file for the gateways (mode 0600); empty: the route file's 'key' line.",
     PSCOM_ENV_STR, &gw_cfg.key_path, 0, 0},
    {"PSP_GW_MTU", "256k",
     "Largest fragment a gateway connection sends: the gateway forwards a fragment while the "
     "next one arrives.",
     PSCOM_ENV_SIZE, &gw_cfg.mtu, 0, 0},
    {"PSP_GW_TOKENS", "16",
     "Fragments in flight per gateway connection (credits; 0: no limit, the gateway may then "
     "buffer without bound behind a slow receiver).",
     PSCOM_ENV_UINT, &gw_cfg.tokens, 0, 0},
    {NULL, NULL, NULL, 0, NULL, 0, 0},
};

pscom_socket_t *gw_sock;
list_head_t gw_carriers = LIST_HEAD_INIT(gw_carriers);
list_head_t gw_waiting_open = LIST_HEAD_INIT(gw_waiting_open);
gw_ids_t gw_tunnels;
uint8_t gw_key[GW_KEY_MAX];
size_t gw_key_len;

tunnel_t *tunnel_get(uint64_t id)
{
    return gw_ids_get(&gw_tunnels, id);
}

tunnel_t *tunnel_new(carrier_t *c)
{
    tunnel_t *t = calloc(1, sizeof(*t));
    if (!t || !(t->id = gw_ids_add(&gw_tunnels, t))) {
        free(t);
        return NULL;
    }
    t->carrier = c;
    t->fd = t->core_fd = -1;
    t->credits = gw_cfg.tokens;
    t->pending_tail = &t->pending;
    list_init(&t->waiting);
    return t;
}

/* ---- gw_tunnels ---- */

void tunnel_free(tunnel_t *t)
{
    if (t->ufd.handler) /* registered from pump_start on (an opening tunnel is not yet) */
        pscom_ufd_del(&t->ufd);
    if (t->fd >= 0)
        close(t->fd);
    while (t->pending) {
        pscom_request_t *req = t->pending;
        t->pending = gw_buf(req)->next;
        frag_put(req);
    }
    list_del(&t->waiting);
    gw_ids_del(&gw_tunnels, t->id);
    free(t);
}

/* The other side closed the tunnel, or its carrier failed: core learns it from the connection
   (a transport failure; silent after the peer's EOF) or, during the handshake, from its stream
   ending. */
void tunnel_down(tunnel_t *t, int error, const char *why)
{
    t->peer_gone = 1;
    if (!error && t->state == T_HANDSHAKE) {
        /* the peer finished the handshake, sent its messages and closed, all before our core
           read the handshake's last frame: keep the tunnel (and the data it holds) for
           gw_start, which then reports the close; our pump frees it if core gives up */
        t->peer_closed = 1;
        /* core reads what came, then the end of the stream: a handshake the peer completed
           goes on to gw_start; one it abandoned (it lost a simultaneous connect after sending
           its HELLO, which reached us only once our own connection stood) ends here instead
           of binding a second connection to that peer */
        if (t->fd >= 0)
            shutdown(t->fd, SHUT_WR);
        return;
    }
    if (t->state == T_DATA && t->con && t->ahead && !t->carrier->failed) {
        /* fragments sent from the user's buffer are still queued on the healthy carrier:
           failing the connection now would complete their send requests and free the
           buffer under the carrier (EFAULT, or a garbled carrier stream); frag_sent ends it */
        t->down_deferred = 1;
        t->down_error = error;
        snprintf(t->down_why, sizeof(t->down_why), "%s", why);
        return;
    }
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

void pump_start(tunnel_t *t)
{
    t->state = T_HANDSHAKE;
    t->ufd = (pscom_ufd_t){.fd = t->fd, .events = EPOLLIN, .handler = pump_handler, .priv = t};
    pscom_ufd_add(&t->ufd);
}

int write_all(int fd, const char *p, size_t len)
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
    pscom_request_t *req = frag_get(gw_cfg.mtu);
    if (!req)
        return 0;
    char *buf = gw_buf(req)->data;
    size_t len = 0;
    uint64_t id = t->id;
    while (n && len < gw_cfg.mtu) {
        size_t took = 0;
        for (int k = 0; k < n && len < gw_cfg.mtu; k++) {
            if (k == n - 1 && iov[k].iov_len >= DIRECT_MIN && (len || k))
                break; /* a large message's data: a fragment of its own, from its buffer */
            size_t c = iov[k].iov_len < gw_cfg.mtu - len ? iov[k].iov_len : gw_cfg.mtu - len;
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
        n = len < gw_cfg.mtu ? pscom_write_get_iov(con, iov) : 0;
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
void gw_write_start(pscom_con_t *con)
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
        while ((!gw_cfg.tokens || t->credits > 0) && tunnel_get(id) == t && !t->peer_gone) {
            struct iovec iov[3];
            int n = iov_skip(iov, pscom_write_get_iov(con, iov), t->ahead);
            if (!n)
                break; /* nothing, or the head message is all posted: its sends complete it */
            if (n == 1 && (t->ahead || iov[0].iov_len >= DIRECT_MIN)) {
                /* data from the user's buffer: written once the carrier has sent it */
                size_t len = iov[0].iov_len < gw_cfg.mtu ? iov[0].iov_len : gw_cfg.mtu;
                pscom_request_t *req = frag_get(0);
                if (!req)
                    break;
                gw_buf(req)->direct = len;
                t->ahead += len;
                if (gw_cfg.tokens)
                    t->credits--;
                send_frag(t, req, iov[0].iov_base, len);
                continue;
            }
            if (!send_gathered(t, con, iov, n))
                break;
            if (gw_cfg.tokens && tunnel_get(id) == t)
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
    for (uint32_t i = 0; i < gw_tunnels.n; i++) {
        tunnel_t *t = gw_tunnels.obj[i];
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
            pscom_log(1, "gw: no gateway in %s reaches %s", gw_cfg.server, addr);
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
        list_add_tail(&t->waiting, &gw_waiting_open);
    return sv[1];
}

static int gw_offer(pscom_con_t *con, void *blob, size_t *len)
{
    (void)blob;
    *len = 0;
    return tunnel_by_con(con) ? 0 : -1;
}

static int gw_accept(pscom_con_t *con, const void *offer, size_t offer_len, void *blob, size_t *len)
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
    for (uint32_t i = 0; i < gw_tunnels.n && !t; i++) {
        tunnel_t *x = gw_tunnels.obj[i];
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
    uint64_t id = t->id;
    pump_handler(&t->ufd, EPOLLIN);
    if (tunnel_get(id) != t) {
        close(fd); /* core's end reached EOF: the tunnel is gone */
        pscom_con_transport_failed(con, PSCOM_OP_CONNECT, PSCOM_ERR_IOERROR,
                                   "gw: the tunnel closed during the handshake");
        return;
    }
    pscom_ufd_del(&t->ufd);
    t->ufd.handler = NULL;
    close(t->fd);
    close(fd);
    t->fd = t->core_fd = -1;
    t->con = con;
    t->state = T_DATA;
    char via[GW_ADDR_MAX + 8];
    snprintf(via, sizeof(via), "gw %s", t->carrier->addr);
    pscom_con_set_via(con, via);
    pscom_con_set_transport(con, &gw_con_ops, t);
    while (tunnel_get(id) == t && t->pending && t->con) {
        pscom_request_t *req = t->pending;
        t->pending = gw_buf(req)->next;
        if (!t->pending)
            t->pending_tail = &t->pending;
        feed(t, req);
        frag_put(req);
    }
    if (tunnel_get(id) != t)
        return; /* a callback of what was fed closed the connection */
    if (t->peer_closed) {
        pscom_con_transport_failed(con, PSCOM_OP_READ, PSCOM_ERR_EOF, "closed by the peer");
        return;
    }
    return_credits(t);
}

static int gw_init(void)
{
    if (!gw_cfg.server || !*gw_cfg.server) {
        pscom_plugin_set_status("gw", "no route file (PSP_GW_SERVER)");
        return -1;
    }
    char key_path[1024] = "", why[256];
    if (gw_routes_load(gw_cfg.server, key_path, sizeof(key_path), why, sizeof(why)) != 0) {
        pscom_log(1, "gw: PSP_GW_SERVER: %s; no gateway connections", why);
        pscom_plugin_set_status("gw", "PSP_GW_SERVER: %s", why);
        return -1;
    }
    if (gw_cfg.key_path && *gw_cfg.key_path)
        snprintf(key_path, sizeof(key_path), "%s", gw_cfg.key_path);
    if (!key_path[0]) {
        pscom_log(1, "gw: no job key for the gateways: set PSP_GW_KEY or a 'key' line in %s",
                  gw_cfg.server);
        pscom_plugin_set_status("gw", "no job key (PSP_GW_KEY)");
        return -1;
    }
    if (pscom_key_load(key_path, gw_key, sizeof(gw_key), &gw_key_len, why, sizeof(why)) != 0) {
        pscom_log(1, "gw: job key %s: %s", key_path, why);
        pscom_plugin_set_status("gw", "job key %s: %s", key_path, why);
        return -1;
    }
    if (gw_cfg.mtu < 1024)
        gw_cfg.mtu = 1024;
    gw_sock = pscom_open_socket(0, sizeof(carrier_t *));
    if (!gw_sock)
        return -1;
    pscom_socket_set_name(gw_sock, "gw");
    gw_sock->ops.con_accept = gw_con_accept;
    gw_sock->ops.con_error = gw_con_error;
    gw_sock->ops.default_recv = gw_default_recv;
    pscom_socket_serve(gw_sock, GW_SERVICE);
    pscom_plugin_set_status("gw", "%d routes in %s", gw_routes_count(), gw_cfg.server);
    return 0;
}

static void gw_destroy(void)
{
    char stats[8] = "";
    if (pscom_env_get("PSP_DEBUG_STATS", stats, sizeof(stats)) == 0 && atoi(stats) > 0) {
        list_head_t *p;
        list_for_each(p, &gw_carriers)
        {
            carrier_t *c = list_entry(p, carrier_t, link);
            pscom_log(0, "stats: gw %s sent %llu msgs %llu bytes, received %llu msgs %llu bytes",
                      c->addr, (unsigned long long)c->msgs_sent, (unsigned long long)c->bytes_sent,
                      (unsigned long long)c->msgs_recv, (unsigned long long)c->bytes_recv);
        }
    }
    carriers_free();
    gw_routes_free();
    gw_ids_free(&gw_tunnels);
}

static void gw_dump(FILE *out)
{
    list_head_t *p;
    list_for_each(p, &gw_carriers)
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

const pscom_plugin_t pscom_plugin_gw = {
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
