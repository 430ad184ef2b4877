/*
 * pscom_pp - ping-pong latency and streaming bandwidth between two processes over pscom.
 *
 *   pscom_pp [--fork] [options]   fork a server child and measure against it (the default)
 *   pscom_pp -s [-p PORT]         serve: print "ep: <ep_str>", accept one peer, serve it
 *   pscom_pp [options] EP_STR     client: connect to a server and measure
 *
 * The library picks the transport (PSP_SHM=0, PSP_TCP=0, ... steer it); we print the one used.
 *
 * Protocol: the client drives. Each measurement ("phase") starts with a control message
 * {cmd, size, iterations, ...}; the server posts its receives and answers READY, so the timed
 * part never pays for an unexpected message. Control and data share the one connection and
 * rely on its ordering: every side knows exactly how many data messages a phase has.
 *
 * --tag: the timed data messages go by the tag API (pscom_tag_send/pscom_tag_recv, matched by
 * the transport: ucp only), control messages stay pscom requests. The two are not ordered with
 * each other, so a data message's tag names its number and direction, a receive matches only
 * that one, and every receive is posted before the control message or data message that lets
 * the peer send it (READY, or our own ping).
 */
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pscom.h"

#define PP_MAGIC   0x70705031u /* "ppP1": the peer must speak this version of the protocol */
#define MAX_SIZES  256
#define MAX_WINDOW 4096
#define TARGET_S   0.35 /* measured time per size: enough to average, short for 28 sizes */
#define ACCEPT_S   0.2  /* a measured run at least this long is reported */
#define MAX_LOOPS  100000000ull
#define WARM_LAT   8  /* warm-up ping-pongs (caches, page faults, connection setup) */
#define WARM_BW    2  /* warm-up windows */
#define MIN_LAT    10 /* at least a few timed iterations, even for huge messages */
#define MIN_BW     3
#define MAX_REPORT 10 /* verify: messages about single errors before we only count */

enum { CMD_HELLO = 1, CMD_LAT, CMD_BW, CMD_QUIT, CMD_READY, CMD_ACK };
enum { DIR_PING = 0, DIR_PONG = 1 }; /* part of the verify pattern: a reflected ping fails */

struct ctl {
    uint32_t magic;
    uint32_t cmd;
    uint64_t size;   /* message size of the phase; HELLO: buffer size */
    uint64_t iters;  /* ping-pongs, or windows (bw) */
    uint32_t window; /* bw: messages per ack; HELLO: requests to create */
    uint32_t depth;  /* bw: requests in flight */
    uint32_t nslots; /* bw: distinct buffer slots of `size` bytes */
    uint32_t xheader;
    uint32_t verify;
    uint32_t errors; /* QUIT reply: errors the server found */
};

struct pp {
    pscom_socket_t *sock;
    pscom_connection_t *con;
    char *sbuf, *rbuf;
    size_t bufsize;
    pscom_request_t **sreq, **rreq; /* window requests each, created once */
    unsigned nreq;
    pscom_request_t *ctl_s, *ctl_r;
    int ctl_s_posted;
    struct ctl cin, cout;
    unsigned xheader;
    int verify;
    unsigned long errors;
    struct tag_op *sop, *rop; /* --tag: nreq each, in place of sreq and rreq */
};

/* --tag: one operation, completed by tag_done() inside pscom_progress() (or pscom_tag_recv). */
struct tag_op {
    int done;
    pscom_tag_status_t status;
    pscom_tag_info_t info; /* receives */
};

static struct {
    int server, fork_mode, port, csv, verify, lat, bw, tag;
    size_t minsize, maxsize, sizes[MAX_SIZES];
    unsigned nsizes, xheader, window, timeout;
    uint64_t loops; /* 0: adaptive */
    const char *ep;
} opt = {.port = PSCOM_ANYPORT, .maxsize = 64u << 20, .window = 64, .timeout = 120};

static const char *prog = "pscom_pp";
static volatile sig_atomic_t g_done; /* the peer may go away now without that being an error */
static volatile pid_t g_child;
static volatile sig_atomic_t g_is_server; /* for the timeout message */

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;

    fflush(stdout);
    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (g_child > 0)
        kill(g_child, SIGKILL);
    exit(1);
}

static void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void usage_error(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "pscom_pp: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'pscom_pp --help' for more information.\n");
    exit(2);
}

/* Watchdog: every received message counts as progress; a whole period without any is a hang.
   Counting is one store per message, cheaper than re-arming alarm() in the hot loop. */
static volatile sig_atomic_t g_progress, g_seen;

static inline void progress(void)
{
    g_progress = (g_progress + 1) & 0x3fffffff;
}

static void on_alarm(int sig)
{
    /* Only async-signal-safe calls here: we may be deep inside the library. */
    static const char srv[] = "pscom_pp (server): timeout\n", cli[] = "pscom_pp: timeout\n";
    ssize_t rc;

    (void)sig;
    if (g_progress != g_seen) {
        g_seen = g_progress;
        alarm(opt.timeout);
        return;
    }
    rc = write(2, g_is_server ? srv : cli, g_is_server ? sizeof(srv) - 1 : sizeof(cli) - 1);
    (void)rc;
    if (g_child > 0)
        kill(g_child, SIGKILL);
    _exit(1);
}

static void start_watchdog(void)
{
    struct sigaction sa = {.sa_handler = on_alarm, .sa_flags = SA_RESTART};

    if (!opt.timeout)
        return;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm(opt.timeout); /* alarms do not survive fork(): each process starts its own */
}

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void on_con_error(pscom_connection_t *con, pscom_op_t op, pscom_err_t err)
{
    (void)op;
    if (!g_done)
        fprintf(stderr, "%s: connection %s: %s\n", prog, pscom_con_str(con), pscom_err_str(err));
}

/* ---- verify pattern: depends on size, message number and direction ---- */

static uint64_t seed_of(size_t size, uint64_t msg, int dir)
{
    return (uint64_t)size * 0x9E3779B97F4A7C15ull ^
           ((msg << 1) | (uint64_t)dir) * 0xC2B2AE3D27D4EB4Full;
}

/* splitmix64 step: neighbouring words differ, so shifted or duplicated data is caught. */
static inline uint64_t pat(uint64_t seed, uint64_t i)
{
    uint64_t x = seed + (i + 1) * 0x9E3779B97F4A7C15ull;

    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static void fill(void *buf, size_t len, uint64_t seed)
{
    unsigned char *p = buf;
    size_t i, nw = len / 8;
    uint64_t w;

    if (!len)
        return;
    for (i = 0; i < nw; i++) {
        w = pat(seed, i);
        memcpy(p + 8 * i, &w, 8); /* memcpy: slots need not be 8-byte aligned */
    }
    w = pat(seed, nw);
    memcpy(p + 8 * nw, &w, len % 8);
}

/* Offset of the first wrong byte, or SIZE_MAX. */
static size_t check(const void *buf, size_t len, uint64_t seed)
{
    const unsigned char *p = buf;
    size_t i, nw = len / 8;
    uint64_t w;

    if (!len)
        return SIZE_MAX;
    for (i = 0; i <= nw; i++) {
        size_t n = i < nw ? 8 : len % 8;
        w = pat(seed, i);
        if (memcmp(p + 8 * i, &w, n)) {
            const unsigned char *e = (const unsigned char *)&w;
            size_t k = 0;
            while (p[8 * i + k] == e[k])
                k++;
            return 8 * i + k;
        }
    }
    return SIZE_MAX;
}

static void report(struct pp *pp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(struct pp *pp, const char *fmt, ...)
{
    va_list ap;

    if (++pp->errors > MAX_REPORT)
        return;
    fprintf(stderr, "%s: error: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, pp->errors == MAX_REPORT ? " (further errors only counted)\n" : "\n");
}

static void fill_msg(struct pp *pp, pscom_request_t *s, size_t size, uint64_t m, int dir)
{
    uint64_t seed = seed_of(size, m, dir);

    fill(s->data, size, seed);
    fill(s->xheader, pp->xheader, ~seed);
}

/* ---- request helpers ---- */

static void check_done(pscom_request_t *req, const char *what)
{
    if (!pscom_req_successful(req))
        die("%s failed: state %s", what, pscom_req_state_str(req->state));
}

static inline void check_recv(struct pp *pp, pscom_request_t *r, size_t size, uint64_t m, int dir)
{
    size_t off;
    uint64_t seed;

    if (!pscom_req_successful(r))
        die("receive of message %" PRIu64 " (size %zu) failed: state %s", m, size,
            pscom_req_state_str(r->state));
    progress();
    if (r->data_len != size || r->xheader_len != pp->xheader) {
        report(pp, "size %zu message %" PRIu64 ": got %zu data + %zu xheader bytes, want %zu + %u",
               size, m, r->data_len, r->xheader_len, size, pp->xheader);
        return;
    }
    if (!pp->verify)
        return;
    seed = seed_of(size, m, dir);
    off = check(r->data, size, seed);
    if (off != SIZE_MAX)
        report(pp, "size %zu message %" PRIu64 ": data differs at byte %zu", size, m, off);
    off = check(r->xheader, pp->xheader, ~seed);
    if (off != SIZE_MAX)
        report(pp, "size %zu message %" PRIu64 ": xheader differs at byte %zu", size, m, off);
}

/* ---- --tag: data messages by pscom_tag_send/pscom_tag_recv ---- */

/* Message m of a phase in direction dir; receives match all 64 bits, so a message can only
   land in the receive meant for it, whatever the order of arrival. */
static inline uint64_t tag_of(uint64_t m, int dir)
{
    return m | (uint64_t)dir << 63;
}

static void tag_done(void *user, pscom_tag_status_t status, const pscom_tag_info_t *info)
{
    struct tag_op *op = user;

    op->status = status;
    if (info)
        op->info = *info;
    op->done = 1;
}

/* Poll as pscom_wait does: spin, after 20 us without progress also yield the CPU (another
   process may need it, e.g. the peer on a busy machine), after 1 ms block in 1 ms steps. */
static void tag_wait_idle(struct tag_op *op)
{
    double idle_since = 0, t;
    unsigned idle = 0;

    while (!op->done) {
        if (pscom_progress(0)) {
            idle = 0;
            idle_since = 0;
            continue;
        }
        if (++idle < 64)
            continue;
        t = now();
        if (!idle_since)
            idle_since = t;
        else if (t - idle_since >= 1e-3)
            pscom_progress(1);
        else if (t - idle_since >= 20e-6)
            sched_yield();
    }
}

static inline void tag_wait(struct tag_op *op)
{
    if (!op->done)
        tag_wait_idle(op);
}

static inline void tag_send(struct pp *pp, struct tag_op *op, uint64_t tag, const void *buf,
                            size_t len)
{
    int rc;

    op->done = 0;
    rc = pscom_tag_send(pp->con, tag, buf, len, 0, op);
    if (rc < 0)
        die("pscom_tag_send failed: %s", pscom_err_str((pscom_err_t)rc));
    if (rc > 0) { /* sent at once: no done() follows */
        op->status = PSCOM_TAG_DONE;
        op->done = 1;
    }
}

static inline void tag_check_send(struct tag_op *op)
{
    tag_wait(op);
    if (op->status != PSCOM_TAG_DONE)
        die("tagged send failed: status %d", (int)op->status);
}

static inline void tag_post_recv(struct pp *pp, struct tag_op *op, uint64_t tag, void *buf,
                                 size_t len)
{
    void *handle;
    int rc;

    op->done = 0;
    rc = pscom_tag_recv(pp->sock, tag, ~(uint64_t)0, buf, len, op, &handle);
    if (rc < 0)
        die("pscom_tag_recv failed: %s", pscom_err_str((pscom_err_t)rc));
}

/* Wait for the receive of message m into buf and check it, as check_recv does. */
static inline void tag_check_recv(struct pp *pp, struct tag_op *op, const void *buf, size_t size,
                                  uint64_t m, int dir)
{
    size_t off;

    tag_wait(op);
    if (op->status != PSCOM_TAG_DONE && op->status != PSCOM_TAG_TRUNCATED)
        die("tagged receive of message %" PRIu64 " (size %zu) failed: status %d", m, size,
            (int)op->status);
    progress();
    if (op->status == PSCOM_TAG_TRUNCATED || op->info.len != size ||
        op->info.tag != tag_of(m, dir)) {
        report(pp,
               "size %zu message %" PRIu64 ": got %zu bytes with tag 0x%" PRIx64
               ", want %zu with tag 0x%" PRIx64 "%s",
               size, m, op->info.len, op->info.tag, size, tag_of(m, dir),
               op->status == PSCOM_TAG_TRUNCATED ? " (truncated)" : "");
        return;
    }
    if (!pp->verify)
        return;
    off = check(buf, size, seed_of(size, m, dir));
    if (off != SIZE_MAX)
        report(pp, "size %zu message %" PRIu64 ": data differs at byte %zu", size, m, off);
}

/* Right after the socket is made, before its first connection. */
static void tag_enable(pscom_socket_t *sock)
{
    if (!pscom_socket_tag_matching(sock, tag_done, PSCOM_TAG_DONE_INLINE))
        die("--tag: tag matching in the transport is not available here; it needs ucp as the "
            "only transport: set PSP_SHM=0 PSP_TCP=0 (and UCX_TLS as wanted, e.g. "
            "posix,cma,self or tcp; PSP_UCP_TAG must not be 0). PSP_DEBUG=2 tells why.");
}

/* pscom_init and this side's socket, named name, matching tags with --tag */
static pscom_socket_t *open_socket(const char *name)
{
    pscom_err_t err = pscom_init(PSCOM_VERSION);
    if (err != PSCOM_SUCCESS)
        die("pscom_init failed: %s", pscom_err_str(err));
    pscom_socket_t *sock = pscom_open_socket(0, 0);
    if (!sock)
        die("pscom_open_socket failed");
    sock->ops.con_error = on_con_error;
    if (opt.tag)
        tag_enable(sock);
    pscom_socket_set_name(sock, name);
    return sock;
}

static void ctl_post_recv(struct pp *pp)
{
    pscom_request_t *r = pp->ctl_r;

    r->connection = pp->con; /* NULL before the server knows its peer: any connection */
    r->socket = pp->sock;
    r->data = &pp->cin;
    r->data_len = sizeof(pp->cin);
    pscom_post_recv(r);
}

static const struct ctl *ctl_wait(struct pp *pp, uint32_t cmd)
{
    pscom_request_t *r = pp->ctl_r;

    pscom_wait(r);
    check_done(r, "control receive");
    progress();
    if (r->data_len != sizeof(pp->cin) || pp->cin.magic != PP_MAGIC)
        die("protocol error: unexpected message of %zu bytes (peer not a pscom_pp of this "
            "version?)",
            r->data_len);
    if (cmd && pp->cin.cmd != cmd)
        die("protocol error: control message %u, expected %u", pp->cin.cmd, cmd);
    return &pp->cin;
}

static void ctl_flush(struct pp *pp)
{
    if (pp->ctl_s_posted) {
        pscom_wait(pp->ctl_s);
        check_done(pp->ctl_s, "control send");
        pp->ctl_s_posted = 0;
    }
}

/* Send c; the previous control send is waited for lazily, here, before its buffer is reused. */
static void ctl_post(struct pp *pp, const struct ctl *c)
{
    pscom_request_t *s = pp->ctl_s;

    ctl_flush(pp);
    pp->cout = *c;
    pp->cout.magic = PP_MAGIC;
    s->connection = pp->con;
    s->data = &pp->cout;
    s->data_len = sizeof(pp->cout);
    s->xheader_len = 0;
    pscom_post_send(s);
    pp->ctl_s_posted = 1;
}

/* bandwidth phases: the next request slot; after each window of messages the server acks and
   the client waits for that ack (and posts the receive of the next, if more follow) */
static void window_step_server(struct pp *pp, unsigned *j, unsigned *w, unsigned depth,
                               unsigned window)
{
    if (++*j == depth)
        *j = 0;
    if (++*w == window) {
        *w = 0;
        ctl_post(pp, &(struct ctl){.cmd = CMD_ACK});
    }
}

static void window_step_client(struct pp *pp, unsigned *j, unsigned *w, unsigned depth,
                               unsigned window, int more)
{
    if (++*j == depth)
        *j = 0;
    if (++*w == window) {
        *w = 0;
        ctl_wait(pp, CMD_ACK);
        if (more)
            ctl_post_recv(pp);
    }
}

static void *alloc_buf(size_t size)
{
    size_t len = (size + 4095) & ~(size_t)4095;
    void *p = aligned_alloc(4096, len ? len : 4096);

    if (!p)
        die("cannot allocate a buffer of %zu bytes", size);
    memset(p, 0, len); /* fault the pages in now, not in the first timed iterations */
    return p;
}

static pscom_request_t *new_req(unsigned xheader)
{
    pscom_request_t *r = pscom_request_create(xheader, 0);

    if (!r)
        die("pscom_request_create failed");
    return r;
}

static void setup(struct pp *pp, size_t bufsize, unsigned nreq, unsigned xheader, int verify)
{
    unsigned i;

    pp->bufsize = bufsize;
    pp->sbuf = alloc_buf(bufsize);
    pp->rbuf = alloc_buf(bufsize);
    pp->nreq = nreq;
    pp->xheader = xheader;
    pp->verify = verify;
    pp->sreq = calloc(nreq, sizeof(*pp->sreq));
    pp->rreq = calloc(nreq, sizeof(*pp->rreq));
    if (opt.tag) {
        pp->sop = calloc(nreq, sizeof(*pp->sop));
        pp->rop = calloc(nreq, sizeof(*pp->rop));
    }
    if (!pp->sreq || !pp->rreq || (opt.tag && (!pp->sop || !pp->rop)))
        die("out of memory");
    for (i = 0; i < nreq; i++) {
        pp->sreq[i] = new_req(xheader);
        pp->rreq[i] = new_req(xheader);
    }
}

/* Everything is DONE here; freeing keeps sanitizer builds (SANITIZE=address) quiet. */
static void teardown(struct pp *pp)
{
    unsigned i;

    for (i = 0; i < pp->nreq; i++) {
        pscom_request_free(pp->sreq[i]);
        pscom_request_free(pp->rreq[i]);
    }
    pscom_request_free(pp->ctl_s);
    pscom_request_free(pp->ctl_r);
    free(pp->sreq);
    free(pp->rreq);
    free(pp->sop);
    free(pp->rop);
    free(pp->sbuf);
    free(pp->rbuf);
}

/* ---- server ---- */

static void server_lat_tag(struct pp *pp, const struct ctl *c)
{
    struct tag_op *s = &pp->sop[0], *r = &pp->rop[0];
    size_t size = c->size;
    uint64_t m, iters = c->iters;

    if (iters)
        tag_post_recv(pp, r, tag_of(0, DIR_PING), pp->rbuf, pp->bufsize);
    ctl_post(pp, &(struct ctl){.cmd = CMD_READY});
    ctl_flush(pp);

    for (m = 0; m < iters; m++) {
        tag_check_recv(pp, r, pp->rbuf, size, m, DIR_PING);
        if (m + 1 < iters)
            tag_post_recv(pp, r, tag_of(m + 1, DIR_PING), pp->rbuf, pp->bufsize);
        if (pp->verify)
            fill(pp->sbuf, size, seed_of(size, m, DIR_PONG));
        tag_send(pp, s, tag_of(m, DIR_PONG), pp->sbuf, size);
        tag_check_send(s);
    }
}

/* The ping-pong's two requests: size bytes from sbuf to the peer, a message into rbuf */
static void lat_reqs(struct pp *pp, size_t size)
{
    pscom_request_t *s = pp->sreq[0], *r = pp->rreq[0];

    s->connection = pp->con;
    s->data = pp->sbuf;
    s->data_len = size;
    s->xheader_len = pp->xheader;
    r->connection = pp->con;
    r->data = pp->rbuf;
    r->data_len = pp->bufsize;
}

static void server_lat(struct pp *pp, const struct ctl *c)
{
    pscom_request_t *s = pp->sreq[0], *r = pp->rreq[0];
    size_t size = c->size;
    uint64_t m, iters = c->iters;

    if (opt.tag) {
        server_lat_tag(pp, c);
        return;
    }

    lat_reqs(pp, size);
    pscom_post_recv(r);
    ctl_post(pp, &(struct ctl){.cmd = CMD_READY});
    ctl_flush(pp);

    for (m = 0; m < iters; m++) {
        pscom_wait(r);
        check_recv(pp, r, size, m, DIR_PING);
        /* Re-post before answering: the next ping can then never be unexpected. */
        if (m + 1 < iters) {
            r->data_len = pp->bufsize;
            pscom_post_recv(r);
        }
        if (pp->verify)
            fill_msg(pp, s, size, m, DIR_PONG);
        pscom_post_send(s);
        pscom_wait(s);
        check_done(s, "send");
    }
}

static void server_bw_tag(struct pp *pp, const struct ctl *c)
{
    size_t size = c->size;
    unsigned j, w, window = c->window, depth = c->depth, nslots = c->nslots;
    uint64_t m, nmsg = c->iters * window;

    for (j = 0; j < depth && j < nmsg; j++)
        tag_post_recv(pp, &pp->rop[j], tag_of(j, DIR_PING), pp->rbuf + (j % nslots) * size, size);
    ctl_post(pp, &(struct ctl){.cmd = CMD_READY});

    for (m = 0, j = 0, w = 0; m < nmsg; m++) {
        char *buf = pp->rbuf + (j % nslots) * size;

        tag_check_recv(pp, &pp->rop[j], buf, size, m, DIR_PING);
        if (m + depth < nmsg)
            tag_post_recv(pp, &pp->rop[j], tag_of(m + depth, DIR_PING), buf, size);
        window_step_server(pp, &j, &w, depth, window);
    }
    ctl_flush(pp);
}

static void server_bw(struct pp *pp, const struct ctl *c)
{
    size_t size = c->size;
    unsigned j, w, window = c->window, depth = c->depth, nslots = c->nslots;
    uint64_t m, nmsg = c->iters * window;

    if (!window || !depth || !nslots || depth > pp->nreq || nslots > depth ||
        (uint64_t)nslots * size > pp->bufsize)
        die("protocol error: bad bandwidth phase (window %u depth %u slots %u size %zu)", window,
            depth, nslots, size);
    if (opt.tag) {
        server_bw_tag(pp, c);
        return;
    }
    for (j = 0; j < depth; j++) {
        pscom_request_t *r = pp->rreq[j];
        r->connection = pp->con;
        r->data = pp->rbuf + (j % nslots) * size;
        if (j < nmsg) {
            r->data_len = size;
            pscom_post_recv(r);
        }
    }
    ctl_post(pp, &(struct ctl){.cmd = CMD_READY});

    for (m = 0, j = 0, w = 0; m < nmsg; m++) {
        pscom_request_t *r = pp->rreq[j];

        pscom_wait(r);
        check_recv(pp, r, size, m, DIR_PING);
        if (m + depth < nmsg) {
            r->data_len = size;
            pscom_post_recv(r);
        }
        window_step_server(pp, &j, &w, depth, window);
    }
    ctl_flush(pp);
}

static int server_main(int ep_fd)
{
    struct pp pp = {0};
    const struct ctl *c;
    pscom_err_t err;
    const char *ep;

    start_watchdog();
    pp.sock = open_socket("pp_server");
    err = pscom_listen(pp.sock, opt.port);
    if (err != PSCOM_SUCCESS)
        die("cannot listen on port %d: %s", opt.port, pscom_err_str(err));
    ep = pscom_socket_get_ep_str(pp.sock);
    if (!ep)
        die("listening socket has no endpoint string");
    if (ep_fd >= 0) {
        dprintf(ep_fd, "%s\n", ep);
        close(ep_fd);
    } else {
        printf("ep: %s\n", ep);
        fflush(stdout);
    }

    /* HELLO from any connection tells us the peer and the buffer and request sizes. */
    pp.ctl_s = new_req(0);
    pp.ctl_r = new_req(0);
    ctl_post_recv(&pp);
    c = ctl_wait(&pp, CMD_HELLO);
    pp.con = pp.ctl_r->connection;
    pscom_stop_listen(pp.sock); /* one peer only */
    if (!c->window || c->window > MAX_WINDOW || c->xheader > PSCOM_XHEADER_MAX ||
        (opt.tag && c->xheader))
        die("protocol error: bad HELLO (window %u, xheader %u%s)", c->window, c->xheader,
            opt.tag ? ", --tag" : "");
    if (ep_fd < 0) {
        printf("peer: %s\n", pscom_con_str(pp.con));
        fflush(stdout);
    }
    setup(&pp, c->size, c->window, c->xheader, c->verify);
    ctl_post(&pp, &(struct ctl){.cmd = CMD_HELLO});

    for (;;) {
        ctl_post_recv(&pp);
        c = ctl_wait(&pp, 0);
        if (c->cmd == CMD_LAT) {
            server_lat(&pp, c);
        } else if (c->cmd == CMD_BW) {
            server_bw(&pp, c);
        } else if (c->cmd == CMD_QUIT) {
            g_done = 1;
            ctl_post(&pp, &(struct ctl){.cmd = CMD_QUIT,
                                        .errors = pp.errors < UINT32_MAX ? (uint32_t)pp.errors
                                                                         : UINT32_MAX});
            ctl_flush(&pp);
            break;
        } else {
            die("protocol error: unknown command %u", c->cmd);
        }
    }
    pscom_close_socket(pp.sock);
    teardown(&pp);
    if (ep_fd < 0)
        printf("done: %lu errors\n", pp.errors);
    return pp.errors ? 1 : 0;
}

/* ---- client ---- */

static double client_lat_tag(struct pp *pp, size_t size, uint64_t iters)
{
    struct tag_op *s = &pp->sop[0], *r = &pp->rop[0];
    uint64_t m;
    double t0;

    t0 = now();
    for (m = 0; m < iters; m++) {
        if (pp->verify)
            fill(pp->sbuf, size, seed_of(size, m, DIR_PING));
        /* Receive posted before the send: the pong never lands in the unexpected queue. */
        tag_post_recv(pp, r, tag_of(m, DIR_PONG), pp->rbuf, pp->bufsize);
        tag_send(pp, s, tag_of(m, DIR_PING), pp->sbuf, size);
        tag_check_send(s);
        tag_check_recv(pp, r, pp->rbuf, size, m, DIR_PONG);
    }
    return now() - t0;
}

static double client_lat(struct pp *pp, size_t size, uint64_t iters)
{
    pscom_request_t *s = pp->sreq[0], *r = pp->rreq[0];
    uint64_t m;
    double t0;

    lat_reqs(pp, size);
    t0 = now();
    for (m = 0; m < iters; m++) {
        if (pp->verify)
            fill_msg(pp, s, size, m, DIR_PING);
        /* Receive posted before the send: the pong never lands in the unexpected queue. */
        r->data_len = pp->bufsize;
        pscom_post_recv(r);
        pscom_post_send(s);
        pscom_wait(s);
        check_done(s, "send");
        pscom_wait(r);
        check_recv(pp, r, size, m, DIR_PONG);
    }
    return now() - t0;
}

static double client_bw_tag(struct pp *pp, size_t size, uint64_t iters, unsigned depth,
                            unsigned nslots)
{
    unsigned j, w, window = opt.window;
    uint64_t m, nmsg = iters * window;
    double t0;

    t0 = now();
    ctl_post_recv(pp); /* the first ack */
    for (m = 0, j = 0, w = 0; m < nmsg; m++) {
        char *buf = pp->sbuf + (j % nslots) * size;

        if (m >= depth)
            tag_check_send(&pp->sop[j]);
        if (pp->verify)
            fill(buf, size, seed_of(size, m, DIR_PING));
        tag_send(pp, &pp->sop[j], tag_of(m, DIR_PING), buf, size);
        window_step_client(pp, &j, &w, depth, window, m + 1 < nmsg);
    }
    for (j = 0; j < depth && j < nmsg; j++)
        tag_check_send(&pp->sop[j]);
    return now() - t0;
}

static double client_bw(struct pp *pp, size_t size, uint64_t iters, unsigned depth, unsigned nslots)
{
    unsigned j, w, window = opt.window;
    uint64_t m, nmsg = iters * window;
    double t0;

    for (j = 0; j < depth; j++) {
        pscom_request_t *s = pp->sreq[j];
        s->connection = pp->con;
        s->data = pp->sbuf + (j % nslots) * size;
        s->data_len = size;
        s->xheader_len = pp->xheader;
    }

    t0 = now();
    ctl_post_recv(pp); /* the first ack */
    for (m = 0, j = 0, w = 0; m < nmsg; m++) {
        pscom_request_t *s = pp->sreq[j];

        if (m >= depth) {
            pscom_wait(s);
            check_done(s, "send");
        }
        if (pp->verify)
            fill_msg(pp, s, size, m, DIR_PING);
        pscom_post_send(s);
        window_step_client(pp, &j, &w, depth, window, m + 1 < nmsg);
    }
    for (j = 0; j < depth && j < nmsg; j++) {
        pscom_wait(pp->sreq[j]);
        check_done(pp->sreq[j], "send");
    }
    return now() - t0;
}

/* One phase: tell the server, wait until it has posted its receives, run. Returns seconds. */
static double run_phase(struct pp *pp, uint32_t cmd, size_t size, uint64_t iters)
{
    struct ctl c = {.cmd = cmd, .size = size, .iters = iters, .window = opt.window};

    /* bw: distinct buffer slots per message where they fit. --verify must not let messages
       share a slot while in flight, so it limits the depth to the slots instead. */
    c.nslots = size ? (unsigned)(pp->bufsize / size < opt.window ? pp->bufsize / size : opt.window)
                    : opt.window;
    c.depth = opt.verify && c.nslots < opt.window ? c.nslots : opt.window;
    ctl_post_recv(pp);
    ctl_post(pp, &c);
    ctl_wait(pp, CMD_READY);
    ctl_flush(pp);
    if (cmd == CMD_LAT)
        return opt.tag ? client_lat_tag(pp, size, iters) : client_lat(pp, size, iters);
    return opt.tag ? client_bw_tag(pp, size, iters, c.depth, c.nslots)
                   : client_bw(pp, size, iters, c.depth, c.nslots);
}

/*
 * Warm up, then (adaptive) scale the loops towards TARGET_S from the last run's time, growing at
 * most 100x a step, until a run lasts ACCEPT_S: only that run is reported. Predicting from one
 * calibration run is not enough on a loaded machine, where a calibration run may be slowed by
 * 100x and the real run then lasts a millisecond.
 */
static double measure(struct pp *pp, uint32_t cmd, size_t size, uint64_t *loops)
{
    int lat = cmd == CMD_LAT;
    uint64_t n = lat ? WARM_LAT : WARM_BW, min = lat ? MIN_LAT : MIN_BW;
    double t = run_phase(pp, cmd, size, n);
    int k;

    if (opt.loops) {
        *loops = opt.loops;
        return run_phase(pp, cmd, size, opt.loops);
    }
    for (k = 0; k < 10; k++) {
        double f = t > 0 ? TARGET_S / t : 100, next = (double)n * (f > 100 ? 100 : f);

        n = next < (double)min ? min : next > (double)MAX_LOOPS ? MAX_LOOPS : (uint64_t)next;
        t = run_phase(pp, cmd, size, n);
        if (t >= ACCEPT_S || n == min || n == MAX_LOOPS)
            break;
    }
    *loops = n;
    return t;
}

static void run_mode(struct pp *pp, uint32_t cmd)
{
    int lat = cmd == CMD_LAT;
    unsigned i;

    if (!opt.csv) {
        if (lat)
            printf("# latency: ping-pong, lat_us = round trip / 2\n");
        else
            printf("# bandwidth: window %u, one ack per window, us = time per message\n",
                   opt.window);
        printf("#%9s %12s %12s %12s\n", "size", lat ? "loops" : "windows",
               lat ? "lat_us" : "us/msg", "MB/s");
    }
    for (i = 0; i < opt.nsizes; i++) {
        size_t size = opt.sizes[i];
        uint64_t loops;
        double t = measure(pp, cmd, size, &loops);
        double nmsg = (double)loops * (lat ? 2.0 : opt.window);
        double us = t / nmsg * 1e6;
        double mbs = us > 0 ? (double)size / us : 0; /* bytes per us = 10^6 B/s */

        if (opt.csv)
            printf("%s,%s,%zu,%" PRIu64 ",%.3f,%.2f\n", lat ? "lat" : "bw", pp->con->transport,
                   size, loops, us, mbs);
        else
            printf("%10zu %12" PRIu64 " %12.3f %12.2f\n", size, loops, us, mbs);
        fflush(stdout);
    }
}

static int client_main(const char *ep)
{
    struct pp pp = {0};
    pscom_err_t err;
    size_t bufsize = 0;
    uint32_t server_errors;
    unsigned i;

    pp.sock = open_socket("pp_client");
    pp.con = pscom_open_connection(pp.sock);
    if (!pp.con)
        die("pscom_open_connection failed");
    err = pscom_connect(pp.con, ep, PSCOM_CON_FLAG_DIRECT);
    if (err != PSCOM_SUCCESS)
        die("cannot connect to '%s': %s%s", ep, pscom_err_str(err),
            opt.tag ? " (with --tag, the server needs --tag too)"
                    : " (if the server runs with --tag, so must the client)");

    for (i = 0; i < opt.nsizes; i++)
        bufsize = opt.sizes[i] > bufsize ? opt.sizes[i] : bufsize;
    setup(&pp, bufsize, opt.bw ? opt.window : 1, opt.xheader, opt.verify);
    pp.ctl_s = new_req(0);
    pp.ctl_r = new_req(0);
    ctl_post_recv(&pp);
    ctl_post(&pp, &(struct ctl){.cmd = CMD_HELLO,
                                .size = bufsize,
                                .window = pp.nreq,
                                .xheader = opt.xheader,
                                .verify = (uint32_t)opt.verify});
    ctl_wait(&pp, CMD_HELLO);

    if (!opt.csv) {
        printf("# pscom_pp: libpscom %s, transport %s%s, peer %s\n", pscom_version_str(),
               pp.con->transport,
               opt.tag ? " (--tag: data by pscom_tag_send/recv, matched in the transport)" : "",
               pscom_con_str(pp.con));
        printf("# xheader %u bytes, verify %s, MB/s = 10^6 bytes/s\n", opt.xheader,
               opt.verify ? "on (timings include filling and checking)" : "off");
    } else {
        printf("mode,transport,size,loops,usec,mb_per_s\n");
    }
    fflush(stdout);
    if (opt.lat)
        run_mode(&pp, CMD_LAT);
    if (opt.bw)
        run_mode(&pp, CMD_BW);

    /* The server closes right after its QUIT reply: from now on a close is no news. A failure
       still shows, as a failed request. */
    g_done = 1;
    ctl_post_recv(&pp);
    ctl_post(&pp, &(struct ctl){.cmd = CMD_QUIT});
    server_errors = ctl_wait(&pp, CMD_QUIT)->errors;
    ctl_flush(&pp);
    pscom_close_connection(pp.con);
    pscom_close_socket(pp.sock);
    teardown(&pp);

    if (opt.verify || pp.errors || server_errors)
        fprintf(opt.csv ? stderr : stdout, "# errors: %lu seen by the client, %u by the server\n",
                pp.errors, server_errors);
    return pp.errors || server_errors ? 1 : 0;
}

/* ---- command line ---- */

static void usage(void)
{
    printf(
        "Usage: pscom_pp [--fork] [OPTION]...      measure against a forked server (default)\n"
        "       pscom_pp -s [-p PORT] [--tag] [--timeout SEC]  serve one client\n"
        "       pscom_pp [OPTION]... EP_STR            measure against a server\n"
        "Ping-pong latency and streaming bandwidth over libpscom. The library chooses the\n"
        "transport (steer it with PSP_SHM=0, PSP_TCP=0, ...); the one used is printed.\n"
        "\n"
        "  -s, --server       listen (any port, or -p PORT), print \"ep: <ep_str>\", serve one\n"
        "                     client; the client decides sizes, window, xheader and verify\n"
        "  -p, --port PORT    port for the server\n"
        "      --fork         fork a server child and measure against it\n"
        "      --lat          ping-pong latency (default)\n"
        "      --bw           streaming bandwidth: WINDOW sends, then one ack back\n"
        "      --both         --lat, then --bw\n"
        "      --minsize N    smallest size (default 0); sizes double: 0,1,2,4,...\n"
        "      --maxsize N    largest size (default 64M)\n"
        "      --sizes A,B,.. explicit sizes instead of --minsize/--maxsize\n"
        "                     (sizes take k, M, G suffixes: powers of 1024)\n"
        "      --loops N      timed iterations per size (default: adaptive, ~%.1f s each)\n"
        "      --window W     --bw: messages in flight per iteration (default 64)\n"
        "      --xheader N    bytes of user header per message (default 0, max %d)\n"
        "      --verify       check the content of every message; exit 1 on errors\n"
        "      --tag          data messages by the tag API (pscom_tag_send/pscom_tag_recv,\n"
        "                     matched in the transport), not pscom requests; needs ucp as\n"
        "                     the only transport (PSP_SHM=0 PSP_TCP=0) and no --xheader;\n"
        "                     a server for such a client must run with --tag too\n"
        "      --csv          print CSV: mode,transport,size,loops,usec,mb_per_s\n"
        "      --timeout SEC  give up after SEC seconds without progress (default 120, 0: never)\n"
        "  -h, --help         show this help\n"
        "      --version      show the version\n",
        TARGET_S, PSCOM_XHEADER_MAX);
}

/* A number with an optional k/M/G suffix (powers of 1024); usage error otherwise. */
static uint64_t parse_num(const char *s, const char *what, uint64_t max)
{
    static const char suffixes[] = "kKmMgG";
    const char *sfx;
    char *end;
    unsigned long long v;
    int shift = 0;

    if (*s < '0' || *s > '9') /* strtoull would take "-1" and " 1" */
        usage_error("%s: '%s' is not a number", what, s);
    v = strtoull(s, &end, 10);
    sfx = *end ? strchr(suffixes, *end) : NULL;
    if (sfx) {
        shift = 10 * (int)(1 + (sfx - suffixes) / 2);
        end++;
    }
    if (*end)
        usage_error("%s: '%s' is not a number (suffixes: k, M, G)", what, s);
    if (v > (max >> shift))
        usage_error("%s: '%s' is too large (at most %" PRIu64 ")", what, s, max);
    return (uint64_t)v << shift;
}

static void make_sizes(const char *list)
{
    const size_t max = (size_t)1 << 40; /* no one has that memory twice; avoids overflow */

    opt.nsizes = 0;
    if (list) {
        char *copy = strdup(list), *tok, *save = NULL;
        if (!copy)
            die("out of memory");
        for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            if (opt.nsizes == MAX_SIZES)
                usage_error("--sizes: more than %d sizes", MAX_SIZES);
            opt.sizes[opt.nsizes++] = parse_num(tok, "--sizes", max);
        }
        free(copy);
        if (!opt.nsizes)
            usage_error("--sizes: empty list");
        return;
    }
    if (opt.minsize > opt.maxsize)
        usage_error("--minsize %zu is larger than --maxsize %zu", opt.minsize, opt.maxsize);
    if (opt.maxsize > max)
        usage_error("--maxsize: at most %zu", max);
    for (size_t s = opt.minsize; s <= opt.maxsize; s = s ? 2 * s : 1)
        opt.sizes[opt.nsizes++] = s;
    if (opt.sizes[opt.nsizes - 1] != opt.maxsize) /* end on maxsize even if no power of 2 */
        opt.sizes[opt.nsizes++] = opt.maxsize;
}

static void parse_args(int argc, char **argv)
{
    enum {
        O_FORK = 256,
        O_LAT,
        O_BW,
        O_BOTH,
        O_MIN,
        O_MAX,
        O_SIZES,
        O_LOOPS,
        O_WIN,
        O_XH,
        O_VERIFY,
        O_TAG,
        O_CSV,
        O_TIMEOUT,
        O_VERSION
    };
    static const struct option longopts[] = {
        {"server", no_argument, NULL, 's'},
        {"port", required_argument, NULL, 'p'},
        {"fork", no_argument, NULL, O_FORK},
        {"lat", no_argument, NULL, O_LAT},
        {"bw", no_argument, NULL, O_BW},
        {"both", no_argument, NULL, O_BOTH},
        {"minsize", required_argument, NULL, O_MIN},
        {"maxsize", required_argument, NULL, O_MAX},
        {"sizes", required_argument, NULL, O_SIZES},
        {"loops", required_argument, NULL, O_LOOPS},
        {"window", required_argument, NULL, O_WIN},
        {"xheader", required_argument, NULL, O_XH},
        {"verify", no_argument, NULL, O_VERIFY},
        {"tag", no_argument, NULL, O_TAG},
        {"csv", no_argument, NULL, O_CSV},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, O_VERSION},
        {NULL, 0, NULL, 0},
    };
    const char *sizes = NULL;
    int c, port_set = 0;

    while ((c = getopt_long(argc, argv, "sp:h", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            opt.server = 1;
            break;
        case 'p':
            opt.port = (int)parse_num(optarg, "--port", 65535);
            port_set = 1;
            break;
        case O_FORK:
            opt.fork_mode = 1;
            break;
        case O_LAT:
            opt.lat = 1;
            break;
        case O_BW:
            opt.bw = 1;
            break;
        case O_BOTH:
            opt.lat = opt.bw = 1;
            break;
        case O_MIN:
            opt.minsize = parse_num(optarg, "--minsize", SIZE_MAX);
            break;
        case O_MAX:
            opt.maxsize = parse_num(optarg, "--maxsize", SIZE_MAX);
            break;
        case O_SIZES:
            sizes = optarg;
            break;
        case O_LOOPS:
            opt.loops = parse_num(optarg, "--loops", MAX_LOOPS);
            break;
        case O_WIN:
            opt.window = (unsigned)parse_num(optarg, "--window", MAX_WINDOW);
            break;
        case O_XH:
            opt.xheader = (unsigned)parse_num(optarg, "--xheader", PSCOM_XHEADER_MAX);
            break;
        case O_VERIFY:
            opt.verify = 1;
            break;
        case O_TAG:
            opt.tag = 1;
            break;
        case O_CSV:
            opt.csv = 1;
            break;
        case O_TIMEOUT:
            opt.timeout = (unsigned)parse_num(optarg, "--timeout", 1u << 30);
            break;
        case 'h':
            usage();
            exit(0);
        case O_VERSION:
            if (pscom_init(PSCOM_VERSION) != PSCOM_SUCCESS)
                die("pscom_init failed");
            printf("pscom_pp (libpscom) %s\n", pscom_version_str());
            exit(0);
        default: /* getopt has printed what is wrong */
            fprintf(stderr, "Try 'pscom_pp --help' for more information.\n");
            exit(2);
        }
    }
    if (optind < argc)
        opt.ep = argv[optind++];
    if (optind < argc)
        usage_error("unexpected argument '%s'", argv[optind]);
    if (opt.server + opt.fork_mode + !!opt.ep > 1)
        usage_error("choose one of --server, --fork and EP_STR");
    if (port_set && opt.ep)
        usage_error("--port is for the server (-s or --fork)");
    if (!opt.window)
        usage_error("--window must be at least 1");
    if (opt.tag && opt.xheader)
        usage_error("--xheader is not possible with --tag (tagged messages carry no header)");
    if (!opt.server && !opt.ep)
        opt.fork_mode = 1; /* the default */
    if (!opt.lat && !opt.bw)
        opt.lat = 1;
    make_sizes(sizes);
}

/* Fork the server before either side calls pscom_init; its ep comes back through a pipe. */
static const char *fork_server(char *ep, size_t len)
{
    int fds[2], status;
    size_t n = 0;
    ssize_t rc;
    pid_t parent = getpid(), pid;

    if (pipe(fds))
        die("pipe: %m");
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0)
        die("fork: %m");
    if (pid == 0) {
        close(fds[0]);
        prog = "pscom_pp (server)";
        g_is_server = 1;
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the client */
        if (getppid() != parent)
            _exit(1);
        exit(server_main(fds[1]));
    }
    g_child = pid;
    close(fds[1]);
    while (n + 1 < len && (rc = read(fds[0], ep + n, len - 1 - n)) != 0) {
        if (rc < 0)
            die("reading the server's endpoint: %m");
        n += (size_t)rc;
        if (memchr(ep, '\n', n))
            break;
    }
    close(fds[0]);
    ep[n] = '\0';
    if (!n || ep[n - 1] != '\n') {
        g_child = 0;
        waitpid(pid, &status, 0);
        die("the server child did not start");
    }
    ep[n - 1] = '\0';
    return ep;
}

int main(int argc, char **argv)
{
    char ep[PSCOM_EP_STR_MAX + 2];
    int rc, status;

    parse_args(argc, argv);
    if (opt.server)
        return server_main(-1);
    start_watchdog();
    rc = client_main(opt.fork_mode ? fork_server(ep, sizeof(ep)) : opt.ep);
    if (g_child > 0) {
        if (waitpid(g_child, &status, 0) != g_child)
            die("waitpid: %m");
        g_child = 0;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "%s: the server child %s %d\n", prog,
                    WIFEXITED(status) ? "exited with status" : "was killed by signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
            rc = 1;
        }
    }
    return rc;
}
