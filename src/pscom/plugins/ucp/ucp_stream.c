/*
 * ucp transport, the byte stream: core's messages as UCX active messages and back. One active
 * message per pscom message: small ones (PSP_UCP_SMALL) copied, so the send completes at once;
 * of a larger one the pscom header and xheader ride in the active message header and the data
 * goes in place (UCX's zero-copy rendezvous where it has one), the send completing when UCX is
 * done with the buffer. The receiver finds the connection by the id in the header, restores
 * the order by the sequence number, feeds core, and fetches a rendezvous payload straight into
 * the matched receive buffer. UCX callbacks only record; ucp_service() does the rest.
 */
#include <stdlib.h>
#include <string.h>
#include "ucp_priv.h"

typedef struct bounce {
    ux_op_t op;
    struct bounce *next_free;
    size_t len;
    size_t charge;  /* counted in its connection's queued (PSP_UCP_QUEUE) while UCX holds it */
    uint32_t uc_id; /* that connection (looked up at completion: it may be closed by then) */
    unsigned char data[];
} bounce_t;

/* Copies of up to BOUNCE_CACHED bytes (PSP_UCP_SMALL's default and a header) come from a
   free list: glibc's malloc took ~300 instructions for a 1 KiB message's copy (above its
   per-thread cache's 1032 bytes), more than the rest of our send path. */
#define BOUNCE_CACHED   (8192 + 256)
#define BOUNCE_FREE_MAX 32
static bounce_t *bounce_free;
static unsigned n_bounce_free;

static bounce_t *bounce_get(size_t len)
{
    if (len > BOUNCE_CACHED)
        return malloc(sizeof(bounce_t) + len);
    bounce_t *b = bounce_free;
    if (b) {
        bounce_free = b->next_free;
        n_bounce_free--;
        return b;
    }
    return malloc(sizeof(bounce_t) + BOUNCE_CACHED);
}

static void bounce_put(bounce_t *b, size_t len)
{
    if (len > BOUNCE_CACHED || n_bounce_free >= BOUNCE_FREE_MAX) {
        free(b);
        return;
    }
    b->next_free = bounce_free;
    bounce_free = b;
    n_bounce_free++;
}

void ucp_bounce_drop(void)
{
    while (bounce_free) {
        bounce_t *b = bounce_free;
        bounce_free = b->next_free;
        free(b);
    }
    n_bounce_free = 0;
}

static void rx_free(rx_t *rx)
{
    if (rx->data && !rx->copied)
        ux_release(rx->data); /* a payload, or a rendezvous descriptor: completes the sender */
    free(rx->tmp);
    free(rx);
}

/* ---- UCX callbacks: record only ---- */

int ucp_direct_feed;

/* The full number of a message from its low 16 bits on the wire: the nearest to the next
   expected (behind the last queued one, if any). */
static uint32_t seq_full(const uc_t *uc, uint16_t low)
{
    uint32_t next = uc->rx_head ? uc->rx_tail->seq + 1 : uc->rx_seq;
    return next + (uint32_t)(int32_t)(int16_t)(uint16_t)(low - (uint16_t)next);
}

/* Feed one message: pre_len stream bytes (K_DATA: pscom header and xheader) and the payload,
   or a user message without its pscom header (K_USER). */
static void feed(uc_t *uc, uint32_t kind, uint32_t xlen, const void *pre, size_t pre_len,
                 const void *data, size_t len)
{
    if (kind == K_USER) {
        pscom_read_feed_user(uc->con, data, xlen, (const char *)data + xlen, len - xlen);
        return;
    }
    if (pre_len)
        pscom_read_feed(uc->con, pre, pre_len);
    if (len && !uc->dead)
        pscom_read_feed(uc->con, data, len);
}

/* After feeding core from the callback: the connection died meanwhile, or its goodbye is in. */
static void fed(uc_t *uc)
{
    if (uc->dead)
        ucp_reap(uc);
    else
        ucp_bye_check(uc);
}

/* Message seq of uc may go to core from UCX's callback: the next in order, nothing queued
   before it, and no call of ours on the connection under way. */
static inline int feedable(const uc_t *uc, uint16_t seq)
{
    return ucp_direct_feed && seq == (uint16_t)uc->rx_seq && !uc->busy && !uc->rx_head &&
           !uc->rx_cur && uc->started && !uc->dead && !uc->ep_err;
}

/* The next message of a connection with nothing queued, arriving during the poller's progress:
   core gets it straight from UCX's receive buffer. */
static int feed_now(uc_t *uc, uint32_t kind, uint32_t xlen, const void *pre, size_t pre_len,
                    const void *data, size_t len)
{
    uc->rx_seq++;
    uc->busy++;
    feed(uc, kind, xlen, pre, pre_len, data, len);
    uc->busy--;
    fed(uc);
    return 0;
}

static int rx_error(uc_t *uc, const char *why)
{
    uc->ep_err = why;
    ucp_work_add(uc);
    return 0;
}

int ucp_on_recv(const void *hdr, size_t hlen, void *data, size_t len, int rndv, int keep_ok)
{
    ucp_hdr_t h;
    if (likely(hlen == 0 && !rndv && len >= sizeof(h))) { /* short: our header leads the data */
        memcpy(&h, data, sizeof(h));
        /* the common case on its own path: a small user message that core takes now */
        if (likely(h.kind == K_USER)) {
            uc_t *uc = ucp_id_find(h.id);
            const char *x = (const char *)data + sizeof(h);
            size_t n = len - sizeof(h);
            if (likely(uc && h.xlen <= n && feedable(uc, h.seq))) {
                uc->rx_seq++;
                uc->busy++;
                pscom_read_feed_user(uc->con, x, h.xlen, x + h.xlen, n - h.xlen);
                uc->busy--;
                if (unlikely(uc->dead || uc->bye_in))
                    fed(uc);
                return 0;
            }
        }
        size_t lead = h.kind == K_DATA ? sizeof(ucp_data_hdr_t) : sizeof(h);
        if (len >= lead) {
            hdr = data;
            hlen = lead;
            data = (char *)data + lead;
            len -= lead;
            keep_ok = 0; /* UCX's descriptor is not at data any more: a queued one is copied */
        }
    }
    if (hlen < sizeof(h)) {
        PSCOM_LOG(2, "ucp: dropped a message with a %zu byte header", hlen);
        return 0;
    }
    memcpy(&h, hdr, sizeof(h));
    uc_t *uc = ucp_id_find(h.id);
    if (!uc || uc->dead)
        return 0; /* for a connection closed meanwhile */
    const unsigned char *pre = NULL;
    size_t pre_len = 0;
    if (h.kind == K_USER) {
        if (rndv || hdr != (char *)data - sizeof(h) || h.xlen > len)
            return rx_error(uc, "malformed ucp message header");
    } else if (h.kind == K_DATA) {
        uint32_t n;
        if (hlen < sizeof(ucp_data_hdr_t))
            return rx_error(uc, "malformed ucp message header");
        memcpy(&n, (const char *)hdr + offsetof(ucp_data_hdr_t, hlen), sizeof(n));
        if (n != hlen - sizeof(ucp_data_hdr_t))
            return rx_error(uc, "malformed ucp message header");
        pre = (const unsigned char *)hdr + sizeof(ucp_data_hdr_t);
        pre_len = n;
    } else {
        return rx_error(uc, "unknown ucp message kind");
    }
    if (!rndv && feedable(uc, h.seq))
        return feed_now(uc, h.kind, h.xlen, pre, pre_len, data, len);
    /* eager data that UCX does not let us keep: copied behind the header bytes */
    int copy = !rndv && !keep_ok;
    rx_t *rx = malloc(sizeof(*rx) + pre_len + (copy ? len : 0));
    if (!rx)
        return rx_error(uc, "out of memory");
    *rx = (rx_t){.uc = uc,
                 .seq = seq_full(uc, h.seq),
                 .kind = h.kind,
                 .xlen = h.xlen,
                 .rndv = rndv,
                 .data = data,
                 .len = len,
                 .pre = (unsigned char *)(rx + 1),
                 .pre_len = pre_len};
    if (pre_len)
        memcpy(rx->pre, pre, pre_len);
    if (copy) {
        rx->data = rx->pre + pre_len;
        rx->copied = 1;
        if (len)
            pscom_memcpy(rx->data, data, len);
    }
    uint32_t seq = rx->seq;
    /* in order almost always: append; else find the place */
    if (!uc->rx_head || (int32_t)(seq - uc->rx_tail->seq) > 0) {
        if (uc->rx_head)
            uc->rx_tail->next = rx;
        else
            uc->rx_head = rx;
        uc->rx_tail = rx;
    } else {
        rx_t **pp = &uc->rx_head;
        while ((int32_t)((*pp)->seq - seq) < 0)
            pp = &(*pp)->next;
        rx->next = *pp;
        *pp = rx;
    }
    if (uc->started)
        ucp_work_add(uc);
    return !copy;
}

static void tx_done(ux_op_t *op, const char *err)
{
    tx_t *tx = container_of(op, tx_t, op);
    uc_t *uc = tx->uc;
    uc->ops--;
    if (uc->dead) { /* core failed the request when it closed the connection */
        free(tx);
        return;
    }
    tx->err = err;
    tx->next = NULL;
    if (uc->tx_done)
        uc->tx_done_tail->next = tx;
    else
        uc->tx_done = tx;
    uc->tx_done_tail = tx;
    ucp_work_add(uc);
}

static void rx_done(ux_op_t *op, const char *err)
{
    rx_t *rx = container_of(op, rx_t, op);
    uc_t *uc = rx->uc;
    uc->ops--;
    if (uc->dead) { /* dropped from the queue at close: ours now */
        rx_free(rx);
        return;
    }
    rx->state = err ? RX_FAILED : RX_FETCHED;
    rx->err = err;
    ucp_work_add(uc);
}

static void bounce_done(ux_op_t *op, const char *err)
{
    (void)err; /* the endpoint's error handler reports failures */
    bounce_t *b = container_of(op, bounce_t, op);
    uc_t *uc = ucp_id_find(b->uc_id);
    if (uc) {
        uc->queued -= b->charge;
        if (uc->tx_blocked && uc->queued < ucp_cfg.queue) {
            uc->tx_blocked = 0;
            ucp_work_add(uc); /* the next poll sends what waits in core's queue */
        }
    }
    bounce_put(b, b->len);
}

/* Copies UCX holds for uc reach PSP_UCP_QUEUE: the next send waits (at least one may be queued,
   so a send always goes eventually) */
static inline int queue_full(uc_t *uc)
{
    if (likely(!uc->queued || uc->queued < ucp_cfg.queue))
        return 0;
    uc->tx_blocked = 1;
    return 1;
}

/* ---- send ---- */

/* A copy of len bytes to send; completes when UCX is done with it (bounce_done). */
static bounce_t *bounce_new(size_t len)
{
    bounce_t *b = bounce_get(len);
    if (b) {
        b->op.done = bounce_done;
        b->len = len;
        b->charge = 0;
    }
    return b;
}

/* Send the copy's len bytes behind hdr (hlen bytes, UCX's message header): ux_send's result;
   the copy goes back to the free list unless UCX still reads it. */
static int bounce_send(uc_t *uc, bounce_t *b, const void *hdr, size_t hlen, int eager,
                       const char **why)
{
    int r = ux_send(uc->ep, hdr, hlen, b->data, b->len, eager, &b->op, why);
    if (r <= 0) {
        bounce_put(b, b->len);
        return r;
    }
    /* UCX queued it (no room at the peer now): it counts against PSP_UCP_QUEUE until sent, as
       much as it occupies */
    b->uc_id = uc->id;
    b->charge = b->len > BOUNCE_CACHED ? b->len : BOUNCE_CACHED;
    uc->queued += b->charge;
    return r;
}

/* Copy n iov entries (len bytes) into one message, behind our header: no UCX message header
   (UCX 1.13 sends an active message with one a good deal slower: a ping-pong of 1052 bytes over
   its shared memory 0.89-0.92 us without, 1.12-1.14 with a 12-byte one, test/bench/ucx_pp.c).
   0, or -1 (failed). */
static int send_copy(uc_t *uc, const struct iovec *iov, int n, size_t len)
{
    bounce_t *b = bounce_new(sizeof(ucp_data_hdr_t) + len);
    if (!b) {
        ucp_fail(uc, PSCOM_OP_WRITE, PSCOM_ERR_NOMEM, "out of memory");
        return -1;
    }
    ucp_data_hdr_t h = {.h = {.id = uc->peer_id, .seq = (uint16_t)uc->tx_seq++, .kind = K_DATA}};
    memcpy(b->data, &h, sizeof(h));
    size_t off = sizeof(h);
    for (int i = 0; i < n; i++) {
        pscom_memcpy(b->data + off, iov[i].iov_base, iov[i].iov_len);
        off += iov[i].iov_len;
    }
    const char *why = NULL;
    if (bounce_send(uc, b, NULL, 0, uc->eager, &why) < 0) {
        ucp_fail(uc, PSCOM_OP_WRITE, PSCOM_ERR_IOERROR, why);
        return -1;
    }
    return 0;
}

/* Small messages: assembled on the stack and sent if UCX takes them at once (no allocation,
   no completion to wait for). 0 sent, 1 not now, -1 failed. */
#define SEND_NOW_MAX 1024

/* A short send of at most max(uc->short_ok, SHORT_SURE) bytes that UCX refuses found no room
   (the peer's FIFO or the socket is full), not a message too long for UCX's short protocol:
   short_ok is the largest one UCX took on the endpoint, and SHORT_SURE (core's EOF and other
   header-only messages) fits every UCX transport's short protocol (UCX 1.13's shared memory
   takes 92 bytes, of which our header is 8 or 12). Such a message waits for room, up to
   FULL_WAIT_MS in a row, before it takes the copied way (see ucp_write). */
#define SHORT_SURE   32
#define FULL_WAIT_MS 100

/* UCX took a message of len stream bytes by its short protocol */
static inline void sent_now(uc_t *uc, size_t len)
{
    uc->tx_seq++;
    if (uc->full_since)
        uc->full_since = 0;
    if (len > uc->short_ok)
        uc->short_ok = len;
}

/* Our K_USER header, the user header and the data at dst; returns the length. */
static inline __attribute__((always_inline)) size_t put_user(unsigned char *dst, const ucp_hdr_t *h,
                                                             const void *xheader, size_t xlen,
                                                             const void *data, size_t dlen)
{
    memcpy(dst, h, sizeof(*h));
    pscom_copy_small(dst + sizeof(*h), xheader, xlen);
    pscom_copy_small(dst + sizeof(*h) + xlen, data, dlen);
    return sizeof(*h) + xlen + dlen;
}

static ucp_hdr_t user_hdr(const uc_t *uc, size_t xlen)
{
    return (ucp_hdr_t){
        .id = uc->peer_id, .seq = (uint16_t)uc->tx_seq, .kind = K_USER, .xlen = (uint8_t)xlen};
}

/* A user message (xlen <= UINT8_MAX, at most SEND_NOW_MAX stream bytes) by UCX's short
   protocol, assembled on the stack behind our header with no UCX user header (UCX then takes
   its one-buffer short path, not the gathering one): 0 sent, 1 not now, -1 failed. */
static inline __attribute__((always_inline)) int short_user(uc_t *uc, const void *xheader,
                                                            size_t xlen, const void *data,
                                                            size_t dlen, const char **why)
{
    _Alignas(8) unsigned char buf[sizeof(ucp_hdr_t) + SEND_NOW_MAX];
    ucp_hdr_t h = user_hdr(uc, xlen);
    int r = ux_send_now(uc->ep, NULL, 0, buf, put_user(buf, &h, xheader, xlen, data, dlen), why);
    if (r == 0)
        sent_now(uc, sizeof(pscom_header_net_t) + xlen + dlen);
    return r;
}

/* ux_send_now of len (<= SEND_NOW_MAX) bytes in n iov entries of core's queue: a user message
   (header and user header in the first entry, the data in the second) as K_USER, anything
   else as K_DATA. 0 sent, 1 not now, -1 failed. */
static int try_send_now(uc_t *uc, const struct iovec *iov, int n, size_t len, const char **why)
{
    const size_t hs = sizeof(pscom_header_net_t);
    int xlen = pscom_header_user_xlen(iov[0].iov_base, len);
    if (xlen >= 0 && xlen <= UINT8_MAX && iov[0].iov_len == hs + (size_t)xlen && n <= 2)
        return short_user(uc, (const char *)iov[0].iov_base + hs, (size_t)xlen,
                          n == 2 ? iov[1].iov_base : NULL, n == 2 ? iov[1].iov_len : 0, why);
    _Alignas(8) unsigned char buf[sizeof(ucp_data_hdr_t) + SEND_NOW_MAX];
    ucp_data_hdr_t h = {.h = {.id = uc->peer_id, .seq = (uint16_t)uc->tx_seq, .kind = K_DATA}};
    memcpy(buf, &h, sizeof(h));
    size_t off = sizeof(h);
    for (int i = 0; i < n; off += iov[i].iov_len, i++)
        memcpy(buf + off, iov[i].iov_base, iov[i].iov_len);
    int r = ux_send_now(uc->ep, NULL, 0, buf, off, why);
    if (r == 0)
        sent_now(uc, len);
    return r;
}

static int send_now(uc_t *uc, const struct iovec *iov, int n, size_t len)
{
    const char *why = NULL;
    int r = try_send_now(uc, iov, n, len, &why);
    if (r < 0)
        ucp_fail(uc, PSCOM_OP_WRITE, PSCOM_ERR_IOERROR, why);
    return r;
}

/* pscom_send_now: a user message as K_USER, straight from its parts: by UCX's short protocol
   if it takes it at once, else (longer, or no room now) as a copy that UCX sends or queues, as
   the queued path would send it but without core's request and send queue (MPI ping-pong of
   1 KiB over UCX's shared memory, best runs: 0.57 -> 0.45 us). 1 sent, 0 not (core queues it: a
   failure shows there). */
int ucp_write_user_now(pscom_con_t *con, const void *xheader, size_t xlen, const void *data,
                       size_t dlen)
{
    uc_t *uc = pscom_con_transport_data(con);
    size_t len = sizeof(pscom_header_net_t) + xlen + dlen; /* as core counts it */
    if (!uc || uc->dead || !uc->started || uc->ep_err || uc->busy || xlen > UINT8_MAX ||
        len > ucp_cfg.small || ux_in_progress())
        return 0;
    const char *why = NULL;
    /* only what UCX's short protocol can take: a refused try costs a call and a copy */
    if (len <= SEND_NOW_MAX && sizeof(ucp_hdr_t) + xlen + dlen <= uc->short_max) {
        int r = short_user(uc, xheader, xlen, data, dlen, &why);
        if (r <= 0)
            return r == 0;
    }
    /* no copies on a closing connection (see no_room_wait), nor beyond PSP_UCP_QUEUE */
    if (pscom_con_closing(uc->con) || queue_full(uc))
        return 0;
    bounce_t *b = bounce_new(sizeof(ucp_hdr_t) + xlen + dlen);
    if (!b)
        return 0;
    ucp_hdr_t h = user_hdr(uc, xlen);
    put_user(b->data, &h, xheader, xlen, data, dlen);
    if (bounce_send(uc, b, NULL, 0, 1, &why) < 0)
        return 0;
    uc->tx_seq++;
    return 1;
}

/* A short send of len bytes on a closing connection was refused: 1 if it is to be tried again
   in the next poll. Not by a copy: UCX 1.13 asks the peer for its endpoint id (a wireup
   request and reply) before the first active message on an endpoint that is not short. When
   all ranks close at once, their FIFOs full of EOFs, such requests went to peers that had
   exited, and UCX aborted at exit over the queued reply. While the connection is in use the
   copy is right: the peer is there to answer, and UCX queues the copies until the FIFO has
   room (a stream of small messages: 0.20 us each, 0.22 when retried in every poll). */
static int no_room_wait(uc_t *uc, size_t len)
{
    if (len > SHORT_SURE && len > uc->short_ok)
        return 0; /* may be too long for the short protocol */
    uint64_t now = ucp_now_ms();
    if (!uc->full_since)
        uc->full_since = now;
    else if (now - uc->full_since >= FULL_WAIT_MS)
        return 0;
    ucp_work_add(uc);
    return 1;
}

void ucp_write(uc_t *uc)
{
    struct iovec iov[3];
    int n;
    while (!uc->dead && (n = pscom_write_get_iov(uc->con, iov)) > 0) {
        size_t total = 0;
        for (int i = 0; i < n; i++)
            total += iov[i].iov_len;
        /* (as K_USER, the shorter form, it would take this many bytes) */
        if (total <= SEND_NOW_MAX &&
            total - sizeof(pscom_header_net_t) + sizeof(ucp_hdr_t) <= uc->short_max) {
            int r = send_now(uc, iov, n, total);
            if (r < 0)
                return;
            if (r == 0) {
                pscom_write_done(uc->con, total);
                continue;
            }
            if (pscom_con_closing(uc->con) && no_room_wait(uc, total))
                return;
        }
        if (queue_full(uc))
            return; /* bounce_done resumes it */
        if (total <= ucp_cfg.small) {
            if (send_copy(uc, iov, n, total) != 0)
                return;
            pscom_write_done(uc->con, total);
            continue;
        }
        /* large: the data in place, what precedes it (header, xheader) in the message header;
           where that does not fit, it goes ahead by copy */
        size_t pre = total - iov[n - 1].iov_len;
        if (pre > UINT16_MAX || sizeof(ucp_data_hdr_t) + pre > ucp_max_header) {
            if (send_copy(uc, iov, n - 1, pre) != 0)
                return;
            pscom_write_done(uc->con, pre);
            continue;
        }
        tx_t *tx = malloc(sizeof(*tx) + sizeof(ucp_data_hdr_t) + pre);
        if (!tx) {
            ucp_fail(uc, PSCOM_OP_WRITE, PSCOM_ERR_NOMEM, "out of memory");
            return;
        }
        tx->op.done = tx_done;
        tx->uc = uc;
        ucp_data_hdr_t h = {.h = {.id = uc->peer_id, .seq = (uint16_t)uc->tx_seq++, .kind = K_DATA},
                            .hlen = (uint32_t)pre};
        memcpy(tx->hdr, &h, sizeof(h));
        for (int i = 0, off = sizeof(h); i < n - 1; off += (int)iov[i].iov_len, i++)
            memcpy(tx->hdr + off, iov[i].iov_base, iov[i].iov_len);
        const char *why = NULL;
        int r = ux_send(uc->ep, tx->hdr, sizeof(h) + pre, iov[n - 1].iov_base, iov[n - 1].iov_len,
                        uc->eager || total <= ucp_cfg.eager, &tx->op, &why);
        if (r <= 0)
            free(tx);
        if (r < 0) {
            ucp_fail(uc, PSCOM_OP_WRITE, PSCOM_ERR_IOERROR, why);
            return;
        }
        if (r == 0) {
            pscom_write_done(uc->con, total);
            continue;
        }
        /* UCX reads the user's buffer until tx_done: the next messages need not wait for
           that (a window of large sends streams), the request completes then */
        tx->req = pscom_write_hold(uc->con);
        uc->ops++;
    }
}

/* ---- receive ---- */

/* Start fetching a rendezvous payload: into the receive buffer if core has one for all of it. */
static void rx_fetch(uc_t *uc, rx_t *rx)
{
    void *buf = NULL;
    size_t direct = ucp_cfg.direct ? pscom_read_direct_buf(uc->con, &buf) : 0;
    if (direct < rx->len) {
        rx->tmp = malloc(rx->len ? rx->len : 1);
        if (!rx->tmp) {
            rx->state = RX_FAILED;
            rx->err = "out of memory";
            return;
        }
        buf = rx->tmp;
    }
    rx->op.done = rx_done;
    rx->state = RX_FETCHING;
    const char *why = NULL;
    int r = ux_recv(rx->data, buf, rx->len, &rx->op, &why);
    rx->data = NULL; /* UCX owns the descriptor now */
    if (r == 0) {
        rx->state = RX_FETCHED;
    } else if (r < 0) {
        rx->state = RX_FAILED;
        rx->err = why;
    } else {
        uc->ops++;
    }
}

/* Feed what arrived in order. Nonzero if anything was fed. Each message is taken off the queue
   before core sees it: feeding may close the connection, which drops the queue. */
static int uc_drain(uc_t *uc)
{
    int made = 0;
    while (!uc->dead) {
        rx_t *rx = uc->rx_cur;
        if (rx) { /* a rendezvous payload */
            if (rx->state == RX_FETCHING)
                break;
            uc->rx_cur = NULL;
            made = 1;
            if (rx->state == RX_FAILED)
                ucp_fail(uc, PSCOM_OP_READ, PSCOM_ERR_IOERROR, rx->err);
            else if (rx->tmp)
                pscom_read_feed(uc->con, rx->tmp, rx->len);
            else
                pscom_read_direct_done(uc->con, rx->len);
            rx_free(rx);
            continue;
        }
        rx = uc->rx_head;
        if (!rx || rx->seq != uc->rx_seq)
            break;
        uc->rx_head = rx->next;
        uc->rx_seq++;
        made = 1;
        if (!rx->rndv) {
            feed(uc, rx->kind, rx->xlen, rx->pre, rx->pre_len, rx->data, rx->len);
            rx_free(rx);
            continue;
        }
        if (rx->pre_len) {
            pscom_read_feed(uc->con, rx->pre, rx->pre_len);
            if (uc->dead) {
                rx_free(rx);
                break;
            }
        }
        uc->rx_cur = rx;
        rx_fetch(uc, rx);
    }
    if (!uc->dead && uc->bye_in && !uc->rx_cur && uc->rx_seq == uc->bye_seq) {
        uc->bye = 1;
        ucp_fail(uc, PSCOM_OP_READ, PSCOM_ERR_IOERROR, "peer closed the connection");
        made = 1;
    }
    return made;
}

void ucp_drop_all(uc_t *uc)
{
    while (uc->tx_done) { /* their requests: core fails the held ones at close */
        tx_t *tx = uc->tx_done;
        uc->tx_done = tx->next;
        free(tx);
    }
    rx_t *rx = uc->rx_head;
    uc->rx_head = uc->rx_tail = NULL;
    while (rx) {
        rx_t *next = rx->next;
        rx_free(rx);
        rx = next;
    }
    rx = uc->rx_cur;
    uc->rx_cur = NULL;
    if (rx && rx->state != RX_FETCHING) /* a fetch in flight frees itself (rx_done) */
        rx_free(rx);
}

/* ---- what the glue calls ---- */

int ucp_service(uc_t *uc)
{
    int made = 0;
    while (uc->tx_done && !uc->dead) {
        tx_t *tx = uc->tx_done;
        uc->tx_done = tx->next;
        const char *err = tx->err;
        pscom_req_t *req = tx->req;
        free(tx);
        made = 1;
        pscom_write_release(uc->con, req, err != NULL);
        if (err && !uc->dead) {
            ucp_fail(uc, PSCOM_OP_WRITE, PSCOM_ERR_IOERROR, err);
            return 1;
        }
    }
    if (!uc->dead)
        made |= uc_drain(uc);
    if (!uc->dead && pscom_write_pending(uc->con))
        ucp_write(uc);
    if (!uc->dead && uc->ep_err && !uc->bye) {
        ucp_fail(uc, PSCOM_OP_READ, PSCOM_ERR_IOERROR, uc->ep_err);
        made = 1;
    }
    return made;
}

void ucp_bye_check(uc_t *uc)
{
    if (uc->bye_in && uc->rx_seq == uc->bye_seq && uc->started)
        ucp_work_add(uc);
}
