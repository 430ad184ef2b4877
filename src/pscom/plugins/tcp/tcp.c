/*
 * tcp transport: the handshake's TCP socket becomes the data stream. Non-blocking, writev of
 * header and user buffer, data read straight into the matched receive buffer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include "pscom_plugin.h"
#include "tcp_socket.h"

#define READAHEAD 32768

/* Messages up to this size go by write_now: written at once, without core's request and send
   queue (callgrind, MPI_Send of 0 bytes: 784 -> 376 instructions; loopback latency did not
   move, the system calls dominate it); what a short write leaves of one waits in the
   connection and goes before anything else. */
#define NOW_MAX 4096

#define CONGESTION_DEFAULT "cubic,reno"

/* The data of a message from DATA_ALIGN_FROM bytes starts DATA_ALIGN-aligned from the start of
   its write (core puts a PAD message in front). The kernel copies a write into its socket
   buffer at the same offset, and on AMD EPYC its copy (rep movsb) into a destination off a
   64-byte boundary takes twice as long or more: MPI ping-pong over loopback with our 16 + 12
   bytes of headers in front of the data, 64 KiB 39 -> 18 us, 256 KiB 122 -> 36. No difference
   below 32 KiB; the filler costs at most 79 bytes. */
#define DATA_ALIGN      64
#define DATA_ALIGN_FROM 8192

static struct {
    int nodelay;
    size_t sndbuf, rcvbuf;
    const char *congestion;
} cfg;

static const pscom_env_row_t tcp_env[] = {
    {"PSP_TCP_NODELAY", "1", "Set TCP_NODELAY on tcp connections.", PSCOM_ENV_BOOL, &cfg.nodelay, 0,
     0},
    {"PSP_TCP_SNDBUF", "0", "SO_SNDBUF of tcp connections (0: kernel default).", PSCOM_ENV_SIZE,
     &cfg.sndbuf, 0, 0},
    {"PSP_TCP_RCVBUF", "0", "SO_RCVBUF of tcp connections (0: kernel default; at least 64k).",
     PSCOM_ENV_SIZE, &cfg.rcvbuf, 0, 0},
    /* BBR (some distributions' and clouds' default) paces a sender at the rate it measured
       in the past: MPI's bursts on a quiet connection go out at a fraction of what the path
       takes (loopback: 3.5 instead of 8-11 GB/s, flipping from run to run). */
    {"PSP_TCP_CONGESTION", CONGESTION_DEFAULT,
     "TCP congestion control of tcp connections: the first of this list that the kernel offers "
     "and allows (net.ipv4.tcp_available_congestion_control, and for users other than root "
     "tcp_allowed_congestion_control, which always has reno); empty: the system's default.",
     PSCOM_ENV_STR, &cfg.congestion, 0, 0},
    {NULL, NULL, NULL, 0, NULL, 0, 0},
};

typedef struct tcp_con tcp_con_t;
struct tcp_con {
    list_head_t link; /* in cons (first: list_entry costs nothing) */
    pscom_con_t *con;
    pscom_ufd_t ufd;
    int busy; /* inside a handler: close must not free us */
    int dead;
    int reading;      /* inside tcp_read: a write that fails now leaves the reading to it */
    int write_broken; /* errno of a failed write; nothing more is written */
    size_t pend_off, pend_len; /* the rest of a message write_now wrote in part */
    char pend[NOW_MAX];
    char ra[READAHEAD];
};

/* With few connections, reading each socket directly in the poll loop saves the epoll_wait
   call per message (that is most of the latency); with many, one epoll_wait is cheaper. */
#define DIRECT_POLL_MAX 4
static list_head_t cons = LIST_HEAD_INIT(cons); /* open connections */
static int n_cons;
static unsigned list_gen;
static uint64_t tcp_short_writes; /* write_now took a message in part (the socket was full) */
static pscom_poller_t poller;
static int poller_on;

static int tcp_read(tcp_con_t *tc);

static int tcp_poll(pscom_poller_t *p)
{
    (void)p;
    if (n_cons > DIRECT_POLL_MAX)
        return 0;
    unsigned gen = list_gen;
    int made = 0;
    for (list_head_t *l = cons.next, *next; l != &cons; l = next) {
        tcp_con_t *tc = list_entry(l, tcp_con_t, link);
        next = l->next;
        tc->busy++;
        made |= tcp_read(tc);
        if (--tc->busy == 0 && tc->dead)
            free(tc);
        if (gen != list_gen)
            return 1;
    }
    return made;
}

/* the epoll set polls tcp sockets every round only when direct polling is off */
static void set_count(int delta)
{
    int before = n_cons > DIRECT_POLL_MAX ? n_cons : 0;
    n_cons += delta;
    int after = n_cons > DIRECT_POLL_MAX ? n_cons : 0;
    pscom_reactor_busy_fd(after - before);
    list_gen++;
}

static void tcp_fail(tcp_con_t *tc, pscom_op_t op, const char *why)
{
    pscom_con_transport_failed(tc->con, op, PSCOM_ERR_IOERROR, why);
}

/* A write failed. A peer that closed after its last messages (its EOF among them) resets the
   connection when we write to it (a credit grant, a rendezvous read), but what it sent before
   is still in our socket: read it first, so that its EOF makes this an orderly end. */
static void tcp_write_failed(tcp_con_t *tc, int err)
{
    if (err == EPIPE || err == ECONNRESET) {
        tc->write_broken = err;
        if (tc->reading)
            return; /* a write from inside the parser: the read under way goes on to the end */
        while (!tc->dead && tcp_read(tc))
            ;
    }
    if (!tc->dead)
        tcp_fail(tc, PSCOM_OP_WRITE, strerror(err));
}

/* The rest of a short write_now first: 1 when it is out, 0 when the socket is full, -1 after
   a failure. */
static int write_pend(tcp_con_t *tc)
{
    while (tc->pend_len) {
        struct iovec iov = {tc->pend + tc->pend_off, tc->pend_len};
        ssize_t w = tcp_socket_writev(tc->ufd.fd, &iov, 1);
        if (w < 0) {
            if (errno == EAGAIN)
                return 0;
            tcp_write_failed(tc, errno);
            return -1;
        }
        tc->pend_off += (size_t)w;
        tc->pend_len -= (size_t)w;
    }
    return 1;
}

static void tcp_write(tcp_con_t *tc)
{
    struct iovec iov[3];
    int n;
    if (tc->write_broken)
        return;
    int r = write_pend(tc);
    if (r <= 0) {
        if (r == 0)
            pscom_ufd_mod(&tc->ufd, EPOLLIN | EPOLLOUT);
        return;
    }
    while ((n = pscom_write_get_iov(tc->con, iov)) > 0) {
        ssize_t w = tcp_socket_writev(tc->ufd.fd, iov, n);
        if (w < 0) {
            if (errno == EAGAIN) {
                pscom_ufd_mod(&tc->ufd, EPOLLIN | EPOLLOUT);
                return;
            }
            tcp_write_failed(tc, errno);
            return;
        }
        pscom_write_done(tc->con, (size_t)w);
        if (tc->dead)
            return;
    }
    pscom_ufd_mod(&tc->ufd, EPOLLIN);
}

static void tcp_write_start(pscom_con_t *con)
{
    tcp_con_t *tc = pscom_con_transport_data(con);
    tc->busy++;
    tcp_write(tc);
    if (--tc->busy == 0 && tc->dead)
        free(tc);
}

/* A small message with nothing queued before it: 1 when the socket took it (whole, or in part
   with the rest kept in pend), 0 to leave it to core's queue (no room, a rest still pending,
   or an error, which the queued write then reports). */
static int tcp_write_now(pscom_con_t *con, const struct iovec *iov, int n, size_t len)
{
    tcp_con_t *tc = pscom_con_transport_data(con);
    if (!tc || tc->dead || tc->write_broken || tc->pend_len || len > NOW_MAX)
        return 0;
    ssize_t w = tcp_socket_writev(tc->ufd.fd, iov, n);
    if (likely(w == (ssize_t)len))
        return 1;
    if (w <= 0)
        return 0;
    size_t skip = (size_t)w;
    for (int i = 0; i < n; i++) {
        size_t l = iov[i].iov_len;
        if (skip >= l) {
            skip -= l;
            continue;
        }
        pscom_memcpy(tc->pend + tc->pend_len, (const char *)iov[i].iov_base + skip, l - skip);
        tc->pend_len += l - skip;
        skip = 0;
    }
    tc->pend_off = 0;
    tcp_short_writes++;
    pscom_ufd_mod(&tc->ufd, EPOLLIN | EPOLLOUT); /* tcp_handler writes the rest */
    return 1;
}

/* Returns nonzero if anything was read (or the connection ended). */
static int tcp_read_rounds(tcp_con_t *tc)
{
    int made = 0;
    for (int round = 0; round < 16 && !tc->dead; round++) {
        void *direct;
        size_t len = pscom_read_direct_buf(tc->con, &direct);
        ssize_t n = len ? tcp_socket_read(tc->ufd.fd, direct, len)
                        : tcp_socket_read(tc->ufd.fd, tc->ra, sizeof(tc->ra));
        if (n == 0) {
            tcp_fail(tc, PSCOM_OP_READ, "peer closed the connection (died?)");
            return 1;
        }
        if (n < 0) {
            if (errno != EAGAIN) {
                tcp_fail(tc, PSCOM_OP_READ, strerror(errno));
                return 1;
            }
            return made;
        }
        made = 1;
        if (len)
            pscom_read_direct_done(tc->con, (size_t)n);
        else
            pscom_read_feed(tc->con, tc->ra, (size_t)n);
        if (!len && (size_t)n < sizeof(tc->ra))
            return made; /* drained */
    }
    return made;
}

static int tcp_read(tcp_con_t *tc)
{
    tc->reading++;
    int made = tcp_read_rounds(tc);
    tc->reading--;
    /* a write failed while we read (the peer reset the connection): once what it sent is read
       to the end, the connection ends (orderly if its EOF came) */
    if (tc->write_broken && !tc->dead && !tc->reading && !made)
        tcp_fail(tc, PSCOM_OP_WRITE, strerror(tc->write_broken));
    return made;
}

static void tcp_handler(pscom_ufd_t *ufd, uint32_t revents)
{
    tcp_con_t *tc = ufd->priv;
    tc->busy++;
    if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR))
        tcp_read(tc);
    if (!tc->dead && (revents & EPOLLOUT))
        tcp_write(tc);
    if (--tc->busy == 0 && tc->dead)
        free(tc);
}

static void tcp_close(pscom_con_t *con)
{
    tcp_con_t *tc = pscom_con_transport_data(con);
    pscom_ufd_del(&tc->ufd);
    list_del(&tc->link);
    set_count(-1);
    tcp_socket_close(tc->ufd.fd);
    tc->dead = 1;
    if (!tc->busy)
        free(tc);
}

/* Everything we wrote has reached the peer (the kernel's send queue is empty: SIOCOUTQ counts
   unsent and unacknowledged bytes). Closing before that, with a message of the peer arriving
   meanwhile (a credit grant), would make the kernel reset the connection and drop what it
   still holds for a late receiver. */
static int tcp_flushed(pscom_con_t *con)
{
    tcp_con_t *tc = pscom_con_transport_data(con);
    int queued = 0;
    if (!tc || tc->dead)
        return 1;
    if (tc->pend_len)
        return 0;
    if (ioctl(tc->ufd.fd, SIOCOUTQ, &queued) != 0)
        return 1;
    if (queued)
        pscom_progress_block_hint(1); /* the peer's kernel acknowledges without an event here */
    return queued == 0;
}

static const pscom_con_ops_t tcp_ops = {
    .write_start = tcp_write_start,
    .write_now = tcp_write_now,
    .flushed = tcp_flushed,
    .close = tcp_close,
    .rndv_pull = NULL, /* large messages: the sender pushes after the receiver matched */
};

static int tcp_offer(pscom_con_t *con, void *blob, size_t *len)
{
    (void)con;
    (void)blob;
    *len = 0;
    return 0;
}

static int tcp_accept(pscom_con_t *con, const void *offer, size_t offer_len, void *blob,
                      size_t *len)
{
    (void)con;
    (void)offer;
    (void)offer_len;
    (void)blob;
    *len = 0;
    return 0;
}

static int tcp_finish(pscom_con_t *con, const void *reply, size_t reply_len)
{
    (void)con;
    (void)reply;
    (void)reply_len;
    return 0;
}

/* The first name of the PSP_TCP_CONGESTION list that the kernel lets us set. */
static void set_congestion(int fd)
{
    static int warned;
    const char *list = cfg.congestion;
    char name[32];
    int err = 0;
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ", ");
        if (n && n < sizeof(name)) {
            memcpy(name, p, n);
            name[n] = '\0';
            if (tcp_socket_congestion(fd, name) == 0)
                return;
            err = errno;
        } else if (n) {
            err = ENOENT;
        }
        p += n;
        p += strspn(p, ", ");
    }
    if (!err || warned)
        return; /* empty: the system's default */
    warned = 1;
    /* names the user gave are an error worth seeing; our defaults missing are not */
    int level = strcmp(list, CONGESTION_DEFAULT) ? 1 : 2;
    const char *why = err == ENOENT  ? "not available (net.ipv4.tcp_available_congestion_control)"
                      : err == EPERM ? "not allowed (net.ipv4.tcp_allowed_congestion_control)"
                                     : strerror(err);
    PSCOM_LOG(level,
              "warning: PSP_TCP_CONGESTION=%s: %s; tcp connections keep the system's default", list,
              why);
}

/* Linux stalls a loopback stream for good when the receive window stays below one 64 KiB
   segment (SO_RCVBUF is doubled by the kernel: 16 KiB stalled t_order, 32 KiB did not). */
#define RCVBUF_MIN (64 * 1024)

static size_t rcvbuf(void)
{
    static int warned;
    if (!cfg.rcvbuf || cfg.rcvbuf >= RCVBUF_MIN)
        return cfg.rcvbuf;
    if (!warned) {
        warned = 1;
        PSCOM_LOG(1,
                  "warning: PSP_TCP_RCVBUF=%zu is below %u bytes, raised to that: smaller "
                  "receive buffers stall loopback connections",
                  cfg.rcvbuf, RCVBUF_MIN);
    }
    return RCVBUF_MIN;
}

static void tcp_start(pscom_con_t *con, int fd)
{
    tcp_con_t *tc = calloc(1, sizeof(*tc));
    if (!tc) {
        pscom_con_transport_failed(con, PSCOM_OP_CONNECT, PSCOM_ERR_NOMEM, "out of memory");
        return;
    }
    tc->con = con;
    tcp_socket_tune(fd, cfg.nodelay, cfg.sndbuf, rcvbuf());
    set_congestion(fd);
    tc->ufd = (pscom_ufd_t){.fd = fd, .events = EPOLLIN, .handler = tcp_handler, .priv = tc};
    pscom_con_set_transport(con, &tcp_ops, tc);
    pscom_con_set_data_align(con, DATA_ALIGN, DATA_ALIGN_FROM);
    pscom_ufd_add(&tc->ufd);
    list_add_tail(&tc->link, &cons);
    set_count(1);
    if (!poller_on) {
        poller = (pscom_poller_t){.poll = tcp_poll};
        pscom_poller_add(&poller);
        poller_on = 1;
    }
}

/* From 1 MiB the sender waits for the receiver to match, then pushes: an unexpected eager
   message that large would be buffered whole, while smaller ones stream better eager (256 KiB
   over loopback: 4.8 GB/s eager, 3.0 with the handshake). */
#define TCP_RNDV (1u << 20)

static const pscom_counter_t tcp_counters[] = {{"short writes", &tcp_short_writes}, {NULL, NULL}};

static const pscom_plugin_t pscom_plugin_tcp = {
    .name = "tcp",
    .api_version = PSCOM_PLUGIN_API_VERSION,
    .priority = 2,
    .rendezvous = TCP_RNDV,
    .env = tcp_env,
    .con_offer = tcp_offer,
    .con_accept = tcp_accept,
    .con_finish = tcp_finish,
    .con_start = tcp_start,
    .counters = tcp_counters,
};
PSCOM_PLUGIN_DEFINE(pscom_plugin_tcp);
