/* fuzz_pscom.c - see fuzz_pscom.h */
#include "fuzz_pscom.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define OUT_MAX (256u << 10) /* bytes of what core writes that the harness keeps */

/* A peer's header may announce up to 2^48 bytes, and core allocates an unexpected message's
   buffer when its header comes (a process with that much memory takes it): allocations above
   32 MiB fail here (malloc returns NULL, the path a process without the memory takes) instead
   of ending the run as ASan's "allocation-size-too-big" or libFuzzer's malloc limit would. The
   inputs are far smaller, and larger buffers only cost time (ASan's shadow memory). */
const char *__asan_default_options(void)
{
    return "max_allocation_size_mb=32:allocator_may_return_null=1";
}

typedef struct fz_tr {
    uint8_t *out;
    size_t len;
    int overflow;
    int writing, again, dead; /* dead: closed while writing; freed when the write ends */
} fz_tr_t;

static void fz_tr_free(fz_tr_t *t)
{
    free(t->out);
    free(t);
}

static void fz_write_start(pscom_con_t *con)
{
    fz_tr_t *t = pscom_con_transport_data(con);
    if (!t || t->dead)
        return;
    if (t->writing) { /* a completion sent again: the running loop takes it */
        t->again = 1;
        return;
    }
    t->writing = 1;
    do {
        t->again = 0;
        struct iovec iov[3];
        int n;
        while (!t->dead && (n = pscom_write_get_iov(con, iov)) > 0) {
            size_t total = 0;
            for (int i = 0; i < n; i++) {
                size_t c = iov[i].iov_len;
                if (t->len + c > OUT_MAX) {
                    t->overflow = 1;
                    c = OUT_MAX - t->len;
                }
                memcpy(t->out + t->len, iov[i].iov_base, c);
                t->len += c;
                total += iov[i].iov_len;
            }
            pscom_write_done(con, total); /* may complete, call back, close (and free con) */
        }
    } while (!t->dead && t->again);
    t->writing = 0;
    if (t->dead)
        fz_tr_free(t);
}

static void fz_close(pscom_con_t *con)
{
    fz_tr_t *t = pscom_con_transport_data(con);
    pscom_con_set_transport(con, NULL, NULL);
    if (!t)
        return;
    t->dead = 1;
    if (!t->writing)
        fz_tr_free(t);
}

static const pscom_con_ops_t fz_ops = {.write_start = fz_write_start, .close = fz_close};

static void fz_start(pscom_con_t *con, int fd)
{
    (void)fd;
    fz_tr_t *t = calloc(1, sizeof(*t));
    if (t)
        t->out = malloc(OUT_MAX);
    if (!t || !t->out)
        pscom_fatal("fuzz harness: out of memory");
    pscom_con_set_transport(con, &fz_ops, t);
}

/* not registered: core offers it to no handshake; only fz_con_new starts connections on it */
static const pscom_plugin_t fz_plugin = {
    .name = "fuzz",
    .api_version = PSCOM_PLUGIN_API_VERSION,
    .con_start = fz_start,
};

void fz_pscom_init(const char *const *env)
{
    static int done;
    if (done)
        return;
    done = 1;
    if (!getenv("FUZZ_LOG"))
        setenv("PSP_DEBUG_OUT", "/dev/null", 1);
    for (; env && *env; env++)
        putenv((char *)*env);
    if (pscom_init(PSCOM_VERSION) != PSCOM_SUCCESS) {
        fprintf(stderr, "fuzz harness: pscom_init failed\n");
        abort();
    }
}

pscom_con_t *fz_con_new(pscom_sock_t *sock)
{
    pscom_con_t *con = pscom_con_create(sock);
    if (!con)
        pscom_fatal("fuzz harness: out of memory");
    pscom_con_established(con, &fz_plugin, -1);
    return con;
}

int fz_con_up(pscom_con_t *con)
{
    return con->pub.state == PSCOM_CON_STATE_RW && !con->closed;
}

void fz_con_feed(pscom_con_t *con, const void *buf, size_t len, uint32_t seed)
{
    const uint8_t *p = buf;
    static const size_t piece_max[4] = {0, 16, 256, 4096};
    size_t max = piece_max[seed & 3];
    int direct = (seed & 4) != 0;
    uint32_t x = seed | 1;
    while (len && fz_con_up(con)) {
        size_t n = len;
        if (max) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5; /* xorshift32 */
            n = 1 + x % max;
            if (n > len)
                n = len;
        }
        void *dst;
        size_t room = direct ? pscom_read_direct_buf(con, &dst) : 0;
        if (room) {
            if (n > room)
                n = room;
            memcpy(dst, p, n);
            pscom_read_direct_done(con, n);
        } else {
            pscom_read_feed(con, p, n);
        }
        p += n;
        len -= n;
    }
}

void fz_con_break(pscom_con_t *con)
{
    pscom_con_transport_failed(con, PSCOM_OP_READ, PSCOM_ERR_IOERROR, "the fuzz input ends");
}

const uint8_t *fz_out(pscom_con_t *con, size_t *len, int *overflow)
{
    fz_tr_t *t = con->ops == &fz_ops ? pscom_con_transport_data(con) : NULL;
    *len = t ? t->len : 0;
    if (overflow)
        *overflow = t ? t->overflow : 0;
    return t ? t->out : NULL;
}

void fz_out_clear(pscom_con_t *con)
{
    fz_tr_t *t = con->ops == &fz_ops ? pscom_con_transport_data(con) : NULL;
    if (t)
        t->len = t->overflow = 0;
}

int fz_msg_next(const uint8_t *buf, size_t len, size_t *off, fz_msg_t *m)
{
    while (*off + HDR_SIZE <= len) {
        memcpy(&m->hdr, buf + *off, HDR_SIZE);
        size_t need = HDR_SIZE + m->hdr.xheader_len;
        if (m->hdr.data_len > len - *off || need + m->hdr.data_len > len - *off)
            return 0;
        m->xh = buf + *off + HDR_SIZE;
        m->data = m->xh + m->hdr.xheader_len;
        *off += need + m->hdr.data_len;
        if (m->hdr.msg_type == PSCOM_MSGTYPE_USER)
            return 1;
        /* core's own messages (EOF, padding, rendezvous): not the harness's business */
    }
    return 0;
}

size_t fz_wire_msg(uint8_t *out, const void *xh, size_t xlen, const void *data, size_t dlen)
{
    pscom_put_header(out, MSGTYPE_USER, xlen, dlen);
    if (xlen)
        memcpy(out + HDR_SIZE, xh, xlen);
    if (dlen)
        memcpy(out + HDR_SIZE + xlen, data, dlen);
    return HDR_SIZE + xlen + dlen;
}

void fz_progress(int rounds)
{
    for (int i = 0; i < rounds; i++) {
        pscom_progress_poll();
        pscom_progress_block(0);
    }
}

const char *fz_seeds_dir(void)
{
    const char *d = getenv("FUZZ_SEEDS");
    return d && *d ? d : NULL;
}

void fz_seed(const char *name, const void *buf, size_t len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", fz_seeds_dir(), name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "fuzz harness: writing %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

/* ---- a real connection's bytes, for seeds ---- */

static int tcp_listener(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 4) ||
        getsockname(fd, (struct sockaddr *)&sa, &len))
        abort();
    *port = ntohs(sa.sin_port);
    return fd;
}

static int tcp_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                             .sin_port = htons((uint16_t)port)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
        abort();
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

typedef struct capture {
    uint8_t *buf;
    size_t len, max, *cuts;
    int n_cuts;
} capture_t;

/* move what is there from one end of the relay to the other; from the client: recorded */
static void relay(int from, int to, capture_t *c)
{
    uint8_t buf[4096];
    ssize_t n;
    while ((n = recv(from, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
        if (c && c->len + (size_t)n <= c->max) {
            memcpy(c->buf + c->len, buf, (size_t)n);
            c->len += (size_t)n;
            if (c->n_cuts < FZ_CUTS_MAX)
                c->cuts[c->n_cuts++] = c->len; /* a frame, or a message, ends here */
        }
        if (send(to, buf, (size_t)n, MSG_NOSIGNAL) != n)
            abort();
    }
}

size_t fz_capture_connect(pscom_socket_t *server, uint8_t *buf, size_t max, size_t *cuts,
                          int *n_cuts)
{
    capture_t c = {.buf = buf, .max = max, .cuts = cuts};
    /* the client: a pscom connection to server through the relay */
    pscom_socket_t *client = pscom_open_socket(0, 0);
    pscom_socket_set_name(client, "client");
    pscom_listen_addr(client, "127.0.0.1:0");
    int port, lfd = tcp_listener(&port), cfd = -1, sfd = -1;
    char ep[64];
    snprintf(ep, sizeof(ep), "127.0.0.1:%d@fz", port);
    pscom_connection_t *con = pscom_open_connection(client);
    pscom_connect(con, ep, PSCOM_CON_FLAG_ONDEMAND);
    pscom_con_connect_now(con);
    int sent = 0;
    for (int i = 0; i < 100000 && !(sent && pscom_con_settled(con) && i > 2000); i++) {
        fz_progress(1);
        if (cfd < 0 && (cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0)
            sfd = tcp_connect(server->listen_portno);
        if (cfd >= 0) {
            relay(cfd, sfd, &c);
            relay(sfd, cfd, NULL);
        }
        if (!sent && con->state == PSCOM_CON_STATE_RW) {
            sent = 1; /* its first messages: a user header, data, both, neither */
            pscom_send(con, "xheader", 7, NULL, 0);
            pscom_send(con, NULL, 0, "data", 4);
            pscom_send(con, "xh", 2, "a message of some bytes", 23);
            pscom_send(con, NULL, 0, NULL, 0);
        }
    }
    if (con->state != PSCOM_CON_STATE_RW || c.n_cuts < 3) {
        fprintf(stderr, "fuzz harness: no handshake captured\n");
        exit(1);
    }
    pscom_close_connection(con);
    for (int i = 0; i < 1000; i++) {
        fz_progress(1);
        relay(cfd, sfd, &c);
        relay(sfd, cfd, NULL);
    }
    close(cfd);
    close(sfd);
    close(lfd);
    pscom_close_socket(client);
    *n_cuts = c.n_cuts;
    return c.len;
}
