/*
 * Tag matching in the transport (pscom.h): the socket's tagged messages go straight to the one
 * transport that carries all its connections and matches them itself (ucp: UCX's tag matching).
 * Core only routes, and keeps the sends to a connection that is still being made until it is
 * up, in order.
 */
#include <stdlib.h>
#include "pscom_priv.h"

typedef struct tag_wait {
    struct tag_wait *next;
    uint64_t tag;
    const void *buf;
    size_t len;
    int sync;
    void *user;
    int rc; /* of the transport's send, once the connection is up */
} tag_wait_t;

static pscom_sock_t *tag_sock; /* the transport's queues are the process's: one socket */
static pscom_tag_done_t tag_done;

PSCOM_API int pscom_socket_tag_matching(pscom_socket_t *socket, pscom_tag_done_t done,
                                        unsigned flags)
{
    pscom_sock_t *sock = get_sock(socket);
    char why[160] = "";
    pscom_lock();
    if (!sock->tag_plugin) {
        const pscom_plugin_t *p = NULL;
        if (tag_sock)
            snprintf(why, sizeof(why), "another socket of this process matches in %s",
                     tag_sock->tag_plugin->name);
        else if (!list_empty(&sock->cons))
            snprintf(why, sizeof(why), "the socket has connections already");
        else if (!done)
            snprintf(why, sizeof(why), "no completion callback");
        else
            p = pscom_plugin_tag_transport(why, sizeof(why));
        if (p) {
            p->tag->enable(done, flags);
            tag_done = done;
            sock->tag_plugin = p;
            tag_sock = sock;
            PSCOM_LOG(2, "%s: tagged messages are matched by %s", sock->pub.local_name, p->name);
        } else {
            PSCOM_LOG(2, "%s: tagged messages are matched by pscom: %s", sock->pub.local_name, why);
        }
    }
    int on = sock->tag_plugin != NULL;
    pscom_unlock();
    return on;
}

PSCOM_API int pscom_socket_tag_on(pscom_socket_t *socket)
{
    return get_sock(socket)->tag_plugin != NULL;
}

/* the socket closes (pscom_sock.c): its transport may serve another one */
void pscom_tag_sock_closed(pscom_sock_t *sock)
{
    if (tag_sock == sock)
        tag_sock = NULL;
}

int pscom_con_tag_on(pscom_con_t *con)
{
    return con->sock->tag_plugin != NULL;
}

void pscom_con_set_tag_ep(pscom_con_t *con, void *ep)
{
    con->tag_ep = ep;
}

/* Not (yet) a connection of the tag transport, or sends wait already: wait too, or fail. */
static __attribute__((noinline)) int send_later(pscom_con_t *con, uint64_t tag, const void *buf,
                                                size_t len, int sync, void *user)
{
    const pscom_plugin_t *p = con->sock->tag_plugin;
    if (!p)
        return PSCOM_ERR_INVALID;
    switch (con->pub.state) {
    case PSCOM_CON_STATE_ONDEMAND:
        pscom_con_start_connect(con);
        if (con->pub.state >= PSCOM_CON_STATE_CLOSING)
            return con->last_err ? con->last_err : PSCOM_ERR_CONNECTION_REFUSED;
        break;
    case PSCOM_CON_STATE_CONNECTING:
    case PSCOM_CON_STATE_ACCEPTING:
        break;
    case PSCOM_CON_STATE_RW:
        if (con->plugin != p)
            return PSCOM_ERR_INVALID;
        if (!con->tag_wait && con->tag_ep)
            return p->tag->send(con->tag_ep, tag, buf, len, sync, user);
        if (!con->tag_wait)
            return PSCOM_ERR_IOERROR; /* the transport let go of it */
        break;                        /* behind the ones that wait */
    case PSCOM_CON_STATE_NO_RW:
        return PSCOM_ERR_INVALID;
    default: /* closing, closed, failed */
        return con->last_err ? con->last_err : PSCOM_ERR_EOF;
    }
    tag_wait_t *w = malloc(sizeof(*w));
    if (!w)
        return PSCOM_ERR_NOMEM;
    *w = (tag_wait_t){.tag = tag, .buf = buf, .len = len, .sync = sync, .user = user};
    if (!con->tag_wait)
        con->tag_wait_tail = &con->tag_wait;
    *con->tag_wait_tail = w;
    con->tag_wait_tail = &w->next;
    return 0;
}

static __attribute__((noinline)) int send_locked(pscom_con_t *con, uint64_t tag, const void *buf,
                                                 size_t len, int sync, void *user)
{
    pscom_lock();
    int rc = send_later(con, tag, buf, len, sync, user);
    pscom_unlock();
    return rc;
}

/* tag_ep is set only on an established connection of the tag transport (its con_start) */
PSCOM_API int pscom_tag_send(pscom_connection_t *connection, uint64_t tag, const void *buf,
                             size_t len, int sync, void *user)
{
    pscom_con_t *con = get_con(connection);
    if (likely(con->tag_ep && !con->tag_wait && !pscom_global.threaded))
        return con->sock->tag_plugin->tag->send(con->tag_ep, tag, buf, len, sync, user);
    return send_locked(con, tag, buf, len, sync, user);
}

static tag_wait_t *take_waiting(pscom_con_t *con)
{
    tag_wait_t *w = con->tag_wait;
    con->tag_wait = NULL;
    con->tag_wait_tail = &con->tag_wait;
    return w;
}

void pscom_tag_con_ready(pscom_con_t *con)
{
    const pscom_plugin_t *p = con->sock->tag_plugin;
    if (!con->tag_wait)
        return;
    if (con->plugin != p) {
        pscom_tag_con_failed(con); /* cannot happen: precon offers only p */
        return;
    }
    /* all of them to the transport before any done(): a done() that sends on this connection
       must not overtake those still waiting */
    tag_wait_t *list = take_waiting(con);
    for (tag_wait_t *w = list; w; w = w->next)
        w->rc = con->tag_ep ? p->tag->send(con->tag_ep, w->tag, w->buf, w->len, w->sync, w->user)
                            : PSCOM_ERR_IOERROR;
    for (tag_wait_t *w = list, *next; w; w = next) {
        next = w->next;
        if (w->rc != 0)
            tag_done(w->user, w->rc > 0 ? PSCOM_TAG_DONE : PSCOM_TAG_FAILED, NULL);
        free(w);
    }
}

void pscom_tag_con_failed(pscom_con_t *con)
{
    for (tag_wait_t *w = take_waiting(con), *next; w; w = next) {
        next = w->next;
        tag_done(w->user, PSCOM_TAG_FAILED, NULL);
        free(w);
    }
}

static __attribute__((noinline)) int recv_locked(pscom_socket_t *socket, uint64_t tag,
                                                 uint64_t mask, void *buf, size_t len, void *user,
                                                 void **op)
{
    const pscom_plugin_t *p = get_sock(socket)->tag_plugin;
    pscom_lock();
    int rc = p->tag->recv(socket, tag, mask, buf, len, user, op);
    pscom_unlock();
    return rc;
}

/* the unthreaded case passes its arguments on as they are: a jump into the transport */
PSCOM_API int pscom_tag_recv(pscom_socket_t *socket, uint64_t tag, uint64_t mask, void *buf,
                             size_t len, void *user, void **op)
{
    const pscom_plugin_t *p = get_sock(socket)->tag_plugin;
    if (unlikely(!p))
        return PSCOM_ERR_INVALID;
    if (likely(!pscom_global.threaded))
        return p->tag->recv(socket, tag, mask, buf, len, user, op);
    return recv_locked(socket, tag, mask, buf, len, user, op);
}

PSCOM_API int pscom_tag_probe(pscom_socket_t *socket, uint64_t tag, uint64_t mask,
                              pscom_tag_info_t *info, void **msg)
{
    const pscom_plugin_t *p = get_sock(socket)->tag_plugin;
    if (!p)
        return 0;
    pscom_lock();
    int found = p->tag->probe(tag, mask, info, msg);
    pscom_unlock();
    return found;
}

PSCOM_API int pscom_tag_msg_recv(pscom_socket_t *socket, void *msg, void *buf, size_t len,
                                 void *user)
{
    const pscom_plugin_t *p = get_sock(socket)->tag_plugin;
    if (!p)
        return PSCOM_ERR_INVALID;
    pscom_lock();
    int rc = p->tag->msg_recv(msg, buf, len, user);
    pscom_unlock();
    return rc;
}

PSCOM_API void pscom_tag_cancel(pscom_socket_t *socket, void *op)
{
    const pscom_plugin_t *p = get_sock(socket)->tag_plugin;
    if (!p || !op)
        return;
    pscom_lock();
    p->tag->cancel(op);
    pscom_unlock();
}
