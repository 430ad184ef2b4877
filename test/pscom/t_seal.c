/*
 * t_seal.c - a sealed socket (pscom_socket_seal) takes only connectors that prove the key of
 * its endpoint string ("ip:port@name#key"); everyone else is refused in the handshake, before
 * any message, with one log line, and the socket carries on.
 *
 * rank 0: the server, sealed (PSP_DEBUG=2: its refusals are logged). rank 1: pscom clients.
 * rank 2: a recorder (plain sockets) between rank 1 and the server.
 *   1. rank 1 connects with the endpoint string without its key (the server refuses its proof),
 *      and with one key digit changed (the server's own proof does not fit: rank 1 stops):
 *      both connects fail with a reason
 *   2. rank 1 connects through the recorder with the right key: messages flow; the recorder
 *      keeps what rank 1 sent, then replays it to the server on a new TCP connection: refused
 *      (the server's nonce is new, so the recorded proof does not fit)
 *   3. rank 1 connects directly with the right key: messages flow; the server logged exactly
 *      two refusals
 */
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testutil.h"

#define TAG 7

static char *strip_key(const char *ep)
{
    char *s = strdup(ep), *hash = strchr(s, '#');
    if (hash)
        *hash = '\0';
    return s;
}

/* one message each way on con, data checked */
static int exchange(pscom_socket_t *sock, pscom_connection_t *con, int server)
{
    pscom_request_t *r = tu_post_recv(con, sock, 64, TU_XH, TAG);
    if (!server) {
        pscom_request_t *s = tu_post_send(con, TAG, 1, 64, TU_XH);
        pscom_wait(s);
        tu_req_free(s);
    }
    pscom_wait(r);
    int good = tu_recv_good(r, TAG, -1, 1, 64, TU_XH);
    if (server) {
        pscom_request_t *s = tu_post_send(r->connection, TAG, 1, 64, TU_XH);
        pscom_wait(s);
        tu_req_free(s);
    }
    tu_req_free(r);
    return good;
}

static int refused(pscom_socket_t *sock, const char *ep, const char *what, const char *says)
{
    pscom_connection_t *con = pscom_open_connection(sock);
    tu_capture_begin();
    pscom_err_t rc = pscom_connect(con, ep, PSCOM_CON_FLAG_DIRECT);
    char *log = tu_capture_end();
    ok(rc != PSCOM_SUCCESS && strstr(log, says), "%s: connect fails (%s), '%s'", what,
       pscom_err_str(rc), says);
    free(log);
    pscom_close_connection(con);
    return rc != PSCOM_SUCCESS;
}

/* rank 2: relay one connection from rank 1 to the server, keeping what rank 1 sent */
static size_t record(int lfd, const struct sockaddr_in *server, unsigned char *rec, size_t max)
{
    int c = accept(lfd, NULL, NULL), s = tu_dial(server);
    size_t n = 0;
    struct pollfd p[2] = {{.fd = c, .events = POLLIN}, {.fd = s, .events = POLLIN}};
    double end = tu_now() + 20;
    while (c >= 0 && s >= 0 && tu_now() < end && poll(p, 2, 200) >= 0) {
        unsigned char buf[4096];
        int stop = 0;
        for (int i = 0; i < 2 && !stop; i++) {
            if (!(p[i].revents & (POLLIN | POLLHUP)))
                continue;
            ssize_t k = read(p[i].fd, buf, sizeof(buf));
            if (k <= 0 || tu_send_all(p[1 - i].fd, buf, (size_t)k) != 0) {
                stop = 1;
                break;
            }
            if (i == 0) {
                size_t take = n + (size_t)k <= max ? (size_t)k : max - n;
                memcpy(rec + n, buf, take);
                n += take;
            }
        }
        if (stop)
            break;
    }
    if (c >= 0)
        close(c);
    if (s >= 0)
        close(s);
    return n;
}

static int child(void *arg)
{
    (void)arg;
    if (tu_rank == 2) {
        int port, lfd = tu_listen_local(&port);
        char line[32];
        snprintf(line, sizeof(line), "%d", port);
        char **all = tu_allgather(line);
        struct sockaddr_in server;
        tu_ep_sockaddr(all[0], &server);
        unsigned char rec[8192];
        size_t n = record(lfd, &server, rec, sizeof(rec));
        ok(n > 0, "recorder: kept %zu bytes of a good handshake and its messages", n);
        int fd = tu_dial(&server);
        int sent = fd >= 0 && tu_send_all(fd, rec, n) == 0;
        /* the server refuses and closes: reading ends within the handshake's time */
        unsigned char buf[4096];
        double end = tu_now() + 10;
        ssize_t k = 1;
        while (fd >= 0 && tu_now() < end) {
            struct pollfd p = {.fd = fd, .events = POLLIN};
            if (poll(&p, 1, 200) > 0 && (k = read(fd, buf, sizeof(buf))) <= 0)
                break;
        }
        ok(sent && k <= 0, "replay of the recorded handshake: the server closed the connection");
        if (fd >= 0)
            close(fd);
        close(lfd);
        tu_barrier();
        tu_barrier();
        tu_strv_free(all);
        return 0;
    }
    pscom_socket_t *sock = tu_open_socket();
    if (tu_rank == 0)
        pscom_socket_seal(sock);
    char **all = tu_allgather(tu_rank == 0 ? pscom_socket_get_ep_str(sock) : "");
    if (tu_rank == 1) {
        char *nokey = strip_key(all[0]);
        refused(sock, nokey, "no key in the endpoint string", "the peer refused our proof");
        free(nokey);
        char *wrong = strdup(all[0]);
        char *d = wrong + strlen(wrong) - 1;
        *d = *d == '0' ? '1' : '0';
        /* the server's own proof does not fit this key: we stop first, it sees a close */
        refused(sock, wrong, "one key digit changed", "does not prove the key");
        free(wrong);
        /* through the recorder */
        char *at = strchr(all[0], '@'), via[PSCOM_EP_STR_MAX];
        snprintf(via, sizeof(via), "127.0.0.1:%s%s", all[2], at);
        pscom_connection_t *con = pscom_open_connection(sock);
        ok(pscom_connect(con, via, PSCOM_CON_FLAG_DIRECT) == PSCOM_SUCCESS,
           "with the key, through the recorder: connected");
        ok(exchange(sock, con, 0), "... and a message each way");
        pscom_close_connection(con);
        tu_barrier(); /* the replay is done */
        con = pscom_open_connection(sock);
        ok(pscom_connect(con, all[0], PSCOM_CON_FLAG_DIRECT) == PSCOM_SUCCESS,
           "with the key, directly: connected");
        ok(exchange(sock, con, 0), "... and a message each way");
        pscom_close_connection(con);
        tu_barrier();
    } else {
        tu_capture_begin();
        int good = exchange(sock, NULL, 1);
        tu_barrier();
        good &= exchange(sock, NULL, 1);
        tu_barrier();
        char *log = tu_capture_end();
        fputs(log, stderr);
        ok(good, "server: the good connections' messages came, and the replies went");
        is(tu_count_lines(log, "refused", "key"), 2,
           "server: two refusals logged (no key, the replay)");
        free(log);
    }
    pscom_close_socket(sock);
    tu_strv_free(all);
    return 0;
}

int main(void)
{
    /* tcp: the recorder sees the bytes, and the server logs its refusals */
    setenv("PSP_SHM", "0", 1);
    setenv("PSP_UCP", "0", 1);
    setenv("PSP_DEBUG", "2", 1);
    tu_run(3, child, NULL, NULL);
    return tap_done();
}
