/* Connections: life cycle, identity, errors, orderly close. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "pscom_priv.h"

pscom_con_t *pscom_con_create(pscom_sock_t *sock)
{
    pscom_con_t *con = calloc(1, sizeof(*con) + sock->con_userdata_size);
    if (!con)
        return NULL;
    con->magic = CON_MAGIC;
    con->sock = sock;
    con->pub.socket = &sock->pub;
    con->pub.state = PSCOM_CON_STATE_NO_RW;
    con->pub.transport = "none";
    con->pub.userdata_size = sock->con_userdata_size;
    con->pub.userdata = sock->con_userdata_size ? (void *)(con + 1) : NULL;
    con->rndv_threshold = SIZE_MAX;
    con->fc_credit = FC_INITIAL;
    list_init(&con->fc_link);
    con->next_rndv_id = 1;
    list_init(&con->kick_link);
    list_init(&con->sendq);
    list_init(&con->held_sends);
    list_init(&con->recvq);
    list_init(&con->genq);
    list_init(&con->rndv_sends);
    list_init(&con->rndv_recvs);
    list_init(&con->fc_parked);
    list_add_tail(&con->next, &sock->cons);
    pscom_con_set_name(con);
    return con;
}

void pscom_con_set_name(pscom_con_t *con)
{
    const char *name = con->peer_name[0] ? con->peer_name : "?";
    const char *addr = con->peer_addr[0] ? con->peer_addr : "unknown";
    if (con->peer_pid)
        snprintf(con->log_name, sizeof(con->log_name), "%s (%s, %s pid %d)", name, addr,
                 con->peer_host, con->peer_pid);
    else
        snprintf(con->log_name, sizeof(con->log_name), "%s (%s)", name, addr);
}

pscom_con_t *pscom_con_find_by_addr(pscom_sock_t *sock, const char *addr)
{
    list_head_t *p;
    list_for_each(p, &sock->cons)
    {
        pscom_con_t *con = list_entry(p, pscom_con_t, next);
        /* a closed or broken connection must not shadow a new peer on the same ip:port */
        if (!con->user_closed && con->pub.state < PSCOM_CON_STATE_CLOSED &&
            !strcmp(con->peer_addr, addr))
            return con;
    }
    return NULL;
}

/* "ip:port@name" or "ip:port" -> addr "ip:port", name */
int pscom_ep_addr(const char *ep, char *addr, size_t addrlen, char *name, size_t namelen)
{
    if (!ep || !*ep || strlen(ep) >= PSCOM_EP_STR_MAX)
        return -1;
    const char *at = strchr(ep, '@');
    size_t alen = at ? (size_t)(at - ep) : strlen(ep);
    if (alen == 0 || alen >= addrlen || !memchr(ep, ':', alen))
        return -1;
    memcpy(addr, ep, alen);
    addr[alen] = '\0';
    /* strictly a.b.c.d:port, so that a typo fails here and not as a refused connection */
    char ip[INET_ADDRSTRLEN + 1];
    const char *colon = strrchr(addr, ':');
    size_t iplen = (size_t)(colon - addr);
    if (iplen == 0 || iplen >= sizeof(ip))
        return -1;
    memcpy(ip, addr, iplen);
    ip[iplen] = '\0';
    struct in_addr a;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (inet_pton(AF_INET, ip, &a) != 1 || *end || end == colon + 1 || port < 1 || port > 65535)
        return -1;
    const char *hash = at ? strchr(at, '#') : NULL;
    snprintf(name, namelen, "%.*s", at ? (int)(hash ? hash - at - 1 : (long)strlen(at + 1)) : 0,
             at ? at + 1 : "");
    return 0;
}

void pscom_key_hex(const uint8_t key[16], char hex[33])
{
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", key[i]);
}

int pscom_ep_key(const char *ep, uint8_t key[16])
{
    memset(key, 0, 16);
    const char *at = ep ? strchr(ep, '@') : NULL;
    const char *hash = at ? strchr(at, '#') : NULL;
    if (!hash || strlen(hash + 1) != 32)
        return -1;
    for (int i = 0; i < 16; i++) {
        unsigned v;
        if (sscanf(hash + 1 + 2 * i, "%2x", &v) != 1) {
            memset(key, 0, 16);
            return -1;
        }
        key[i] = (uint8_t)v;
    }
    return 0;
}

PSCOM_API pscom_connection_t *pscom_open_connection(pscom_socket_t *socket)
{
    pscom_lock();
    pscom_con_t *con = pscom_con_create(get_sock(socket));
    pscom_unlock();
    return con ? &con->pub : NULL;
}

/* The peer's own attempt, being accepted on a connection object of its own: it arrived before
   we knew the peer's address (pscom_connect), so it did not bind to con. */
static int incoming_from_peer(pscom_con_t *con)
{
    list_head_t *p;
    list_for_each(p, &con->sock->cons)
    {
        pscom_con_t *c = list_entry(p, pscom_con_t, next);
        if (c != con && c->accepted_new && c->precon && c->pub.state == PSCOM_CON_STATE_ACCEPTING &&
            !strcmp(c->peer_addr, con->peer_addr))
            return 1;
    }
    return 0;
}

void pscom_con_start_connect(pscom_con_t *con)
{
    con->pub.state = PSCOM_CON_STATE_CONNECTING;
    /* Our attempt would lose the tie-break to the peer's, which binds elsewhere, and then wait
       for nothing: start it once that one settled (the peer takes ours as a second connection) */
    con->connect_deferred = incoming_from_peer(con);
    if (con->connect_deferred) {
        PSCOM_LOG(4, "%s: the peer is connecting to us; ours waits for that", con->log_name);
        return;
    }
    if (!pscom_precon_connect(con))
        pscom_con_fail(con, PSCOM_OP_CONNECT, PSCOM_ERR_CONNECTION_REFUSED);
}

void pscom_con_start_deferred(pscom_sock_t *sock)
{
    /* one at a time, scanning anew: a connect that fails at once calls the user's error
       callback, which may close connections */
    for (;;) {
        pscom_con_t *start = NULL;
        list_head_t *p;
        list_for_each(p, &sock->cons)
        {
            pscom_con_t *con = list_entry(p, pscom_con_t, next);
            if (con->connect_deferred && con->pub.state == PSCOM_CON_STATE_CONNECTING &&
                !incoming_from_peer(con)) {
                start = con;
                break;
            }
        }
        if (!start)
            return;
        pscom_con_start_connect(start); /* clears connect_deferred */
    }
}

static int con_settled(void *arg)
{
    pscom_con_t *con = arg;
    return con->pub.state == PSCOM_CON_STATE_RW || con->pub.state >= PSCOM_CON_STATE_CLOSED;
}

PSCOM_API pscom_err_t pscom_con_connect_now(pscom_connection_t *connection)
{
    pscom_con_t *con = get_con(connection);
    pscom_lock();
    int ondemand = con->pub.state == PSCOM_CON_STATE_ONDEMAND;
    if (ondemand)
        pscom_con_start_connect(con);
    pscom_unlock();
    return ondemand ? PSCOM_SUCCESS : PSCOM_ERR_ALREADY;
}

PSCOM_API int pscom_con_settled(pscom_connection_t *connection)
{
    pscom_lock();
    int settled = con_settled(get_con(connection));
    pscom_unlock();
    return settled;
}

PSCOM_API pscom_err_t pscom_connect(pscom_connection_t *connection, const char *ep_str, int flags)
{
    pscom_con_t *con = get_con(connection);
    pscom_lock();
    if (con->pub.state != PSCOM_CON_STATE_NO_RW) {
        pscom_unlock();
        return PSCOM_ERR_ALREADY;
    }
    char name[PSCOM_NAME_MAX];
    if (pscom_ep_addr(ep_str, con->peer_addr, sizeof(con->peer_addr), name, sizeof(name)) != 0) {
        pscom_log(1, "pscom_connect: malformed endpoint string '%s' (want ip:port@name)",
                  ep_str ? ep_str : "(null)");
        pscom_unlock();
        return PSCOM_ERR_INVALID;
    }
    snprintf(con->peer_ep, sizeof(con->peer_ep), "%s", ep_str);
    snprintf(con->peer_name, sizeof(con->peer_name), "%s", name);
    pscom_ep_key(ep_str, con->peer_key); /* none: the handshake proves the zero key */
    pscom_con_set_name(con);
    /* an incoming connection from that peer may have arrived before we knew its address */
    con->pub.state = PSCOM_CON_STATE_ONDEMAND;
    con->pub.transport = "ondemand";
    if (flags & PSCOM_CON_FLAG_DIRECT) {
        pscom_con_start_connect(con);
        pscom_wait_until(con_settled, con);
    }
    pscom_err_t ret = PSCOM_SUCCESS;
    if (con->pub.state != PSCOM_CON_STATE_RW &&
        !(flags & PSCOM_CON_FLAG_ONDEMAND && con->pub.state < PSCOM_CON_STATE_CLOSED))
        ret = con->last_err ? con->last_err : PSCOM_ERR_CONNECTION_REFUSED;
    pscom_unlock();
    return ret;
}

void pscom_con_set_rendezvous(pscom_con_t *con, size_t threshold)
{
    con->rndv_threshold = threshold;
}

void pscom_con_set_data_align(pscom_con_t *con, uint32_t align, size_t min_len)
{
    if (align & (align - 1) || align > PAD_MAX + 1)
        pscom_fatal("pscom_con_set_data_align: %u is not a power of two up to %d", align,
                    PAD_MAX + 1);
    con->data_align = align;
    con->data_align_min = min_len;
}

void pscom_con_default_rendezvous(pscom_con_t *con, size_t threshold)
{
    if (!con->plugin || !pscom_plugin_rendezvous_user_set(con->plugin))
        con->rndv_threshold = threshold;
}

void pscom_con_established(pscom_con_t *con, const pscom_plugin_t *plugin, int fd)
{
    con->plugin = plugin;
    con->rndv_threshold = pscom_plugin_rendezvous(plugin);
    con->data_align = 0;
    plugin->con_start(con, fd);
    con->pub.transport = plugin->name;
    con->pub.state = PSCOM_CON_STATE_RW;
    pscom_stats.cons_opened++;
    pscom_fc_con_ready(con);
    const char *via = con->via[0] ? con->via : plugin->name;
    if (pscom_config.debug_contype)
        pscom_log(0, "CONNECT %s to %s from %s pid %d via %s", con->sock->pub.local_name,
                  con->log_name, pscom_global.hostname, (int)pscom_global.pid, via);
    else
        PSCOM_LOG(3, "connected to %s via %s", con->log_name, via);
    if (con->accepted_new && con->sock->pub.ops.con_accept) {
        con->accepted_new = 0;
        con->sock->pub.ops.con_accept(&con->pub);
    }
    if (!list_empty(&con->sendq) && con->pub.state == PSCOM_CON_STATE_RW)
        con->ops->write_start(con);
    if (con->tag_wait && con->pub.state == PSCOM_CON_STATE_RW)
        pscom_tag_con_ready(con);
    pscom_con_start_deferred(con->sock);
}

void pscom_con_set_transport(pscom_con_t *con, const pscom_con_ops_t *ops, void *data)
{
    con->ops = ops;
    con->tdata = data;
}

void pscom_con_set_via(pscom_con_t *con, const char *via)
{
    snprintf(con->via, sizeof(con->via), "%s", via ? via : "");
}

void *pscom_con_transport_data(pscom_con_t *con)
{
    return con->tdata;
}

int pscom_con_peer_pid(pscom_con_t *con)
{
    return con->peer_pid;
}

int pscom_con_peer_same_node(pscom_con_t *con)
{
    return con->peer_node == pscom_global.node_id;
}

const char *pscom_con_name(pscom_con_t *con)
{
    return con->log_name;
}

pscom_connection_t *pscom_con_pub(pscom_con_t *con)
{
    return &con->pub;
}

int pscom_con_closing(pscom_con_t *con)
{
    return con->user_closed;
}

static void close_transport(pscom_con_t *con)
{
    if (con->ops && !con->closed) {
        con->closed = 1;
        con->ops->close(con);
    }
}

/* The connection is unusable: fail what waits on it, tell the user once. */
void pscom_con_fail(pscom_con_t *con, pscom_op_t op, pscom_err_t err)
{
    if (con->precon)
        pscom_precon_destroy(con->precon);
    close_transport(con);
    con->pub.state = err == PSCOM_ERR_EOF ? PSCOM_CON_STATE_CLOSED : PSCOM_CON_STATE_ERROR;
    if (!con->last_err)
        con->last_err = err;
    if (err != PSCOM_ERR_EOF)
        pscom_stats.cons_failed++;
    pscom_con_fail_requests(con, err);
    if (!con->error_reported) {
        con->error_reported = 1;
        if (con->sock->pub.ops.con_error)
            con->sock->pub.ops.con_error(&con->pub, op, err);
    }
}

void pscom_con_transport_failed(pscom_con_t *con, pscom_op_t op, pscom_err_t err, const char *why)
{
    if (con->eof_received || con->user_closed) {
        /* the peer said goodbye first: an orderly close, nothing to report. A send still
           queued (the peer closed before taking it all) can never go now. */
        close_transport(con);
        pscom_con_fail_requests(con, PSCOM_ERR_EOF);
        return;
    }
    if (con->pub.state >= PSCOM_CON_STATE_CLOSED)
        return;
    pscom_log(1, "connection to %s via %s lost: %s", con->log_name,
              con->via[0] ? con->via : con->pub.transport, why);
    pscom_con_fail(con, op, err);
}

void pscom_con_free(pscom_con_t *con)
{
    if (con->precon)
        pscom_precon_destroy(con->precon);
    close_transport(con);
    pscom_con_fail_requests(con, PSCOM_ERR_EOF);
    pscom_con_drop_generated(con);
    pscom_fc_con_free(con);
    free(con->rs.hbuf);
    list_del(&con->kick_link);
    list_del(&con->next);
    con->magic = 0;
    free(con);
}

static uint64_t now_ms(void)
{
    return pscom_now_ns() / 1000000;
}

typedef struct flush_wait {
    pscom_con_t *con;
    uint64_t deadline_ms; /* 0: none */
    int timed_out;
} flush_wait_t;

static int flushed(void *arg)
{
    flush_wait_t *f = arg;
    pscom_con_t *con = f->con;
    if (con->pub.state != PSCOM_CON_STATE_RW)
        return 1;
    /* nothing queued here, and nothing the transport holds that only our progress sends */
    if (list_empty(&con->sendq) && list_empty(&con->held_sends) && list_empty(&con->rndv_sends) &&
        (con->closed || !con->ops || !con->ops->flushed || con->ops->flushed(con)))
        return 1;
    if (f->deadline_ms && now_ms() > f->deadline_ms)
        return f->timed_out = 1;
    return 0;
}

PSCOM_API void pscom_close_connection(pscom_connection_t *connection)
{
    pscom_con_t *con = get_con(connection);
    pscom_lock();
    if (con->magic != CON_MAGIC)
        pscom_fatal("pscom_close_connection: not a connection (%p)", (void *)connection);
    con->user_closed = 1;
    if (con->pub.state == PSCOM_CON_STATE_RW) {
        pscom_send_ctrl(con, MSGTYPE_EOF, NULL, 0, NULL, 0);
        con->eof_sent = 1;
        unsigned timeout = pscom_config.shutdown_timeout_ms;
        if (!timeout && !pscom_global.initialized)
            timeout = 5000; /* at exit: a stuck peer must not keep us alive */
        flush_wait_t f = {.con = con, .deadline_ms = timeout ? now_ms() + timeout : 0};
        pscom_wait_until(flushed, &f);
        if (f.timed_out)
            pscom_log(1,
                      "closing %s: peer did not take our last messages within %u ms; "
                      "dropping them",
                      con->log_name, timeout);
    }
    pscom_con_free(con);
    pscom_unlock();
}

PSCOM_API void pscom_con_info(pscom_connection_t *connection, pscom_con_info_t *info)
{
    pscom_con_t *con = get_con(connection);
    memset(info, 0, sizeof(*info));
    snprintf(info->transport, sizeof(info->transport), "%s", con->pub.transport);
    snprintf(info->peer_ep, sizeof(info->peer_ep), "%s", con->peer_ep);
    snprintf(info->peer_name, sizeof(info->peer_name), "%s", con->peer_name);
    snprintf(info->peer_host, sizeof(info->peer_host), "%s", con->peer_host);
    info->peer_pid = con->peer_pid;
    info->state = con->pub.state;
}

PSCOM_API const char *pscom_con_str(pscom_connection_t *connection)
{
    static __thread char buf[PSCOM_NAME_MAX + PSCOM_EP_STR_MAX + 64];
    pscom_con_t *con = get_con(connection);
    snprintf(buf, sizeof(buf), "%s via %s", con->log_name, con->pub.transport);
    return buf;
}
