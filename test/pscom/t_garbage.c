/*
 * t_garbage.c - a listening pscom process gets garbage and broken handshakes on its port and
 * must survive: close those connections (with a log message), keep no fd, and keep serving
 * its real peer.
 *
 * rank 0: the pscom server. rank 1: its real pscom peer. rank 2: the attacker (plain sockets,
 * no pscom). rank 3: a pscom client (tcp only) that connects to rank 0 through a recording
 * proxy run by rank 2, so that the attacker has a real handshake and a real message header to
 * replay: truncated at every length, with every byte flipped, and with the message header's
 * version, xheader_len and data_len made invalid. The header is found in the recording by its
 * pscom_header_net_t (pscom.h); if the transport frames it differently those cases are skipped.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testutil.h"

#define MSG_TAG 0xcafe
#define MSG_SEQ 0x5eed
#define MSG_LEN 0x1234
#define NIDLE   3
#define MAXFAIL 3 /* stop a loop of attacks after this many failures */

/* ---- rank 2: plain sockets ------------------------------------------------------------------ */

static struct sockaddr_in server_addr;

static int dial(void)
{
    int fd = tu_dial(&server_addr);
    if (fd < 0)
        diag("  connect to the server: %s", strerror(errno));
    return fd;
}

/* the server may close on us: fine */
static void send_bytes(int fd, const void *buf, size_t len)
{
    tu_send_all(fd, buf, len);
}

/* 1 if the peer closed fd (EOF or reset) within secs; what it sends is read and dropped */
static int closed_within(int fd, double secs)
{
    double end = tu_now() + secs;
    char buf[4096];
    for (;;) {
        double left = end - tu_now();
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int rc;
        if (left <= 0)
            return 0;
        rc = poll(&pfd, 1, (int)(left * 1000) + 1);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            return 0;
        rc = (int)read(fd, buf, sizeof(buf));
        if (rc == 0 || (rc < 0 && errno != EINTR && errno != EAGAIN))
            return 1;
    }
}

enum { NOT_CLOSED = 0, CLOSED_AFTER_EOF = 1, CLOSED_EAGERLY = 2 };

/* Send buf on a new connection. half_close: send our EOF right away. Then wait for the server
   to close; if it does not within 5 s, send our EOF (if not yet) and wait 10 s more. */
static int attack(const void *buf, size_t len, int half_close)
{
    int fd = dial(), res = NOT_CLOSED;
    if (fd < 0)
        return NOT_CLOSED;
    send_bytes(fd, buf, len);
    if (half_close)
        shutdown(fd, SHUT_WR);
    if (closed_within(fd, half_close ? 10 : 5)) {
        res = half_close ? CLOSED_AFTER_EOF : CLOSED_EAGERLY;
    } else if (!half_close) {
        shutdown(fd, SHUT_WR);
        if (closed_within(fd, 10))
            res = CLOSED_AFTER_EOF;
    }
    close(fd);
    return res;
}

typedef struct recording {
    unsigned char *buf;
    size_t len, cap;
} recording_t;

static void rec_add(recording_t *r, const void *p, size_t n)
{
    if (r->len + n > r->cap) {
        r->cap = (r->len + n) * 2;
        r->buf = realloc(r->buf, r->cap);
    }
    memcpy(r->buf + r->len, p, n);
    r->len += n;
}

/* relay one client connection to the server, recording what the client sends */
static int proxy(int lfd, recording_t *rec)
{
    int cfd, sfd, cin = 1, sin = 1;
    double end = tu_now() + 20;
    char buf[65536];
    struct pollfd pfd = {.fd = lfd, .events = POLLIN};

    if (poll(&pfd, 1, 20000) != 1)
        return -1;
    cfd = accept(lfd, NULL, NULL);
    sfd = dial();
    if (cfd < 0 || sfd < 0)
        return -1;
    while ((cin || sin) && tu_now() < end) {
        struct pollfd p[2] = {{.fd = cin ? cfd : -1, .events = POLLIN},
                              {.fd = sin ? sfd : -1, .events = POLLIN}};
        if (poll(p, 2, 1000) < 0 && errno != EINTR)
            break;
        for (int i = 0; i < 2; i++) {
            ssize_t n;
            if (!p[i].revents)
                continue;
            n = read(p[i].fd, buf, sizeof(buf));
            if (n <= 0) {
                /* pass the EOF on */
                shutdown(i ? cfd : sfd, SHUT_WR);
                if (i)
                    sin = 0;
                else
                    cin = 0;
                continue;
            }
            if (!i)
                rec_add(rec, buf, (size_t)n);
            send_bytes(i ? cfd : sfd, buf, (size_t)n);
        }
    }
    close(cfd);
    close(sfd);
    return cin || sin ? -1 : 0;
}

/* offset of the user message's pscom_header_net_t in the recording, or -1 */
static long find_header(const recording_t *rec)
{
    pscom_header_net_t h = {.data_len = MSG_LEN, .xheader_len = TU_XH, .msg_type = 0};
    tu_xh_t xh = {.tag = MSG_TAG, .src = 3, .seq = MSG_SEQ};
    for (size_t i = 0; i + sizeof(h) + sizeof(xh) <= rec->len; i++) {
        const unsigned char *p = rec->buf + i;
        /* data_len, xheader_len, msg_type; skip version; reserved zero; then the xheader */
        if (!memcmp(p, &h, 11) && !memcmp(p + 12, "\0\0\0\0", 4) &&
            !memcmp(p + sizeof(h), &xh, sizeof(xh)))
            return (long)i;
    }
    return -1;
}

static void attacker(void)
{
    int lport, lfd = tu_listen_local(&lport), fails;
    int idle[NIDLE];
    char port[16];
    char **all;
    recording_t rec = {0};
    long hdr;
    size_t hs; /* bytes of handshake before the message header (or all) */
    unsigned char *rnd = malloc(4096);
    static const char http[] = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";

    snprintf(port, sizeof(port), "%d", lport);
    all = tu_allgather(port);
    if (!ok(tu_ep_sockaddr(all[0], &server_addr) == 0, "attacker: server endpoint %s parses",
            all[0]))
        exit(1);

    /* record rank 3's handshake and first message */
    fails = proxy(lfd, &rec);
    ok(fails == 0, "attacker: relayed a pscom client (%zu bytes recorded)", rec.len);
    close(lfd);
    hdr = find_header(&rec);
    hs = hdr >= 0 ? (size_t)hdr : rec.len;
    diag("  attacker: message header %s at offset %ld", hdr >= 0 ? "found" : "not found", hdr);
    tu_barrier(); /* A: recording done */
    tu_barrier(); /* A2: the server counted its fds */

    /* idle connections while the real peers talk */
    for (int i = 0; i < NIDLE; i++) {
        idle[i] = dial();
        if (i == 1 && idle[i] >= 0)
            send_bytes(idle[i], rec.buf, hs / 2); /* half a handshake, then silence */
    }
    tu_barrier(); /* B: the real peers talk now */
    tu_barrier(); /* C: they are done */
    for (int i = 0; i < NIDLE; i++)
        if (idle[i] >= 0)
            close(idle[i]);

    /* connect and close */
    for (int i = 0; i < 5; i++) {
        int fd = dial();
        if (fd >= 0)
            close(fd);
    }
    ok(1, "attacker: 5 connections opened and closed at once");

    /* garbage */
    tu_fill(rnd, 4096, 42);
    is(attack(rnd, 4096, 0), CLOSED_EAGERLY, "4 KiB of random bytes: the server closes");
    is(attack(http, sizeof(http) - 1, 0) != NOT_CLOSED, 1,
       "an HTTP request: the server closes (at the latest after our EOF)");
    memset(rnd, 0, 4096);
    is(attack(rnd, 4096, 0) != NOT_CLOSED, 1, "4 KiB of zeros: the server closes");
    memset(rnd, 0xff, 4096);
    is(attack(rnd, 4096, 0), CLOSED_EAGERLY, "4 KiB of 0xff (huge lengths): the server closes");

    /* the handshake cut short at every length, then our EOF */
    fails = 0;
    for (size_t cut = 1; cut < hs && fails < MAXFAIL; cut++)
        if (attack(rec.buf, cut, 1) == NOT_CLOSED) {
            diag("  handshake cut at %zu of %zu bytes: not closed", cut, hs);
            fails++;
        }
    ok(!fails, "handshake cut at each of %zu lengths, then EOF: the server closes", hs);

    /* every byte of the handshake flipped (the rest as recorded), then our EOF */
    fails = 0;
    for (size_t i = 0; i < hs && fails < MAXFAIL; i++) {
        rec.buf[i] ^= 0xff;
        if (attack(rec.buf, rec.len, 1) == NOT_CLOSED) {
            diag("  handshake byte %zu flipped: not closed", i);
            fails++;
        }
        rec.buf[i] ^= 0xff;
    }
    ok(!fails, "each of %zu handshake bytes flipped: the server closes", hs);

    /* a valid handshake followed by a bad message header */
    if (hdr < 0) {
        tap_skip("message header not in the recording", "bad message headers");
    } else {
        static const struct {
            const char *what;
            size_t off, len;
            uint64_t value;
            int must_close;
        } bad[] = {
            {"wire version + 1", 11, 1, 0, 1},
            {"xheader_len PSCOM_XHEADER_MAX + 1", 8, 2, PSCOM_XHEADER_MAX + 1, 1},
            {"xheader_len 0xffff", 8, 2, 0xffff, 1},
            {"data_len PSCOM_DATA_LEN_MAX + 1", 0, 8, PSCOM_DATA_LEN_MAX + 1, 1},
            {"data_len 2^64 - 1", 0, 8, UINT64_MAX, 1},
            {"msg_type 0xee", 10, 1, 0xee, 0},
            /* a filler (MSGTYPE_PAD) never carries a user header */
            {"msg_type 6 (padding) with a user header", 10, 1, 6, 1},
            {"reserved nonzero", 12, 4, 0xffffffff, 0},
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            unsigned char *copy = malloc(rec.len);
            unsigned char *h;
            int res;
            memcpy(copy, rec.buf, rec.len);
            h = copy + hdr;
            if (!strcmp(bad[i].what, "wire version + 1"))
                h[11]++;
            else
                memcpy(h + bad[i].off, &bad[i].value, bad[i].len);
            res = attack(copy, rec.len, 0);
            if (bad[i].must_close)
                is(res, CLOSED_EAGERLY, "handshake + message header with %s: the server closes",
                   bad[i].what);
            else
                ok(1, "handshake + message header with %s: survived (%s)", bad[i].what,
                   res == CLOSED_EAGERLY ? "closed" : "closed after EOF");
            free(copy);
        }
    }
    tu_barrier(); /* D: attacks done */
    free(rnd);
    free(rec.buf);
    tu_strv_free(all);
}

/* ---- rank 0: the server -------------------------------------------------------------------- */

typedef struct server {
    pscom_socket_t *sock;
    pscom_connection_t *peer; /* rank 1 */
    pscom_request_t *any;     /* keeps the server reading every connection */
    int taken;                /* messages from replayed handshakes */
} server_t;

static int is_broken(pscom_connection_t *c)
{
    return TU_CON(c)->errors || c->state == PSCOM_CON_STATE_CLOSED ||
           c->state == PSCOM_CON_STATE_ERROR;
}

static void close_broken(server_t *s)
{
    for (int again = 1; again;) {
        again = 0;
        for (pscom_connection_t *c = pscom_get_next_connection(s->sock, NULL); c;
             c = pscom_get_next_connection(s->sock, c)) {
            if (c != s->peer && is_broken(c)) {
                pscom_close_connection(c);
                again = 1;
                break;
            }
        }
    }
}

static void serve(void *arg)
{
    server_t *s = arg;
    pscom_progress(10);
    if (s->any && pscom_req_is_done(s->any)) {
        s->taken += pscom_req_successful(s->any);
        tu_req_free(s->any);
        s->any = tu_post_recv(NULL, s->sock, 65536, PSCOM_XHEADER_MAX, -1);
    }
    close_broken(s);
}

static void serve_start(server_t *s)
{
    s->any = tu_post_recv(NULL, s->sock, 65536, PSCOM_XHEADER_MAX, -1);
}

static void serve_stop(server_t *s)
{
    if (!pscom_cancel_recv(s->any))
        pscom_wait(s->any);
    tu_req_free(s->any);
    s->any = NULL;
}

static int pingpong(pscom_connection_t *con, int peer, uint64_t seq0, int n)
{
    int good = 1;
    for (int i = 0; i < n; i++) {
        uint64_t seq = seq0 + (uint64_t)i;
        size_t len = i % 3 == 2 ? 200000 : 100 + (size_t)i;
        pscom_request_t *s, *r;
        if (tu_rank == 0) {
            s = tu_post_send(con, 1, seq, len, TU_XH);
            r = tu_post_recv(con, NULL, len, TU_XH, 1);
        } else {
            r = tu_post_recv(con, NULL, len, TU_XH, 1);
            pscom_wait(r);
            s = tu_post_send(con, 1, seq, len, TU_XH);
        }
        pscom_wait(s);
        pscom_wait(r);
        good &= pscom_req_successful(s) && tu_recv_good(r, 1, peer, (long long)seq, len, TU_XH);
        tu_req_free(s);
        tu_req_free(r);
    }
    return good;
}

static void server(void)
{
    server_t s = {0};
    pscom_request_t *r, *reply;
    pscom_connection_t *via_proxy;
    char **all, *log, logname[] = "/tmp/t_garbage.log.XXXXXX";
    int fds, accepts, errors, lines = 0, fd;
    FILE *f;

    /* the library's log goes to a file of its own (PSP_DEBUG_OUT), sanitizers' to stderr */
    fd = mkstemp(logname);
    close(fd);
    setenv("PSP_DEBUG_OUT", logname, 1);
    s.sock = tu_open_socket();
    all = tu_allgather(pscom_socket_get_ep_str(s.sock));

    /* the client through the proxy, and the real peer */
    tu_phase("talking to rank 3 via the proxy");
    r = tu_post_recv(NULL, s.sock, MSG_LEN, TU_XH, MSG_TAG);
    pscom_wait(r);
    ok(tu_recv_good(r, MSG_TAG, 3, MSG_SEQ, MSG_LEN, TU_XH), "message from rank 3 via the proxy");
    via_proxy = r->connection;
    reply = tu_post_send(via_proxy, MSG_TAG, 1, 10, TU_XH);
    pscom_wait(reply);
    tu_req_free(reply);
    tu_req_free(r);
    r = tu_post_recv(NULL, s.sock, 10, TU_XH, 1);
    pscom_wait(r);
    s.peer = r->connection;
    ok(tu_recv_good(r, 1, 1, 0, 10, TU_XH), "first message from the real peer");
    tu_req_free(r);
    tu_check_transport(s.peer, "the real peer's connection");
    tu_barrier(); /* A */
    tu_phase("waiting for rank 3's close");
    while (!is_broken(via_proxy))
        pscom_progress(10);
    pscom_close_connection(via_proxy);
    for (int i = 0; i < 10; i++)
        pscom_progress(10);
    fds = tu_count_fds();
    accepts = tu_accept_count;
    errors = tu_error_count;
    tu_barrier(); /* A2 */

    tu_phase("idle connections");
    tu_barrier(); /* B: idle connections are open */
    ok(pingpong(s.peer, 1, 100, 12), "ping-pong with the real peer while idle connections hang");
    tu_barrier(); /* C */

    tu_phase("serving during the attacks");
    serve_start(&s);
    tu_barrier_while(serve, &s); /* D */
    for (int i = 0; i < 20; i++)
        serve(&s);
    serve_stop(&s);
    close_broken(&s);
    for (int i = 0; i < 10; i++)
        pscom_progress(10);

    ok(pingpong(s.peer, 1, 200, 12), "ping-pong with the real peer after the attacks");
    is(tu_count_fds(), fds, "no fd left from the attacks");
    is(tu_accept_count - accepts, tu_error_count - errors,
       "every accepted attacker connection got its con_error");
    diag("  %d attacker connections were accepted, %d of their messages received",
         tu_accept_count - accepts, s.taken);
    is(TU_CON(s.peer)->errors, 0, "no error on the real peer's connection");

    tu_barrier(); /* E */
    pscom_close_socket(s.sock);
    pscom_cleanup();
    log = calloc(1, 1 << 20);
    f = fopen(logname, "r");
    if (f) {
        size_t n = fread(log, 1, (1 << 20) - 1, f);
        fclose(f);
        for (size_t i = 0; i < n; i++)
            lines += log[i] == '\n';
    }
    unlink(logname);
    fputs(log, stderr); /* into the test's log file */
    ok(lines >= 1, "the server logged the bad connections (PSP_DEBUG_OUT: %d lines)", lines);
    ok(lines <= 4000, "without flooding the log");
    free(log);
    tu_strv_free(all);
}

/* ---- ranks 1 and 3: pscom clients -------------------------------------------------------- */

static void real_peer(void)
{
    pscom_socket_t *sock = tu_open_socket();
    char **all = tu_allgather(pscom_socket_get_ep_str(sock));
    pscom_connection_t *con = pscom_open_connection(sock);
    pscom_request_t *s;

    if (pscom_connect(con, all[0], PSCOM_CON_FLAG_DIRECT) != PSCOM_SUCCESS) {
        ok(0, "real peer connects");
        exit(1);
    }
    s = tu_post_send(con, 1, 0, 10, TU_XH);
    pscom_wait(s);
    tu_req_free(s);
    tu_barrier(); /* A */
    tu_barrier(); /* A2 */
    tu_barrier(); /* B */
    ok(pingpong(con, 0, 100, 12), "ping-pong with the server while idle connections hang");
    tu_barrier(); /* C */
    tu_barrier(); /* D */
    ok(pingpong(con, 0, 200, 12), "ping-pong with the server after the attacks");
    is(tu_error_count, 0, "no connection error at the real peer");
    tu_barrier(); /* E */
    pscom_close_socket(sock);
    tu_strv_free(all);
}

static void proxied_client(void)
{
    pscom_socket_t *sock;
    char **all, ep[PSCOM_EP_STR_MAX];
    pscom_connection_t *con;
    pscom_request_t *s, *r;
    const char *name;

    setenv("PSP_SHM", "0", 1); /* tcp: the bytes go through the proxy */
    setenv("PSP_UCP", "0", 1); /* (UCX would carry them past it) */
    sock = tu_open_socket();
    all = tu_allgather("");
    name = strchr(all[0], '@');
    snprintf(ep, sizeof(ep), "127.0.0.1:%s%s", all[2], name ? name : "");
    con = pscom_open_connection(sock);
    if (pscom_connect(con, ep, PSCOM_CON_FLAG_DIRECT) != PSCOM_SUCCESS) {
        ok(0, "client connects via the proxy (%s)", ep);
        exit(1);
    }
    s = tu_post_send(con, MSG_TAG, MSG_SEQ, MSG_LEN, TU_XH);
    r = tu_post_recv(con, NULL, 10, TU_XH, MSG_TAG);
    pscom_wait(s);
    pscom_wait(r);
    ok(pscom_req_successful(s) && tu_recv_good(r, MSG_TAG, 0, 1, 10, TU_XH),
       "message and answer through the proxy");
    tu_req_free(s);
    tu_req_free(r);
    pscom_close_socket(sock);
    pscom_cleanup();
    tu_strv_free(all);
    tu_barrier(); /* A; then this rank ends */
}

static int child(void *arg)
{
    (void)arg;
    switch (tu_rank) {
    case 0:
        server();
        break;
    case 1:
        real_peer();
        break;
    case 2:
        attacker();
        tu_barrier(); /* E */
        break;
    case 3:
        proxied_client();
        break;
    }
    return 0;
}

int main(void)
{
    tu_run(4, child, NULL, NULL);
    return tap_done();
}
