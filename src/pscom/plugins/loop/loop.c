/*
 * loop transport: a connection of a process to itself (an MPI rank sending to itself, two
 * sockets of one process). Its two ends are two connections of this process; what one end
 * writes is fed to the other in the next progress round, from the sender's buffers straight
 * into the matched receive. Before, such messages took the first transport that served the
 * peer: a shm ring, or with shm off a TCP round trip through the kernel's loopback.
 *
 * The handshake still runs over TCP, once: both sides take a peer on this node with this pid
 * (core's handshake identity), and the offer's token names which of this process's pending
 * offers the accepting end pairs with. The handshake socket is closed at start, as nothing can
 * fail between the ends but the process itself.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "pscom_plugin.h"

#define LOOP_MAGIC 0x6c6f6f70u /* "loop" */

typedef struct {
    uint32_t magic;
    uint32_t pad;
    uint64_t token;
} loop_offer_t;

typedef struct loop_end loop_end_t;
struct loop_end {
    pscom_con_t *con;
    loop_end_t *peer;      /* the other end; NULL once that closed */
    loop_end_t *next_wait; /* offers waiting for their accept (connecting side) */
    loop_end_t *next_out;  /* ends with something to write */
    uint64_t token;
    int started, queued, busy, dead;
};

static loop_end_t *offers; /* connecting ends between offer and accept */
static loop_end_t *out;    /* ends whose send queue is not empty */
static pscom_poller_t poller;
static int poller_on;

static void end_free(loop_end_t *e)
{
    if (e->busy || e->queued) {
        e->dead = 1; /* the poller frees it */
        return;
    }
    free(e);
}

static void unlink_offer(loop_end_t *e)
{
    for (loop_end_t **p = &offers; *p; p = &(*p)->next_wait)
        if (*p == e) {
            *p = e->next_wait;
            return;
        }
}

static void queue_out(loop_end_t *e)
{
    if (e->queued)
        return;
    e->queued = 1;
    e->next_out = out;
    out = e;
}

/* Hand what e's connection has queued to the other end. Nonzero if anything moved. */
static int flush(loop_end_t *e)
{
    struct iovec iov[3];
    int n, made = 0;
    while (!e->dead && e->peer && e->peer->started && (n = pscom_write_get_iov(e->con, iov)) > 0) {
        size_t total = 0;
        for (int i = 0; i < n && e->peer; i++) {
            if (iov[i].iov_len)
                pscom_read_feed(e->peer->con, iov[i].iov_base, iov[i].iov_len);
            total += iov[i].iov_len;
        }
        if (!e->dead)
            pscom_write_done(e->con, total);
        made = 1;
    }
    if (!e->dead && !e->peer && pscom_write_pending(e->con))
        pscom_con_transport_failed(e->con, PSCOM_OP_WRITE, PSCOM_ERR_IOERROR,
                                   "the other end of the loop connection is closed");
    return made;
}

static int loop_poll(pscom_poller_t *p)
{
    (void)p;
    int made = 0;
    /* the list is taken whole: feeding may complete receives whose callbacks send again */
    loop_end_t *list = out;
    out = NULL;
    while (list) {
        loop_end_t *e = list;
        list = e->next_out;
        e->queued = 0;
        e->busy++;
        made |= flush(e);
        e->busy--;
        if (e->dead)
            end_free(e); /* what waits for an end not started yet: loop_start queues it */
    }
    return made;
}

static int loop_prepare_block(pscom_poller_t *p)
{
    (void)p;
    return out != NULL;
}

static void loop_write_start(pscom_con_t *con)
{
    queue_out(pscom_con_transport_data(con));
}

static void loop_close(pscom_con_t *con)
{
    loop_end_t *e = pscom_con_transport_data(con);
    if (e->peer) {
        e->peer->peer = NULL;
        if (e->peer->started && pscom_write_pending(e->peer->con))
            queue_out(e->peer); /* fails what it still has for us */
    }
    e->peer = NULL;
    end_free(e);
}

static const pscom_con_ops_t loop_ops = {
    .write_start = loop_write_start,
    .close = loop_close,
};

/* The peer is this process (what its handshake said about itself). */
static int is_self(pscom_con_t *con)
{
    return pscom_con_peer_pid(con) == getpid() && pscom_con_peer_same_node(con);
}

static int loop_offer(pscom_con_t *con, void *blob, size_t *len)
{
    static uint64_t tokens;
    if (!is_self(con))
        return -1;
    loop_end_t *e = calloc(1, sizeof(*e));
    if (!e)
        return -1;
    e->con = con;
    e->token = ++tokens;
    e->next_wait = offers;
    offers = e;
    loop_offer_t o = {.magic = LOOP_MAGIC, .token = e->token};
    memcpy(blob, &o, sizeof(o));
    *len = sizeof(o);
    pscom_con_set_transport(con, NULL, e); /* pending until start or abort */
    return 0;
}

static int loop_accept(pscom_con_t *con, const void *offer, size_t offer_len, void *blob,
                       size_t *len)
{
    loop_offer_t o;
    *len = 0;
    if (!is_self(con) || offer_len != sizeof(o))
        return -1;
    memcpy(&o, offer, sizeof(o));
    if (o.magic != LOOP_MAGIC)
        return -1;
    loop_end_t *a = offers;
    while (a && (a->token != o.token || a->peer))
        a = a->next_wait;
    if (!a)
        return -1; /* no such offer pending here */
    loop_end_t *b = calloc(1, sizeof(*b));
    if (!b)
        return -1;
    b->con = con;
    b->token = a->token;
    a->peer = b;
    b->peer = a;
    memcpy(blob, &o.token, sizeof(o.token));
    *len = sizeof(o.token);
    pscom_con_set_transport(con, NULL, b);
    return 0;
}

static int loop_finish(pscom_con_t *con, const void *reply, size_t reply_len)
{
    loop_end_t *e = pscom_con_transport_data(con);
    uint64_t token;
    if (!e || reply_len != sizeof(token))
        return -1;
    memcpy(&token, reply, sizeof(token));
    return token == e->token && e->peer ? 0 : -1;
}

static void loop_abort(pscom_con_t *con)
{
    loop_end_t *e = pscom_con_transport_data(con);
    pscom_con_set_transport(con, NULL, NULL);
    if (!e)
        return;
    unlink_offer(e);
    if (e->peer)
        e->peer->peer = NULL;
    e->peer = NULL;
    end_free(e);
}

static void loop_start(pscom_con_t *con, int fd)
{
    loop_end_t *e = pscom_con_transport_data(con);
    close(fd); /* nothing to watch: both ends live and die with this process */
    unlink_offer(e);
    e->started = 1;
    pscom_con_set_transport(con, &loop_ops, e);
    if (!poller_on) {
        poller = (pscom_poller_t){.poll = loop_poll, .prepare_block = loop_prepare_block};
        pscom_poller_add(&poller);
        poller_on = 1;
    }
    if (e->peer && e->peer->started) { /* the other end may have written already */
        queue_out(e);
        queue_out(e->peer);
    }
}

static const pscom_plugin_t pscom_plugin_loop = {
    .name = "loop",
    .api_version = PSCOM_PLUGIN_API_VERSION,
    .priority = 100,
    .rendezvous = SIZE_MAX, /* the data is fed from the sender's buffer: one copy already */
    .env = NULL,
    .con_offer = loop_offer,
    .con_accept = loop_accept,
    .con_finish = loop_finish,
    .con_abort = loop_abort,
    .con_start = loop_start,
    .flags = PSCOM_PLUGIN_SELF,
};
PSCOM_PLUGIN_DEFINE(pscom_plugin_loop);
