/*
 * t_fallback.c - the preferred transport fails for a peer: the connection comes up on the next
 * one, and PSP_DEBUG=2 names the reason once.
 *
 * Both ranks run with PSP_SHM=0, so ucp (priority 50) is tried before tcp. Rank 0 connects to
 * rank 1 (DIRECT); rank 1 only accepts. Real, deterministic failures of the ucp plugin:
 *   unreachable  rank 0's UCX has only its tcp transport (UCX_TLS=tcp), rank 1's only shared
 *                memory (UCX_TLS=posix,self): rank 1 cannot make a UCX endpoint to rank 0's
 *                worker address (no common transport) and declines ucp in the handshake.
 *   noinit       rank 1's UCX does not start (UCX_TLS=bogus: ucp_init fails), so rank 1 has no
 *                ucp plugin: it declines the offer, and pscom_plugin_info says why.
 * The .t script skips this where the ucp plugin is not built.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static const char *mode;
static char logbase[] = "/tmp/t_fallback.log.XXXXXX";

static int child(void *arg)
{
    char logname[sizeof(logbase) + 8];
    int unreachable = !strcmp(mode, "unreachable");
    pscom_socket_t *sock;
    pscom_connection_t *con;
    pscom_request_t *s, *r;
    char **eps, *log;
    (void)arg;

    snprintf(logname, sizeof(logname), "%s.r%d", logbase, tu_rank);
    setenv("PSP_DEBUG", "2", 1);
    setenv("PSP_DEBUG_OUT", logname, 1);
    setenv("PSP_SHM", "0", 1);
    setenv("PSP_TCP", "1", 1);
    unsetenv("PSP_UCP");
    if (tu_rank == 0)
        setenv("UCX_TLS", "tcp", 1);
    else
        setenv("UCX_TLS", unreachable ? "posix,self" : "bogus", 1);
    sock = tu_open_socket();
    eps = tu_exchange_eps(sock);

    if (tu_rank == 1 && !unreachable) {
        pscom_plugin_info_t info;
        int found = 0;
        for (int i = 0; pscom_plugin_info(i, &info) == 0; i++)
            if (!strcmp(info.name, "ucp")) {
                found = 1;
                ok(!info.available && strstr(info.status, "bogus"),
                   "with UCX_TLS=bogus ucp is not available, and the status says why (%s)",
                   info.status);
            }
        ok(found, "pscom_plugin_info lists ucp");
    }

    tu_phase("connecting");
    if (tu_rank == 0) {
        con = pscom_open_connection(sock);
        is(pscom_connect(con, eps[1], PSCOM_CON_FLAG_DIRECT), PSCOM_SUCCESS,
           "connect to rank 1 succeeds");
        s = tu_post_send(con, 1, 1, 5000, TU_XH);
        r = tu_post_recv(con, NULL, 5000, TU_XH, 2);
    } else {
        r = tu_post_recv(NULL, sock, 5000, TU_XH, 1);
        pscom_wait(r);
        ok(tu_recv_good(r, 1, 0, 1, 5000, TU_XH), "message from rank 0");
        con = r->connection;
        tu_req_free(r);
        s = tu_post_send(con, 2, 2, 5000, TU_XH);
        r = tu_post_recv(con, NULL, 5000, TU_XH, 3);
    }
    pscom_wait(s);
    ok(pscom_req_successful(s), "send successful");
    tu_req_free(s);
    if (tu_rank == 0) {
        pscom_wait(r);
        ok(tu_recv_good(r, 2, 1, 2, 5000, TU_XH), "reply from rank 1");
        tu_req_free(r);
        s = tu_post_send(con, 3, 3, 100, TU_XH);
        pscom_wait(s);
        tu_req_free(s);
    } else {
        pscom_wait(r);
        ok(pscom_req_successful(r), "last message from rank 0");
        tu_req_free(r);
    }
    ok(!strcmp(con->transport, "tcp"), "the connection fell back to tcp (is %s)", con->transport);
    is(tu_error_count, 0, "no connection error");
    tu_barrier();
    pscom_close_socket(sock);
    pscom_cleanup();
    tu_strv_free(eps);

    /* the log: the reason once, on the side that knows it */
    log = tu_slurp(logname);
    unlink(logname);
    if (tu_rank == 0) {
        is(tu_count_lines(log, "declined", "ucp"), 1,
           "rank 0 logs once that the peer declined ucp");
    } else {
        is(tu_count_lines(log, "declined", "ucp"), 1, "rank 1 logs once that it declined ucp");
        if (unreachable)
            is(tu_count_lines(log, "reach", "ucp"), 1,
               "rank 1 logs once why: ucp cannot reach the peer");
    }
    fputs(log, stderr); /* into the test's log */
    free(log);
    return 0;
}

int main(int argc, char **argv)
{
    int fd;
    mode = argc > 1 ? argv[1] : "unreachable";
    if (strcmp(mode, "unreachable") && strcmp(mode, "noinit")) {
        fprintf(stderr, "usage: %s [unreachable|noinit]\n", argv[0]);
        return 2;
    }
    fd = mkstemp(logbase);
    if (fd >= 0) {
        close(fd);
        unlink(logbase);
    }
    tu_run(2, child, NULL, NULL);
    return tap_done();
}
