/*
 * t_api.c - single-process unit tests of the public API: version check, header and request
 * layout, error strings, sockets and endpoint strings, connect argument checking, cancel of
 * a lonely receive, progress without peers.
 */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testutil.h"

static int io_done_calls;

static void count_io_done(pscom_request_t *req)
{
    (void)req;
    io_done_calls++;
}

static int accept_nothing(pscom_request_t *req, pscom_connection_t *con, pscom_header_net_t *header)
{
    (void)req;
    (void)con;
    (void)header;
    return 0;
}

static void test_version(void)
{
    /* refused versions first: they must not initialise anything */
    is(pscom_init((PSCOM_VERSION_MAJOR + 1) << 8), PSCOM_ERR_UNSUPPORTED_VERSION,
       "pscom_init refuses a newer major version");
    if (PSCOM_VERSION_MAJOR > 0)
        is(pscom_init((PSCOM_VERSION_MAJOR - 1) << 8), PSCOM_ERR_UNSUPPORTED_VERSION,
           "pscom_init refuses an older major version");
    is(pscom_init(PSCOM_VERSION + 1), PSCOM_ERR_UNSUPPORTED_VERSION,
       "pscom_init refuses a newer minor version");
    is(pscom_init(PSCOM_VERSION), PSCOM_SUCCESS, "pscom_init(PSCOM_VERSION)");
    is(pscom_init(PSCOM_VERSION), PSCOM_SUCCESS, "pscom_init twice");
    {
        const char *v = pscom_version_str();
        char want[16];
        snprintf(want, sizeof(want), "%d.%d.", PSCOM_VERSION_MAJOR, PSCOM_VERSION_MINOR);
        ok(v && strncmp(v, want, strlen(want)) == 0, "pscom_version_str() is %s*", want);
        diag("  version %s", v ? v : "(null)");
    }
}

static void test_strings(void)
{
    static const pscom_err_t errs[] = {
        PSCOM_SUCCESS,
        PSCOM_ERR_STDERROR,
        PSCOM_ERR_INVALID,
        PSCOM_ERR_ALREADY,
        PSCOM_NOT_IMPLEMENTED,
        PSCOM_ERR_EOF,
        PSCOM_ERR_IOERROR,
        PSCOM_ERR_UNSUPPORTED_VERSION,
        PSCOM_ERR_CONNECTION_REFUSED,
        PSCOM_ERR_PROTOCOL,
        PSCOM_ERR_NOMEM,
    };
    const size_t n = sizeof(errs) / sizeof(errs[0]);
    int good = 1, distinct = 1;
    for (size_t i = 0; i < n; i++) {
        const char *s = pscom_err_str(errs[i]);
        if (!s || !*s) {
            diag("  pscom_err_str(%d) is empty", errs[i]);
            good = 0;
            continue;
        }
        for (size_t j = 0; j < i; j++)
            if (pscom_err_str(errs[j]) && !strcmp(s, pscom_err_str(errs[j]))) {
                diag("  pscom_err_str(%d) == pscom_err_str(%d) == \"%s\"", errs[i], errs[j], s);
                distinct = 0;
            }
    }
    ok(good, "pscom_err_str gives text for every error code");
    ok(distinct, "pscom_err_str texts are distinct");
    ok(pscom_err_str((pscom_err_t)-12345) != NULL, "pscom_err_str of an unknown code");
    {
        const char *s = pscom_req_state_str(PSCOM_REQ_STATE_RECV | PSCOM_REQ_STATE_DONE |
                                            PSCOM_REQ_STATE_TRUNCATED);
        ok(s && *s, "pscom_req_state_str gives text");
        diag("  RECV|DONE|TRUNCATED: %s", s ? s : "(null)");
    }
}

static void test_layout(void)
{
    pscom_request_t *req;
    int zero = 1;

    is(sizeof(pscom_header_net_t), 16, "pscom_header_net_t is 16 bytes");
    {
        pscom_header_net_t h;
        ok((char *)pscom_header_xheader(&h) == (char *)&h + sizeof(h),
           "pscom_header_xheader points right behind the header");
    }
    req = pscom_request_create(100, 40);
    if (!ok(req != NULL, "pscom_request_create(100, 40)"))
        return;
    ok(req->xheader == pscom_header_xheader(&req->header),
       "req->xheader == pscom_header_xheader(&req->header)");
    is(req->max_xheader_len, 100, "max_xheader_len");
    is(req->user_size, 40, "user_size");
    ok(req->user != NULL, "user data present");
    for (int i = 0; req->user && i < 40; i++)
        zero &= ((unsigned char *)req->user)[i] == 0;
    ok(zero, "user data zeroed");
    ok(!pscom_req_is_done(req), "a new request is not done");
    ok(!(req->state & PSCOM_REQ_STATE_POSTED), "a new request is not posted");
    memset(req->xheader, 0xab, 100); /* writable all the way (asan checks) */
    memset(req->user, 0xcd, 40);
    pscom_request_free(req);

    req = pscom_request_create(PSCOM_XHEADER_MAX, 0);
    if (ok(req != NULL, "pscom_request_create(PSCOM_XHEADER_MAX, 0)")) {
        memset(req->xheader, 0x5a, PSCOM_XHEADER_MAX);
        ok(req->xheader == pscom_header_xheader(&req->header), "xheader follows the header");
        pscom_request_free(req);
    }
    req = pscom_request_create(0, 0);
    ok(req != NULL, "pscom_request_create(0, 0)");
    pscom_request_free(req);
}

static void test_socket(void)
{
    pscom_socket_t *sock = pscom_open_socket(24, 8);
    const char *ep;
    char ip[64];
    int port = 0, zero = 1;

    if (!ok(sock != NULL, "pscom_open_socket"))
        return;
    is(sock->listen_portno, -1, "listen_portno is -1 before listen");
    ok(pscom_socket_get_ep_str(sock) == NULL, "no endpoint string before listen");
    ok(sock->userdata != NULL && sock->userdata_size == 24, "socket userdata of 24 bytes");
    for (int i = 0; sock->userdata && i < 24; i++)
        zero &= ((unsigned char *)sock->userdata)[i] == 0;
    ok(zero, "socket userdata zeroed");

    pscom_socket_set_name(sock, "r0000003");
    is(strcmp(sock->local_name, "r0000003"), 0, "socket name set");
    is(pscom_listen(sock, PSCOM_ANYPORT), PSCOM_SUCCESS, "pscom_listen(PSCOM_ANYPORT)");
    ok(sock->listen_portno > 0, "listen_portno is set (%d)", sock->listen_portno);
    ep = pscom_socket_get_ep_str(sock);
    ok(ep != NULL, "endpoint string while listening");
    if (ep) {
        size_t len = strlen(ep);
        diag("  ep %s", ep);
        ok(len < PSCOM_EP_STR_MAX, "endpoint string shorter than PSCOM_EP_STR_MAX");
        ok(tu_ep_addr(ep, ip, sizeof(ip), &port) == 0 && port == sock->listen_portno,
           "endpoint string is ip:port@name with our port");
        const char *hash = strchr(ep, '#');
        ok(hash && hash - ep > 9 && !strncmp(hash - 9, "@r0000003", 9) &&
               strspn(hash + 1, "0123456789abcdef") == 32 && !hash[33],
           "endpoint string ends in @name#key (32 hex digits)");
    }

    {
        /* a second socket may listen on a port we pick; the same port twice must fail */
        pscom_socket_t *s2 = pscom_open_socket(0, 0);
        int busy = sock->listen_portno;
        ok(pscom_listen(s2, busy) != PSCOM_SUCCESS, "pscom_listen on a port in use fails");
        pscom_close_socket(s2);
    }

    {
        pscom_connection_t *con = pscom_open_connection(sock);
        if (ok(con != NULL, "pscom_open_connection")) {
            int czero = 1;
            ok(con->socket == sock, "con->socket");
            ok(con->userdata_size == 8 && con->userdata != NULL, "con userdata of 8 bytes");
            for (int i = 0; con->userdata && i < 8; i++)
                czero &= ((unsigned char *)con->userdata)[i] == 0;
            ok(czero, "con userdata zeroed");
            ok(con->state != PSCOM_CON_STATE_RW, "a new connection is not connected");
            ok(con->transport != NULL, "con->transport is a string (%s)",
               con->transport ? con->transport : "NULL");
            pscom_close_connection(con);
        }
    }

    {
        /* unparsable endpoints are refused at once */
        static const char *bad[] = {"",           "garbage",        "127.0.0.1",
                                    "127.0.0.1:", "127.0.0.1:x@r1", "127.0.0.1:99999@r1",
                                    ":4711@r1",   "1.2.3.4.5:80@r1"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            pscom_connection_t *con = pscom_open_connection(sock);
            pscom_err_t rc = pscom_connect(con, bad[i], PSCOM_CON_FLAG_DIRECT);
            is(rc, PSCOM_ERR_INVALID, "pscom_connect(\"%s\") is PSCOM_ERR_INVALID", bad[i]);
            pscom_close_connection(con);
        }
    }

    {
        /* nobody listens on that port: an error, not a hang */
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t sl = sizeof(sa);
        char ep2[PSCOM_EP_STR_MAX];
        pscom_connection_t *con = pscom_open_connection(sock);
        pscom_err_t rc;
        bind(fd, (struct sockaddr *)&sa, sizeof(sa));
        getsockname(fd, (struct sockaddr *)&sa, &sl);
        close(fd); /* bound, never listened: connecting is refused */
        snprintf(ep2, sizeof(ep2), "127.0.0.1:%d@r9", ntohs(sa.sin_port));
        rc = pscom_connect(con, ep2, PSCOM_CON_FLAG_DIRECT);
        ok(rc != PSCOM_SUCCESS, "DIRECT connect to a closed port fails (%s)", pscom_err_str(rc));
        ok(con->state != PSCOM_CON_STATE_RW, "and the connection is not RW");
        pscom_close_connection(con);
    }

    {
        /* a receive nobody will ever match: cancel it */
        pscom_request_t *req = pscom_request_create(16, 0);
        char buf[16];
        req->data = buf;
        req->data_len = sizeof(buf);
        req->socket = sock;
        req->connection = NULL;
        req->ops.io_done = count_io_done;
        io_done_calls = 0;
        pscom_post_recv(req);
        ok(req->state & PSCOM_REQ_STATE_POSTED, "posted receive is POSTED");
        ok(!pscom_test(req), "pscom_test: not done");
        is(pscom_iprobe(req), 0, "pscom_iprobe finds nothing");
        is(pscom_cancel_recv(req), 1, "pscom_cancel_recv returns 1");
        ok(pscom_req_is_done(req) && (req->state & PSCOM_REQ_STATE_CANCELED),
           "cancelled request is DONE|CANCELED (%s)", pscom_req_state_str(req->state));
        ok(!pscom_req_successful(req), "cancelled request is not successful");
        is(io_done_calls, 1, "io_done called once");
        is(pscom_cancel_recv(req), 0, "a second cancel returns 0");
        pscom_request_free(req);

        req = pscom_request_create(16, 0);
        req->data = buf;
        req->data_len = sizeof(buf);
        req->socket = sock;
        req->ops.recv_accept = accept_nothing;
        pscom_post_recv(req);
        pscom_progress(0);
        is(pscom_cancel_recv(req), 1, "cancel a receive with a recv_accept");
        pscom_wait(req); /* DONE already: must return at once */
        pscom_request_free(req);
    }

    {
        double t0 = tu_now();
        int n = pscom_progress(0);
        is(n, 0, "pscom_progress(0) with nothing to do returns 0");
        n = pscom_progress(20);
        is(n, 0, "pscom_progress(20) with nothing to do returns 0");
        ok(tu_now() - t0 < 30, "pscom_progress(20) returned");
    }

    {
        FILE *f = tmpfile();
        long len;
        pscom_dump_info(f);
        fflush(f);
        len = ftell(f);
        ok(len > 0, "pscom_dump_info writes something (%ld bytes)", len);
        fclose(f);
    }

    pscom_stop_listen(sock);
    ok(pscom_socket_get_ep_str(sock) == NULL, "no endpoint string after pscom_stop_listen");
    pscom_close_socket(sock);
}

static void test_plugins(void)
{
    pscom_plugin_info_t info;
    int have_shm = 0, have_tcp = 0, n = 0;
    for (int i = 0; i < 64 && pscom_plugin_info(i, &info) == 0; i++, n++) {
        diag("  plugin %d: %s prio %d user_prio %d available %d rendezvous %zu: %s", i, info.name,
             info.priority, info.user_prio, info.available, info.rendezvous, info.status);
        have_shm |= !strcmp(info.name, "shm") && info.available;
        have_tcp |= !strcmp(info.name, "tcp") && info.available;
    }
    ok(n >= 2, "pscom_plugin_info lists the plugins");
    ok(have_shm && have_tcp, "shm and tcp are available");
    ok(pscom_plugin_info(n, &info) == -1, "pscom_plugin_info past the end is -1");
}

int main(void)
{
    pid_t me = getpid();
    tu_hygiene_begin();
    test_version();
    test_strings();
    test_layout();
    test_socket();
    test_plugins();
    pscom_cleanup();
    pscom_cleanup(); /* twice is harmless */
    tu_hygiene_check(&me, 1);
    return tap_done();
}
