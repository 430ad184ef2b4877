/*
 * t_anysrc.c - many processes, all to all: every rank connects on demand to every other one
 * (all at the same time, so both sides of each pair connect at once), sends M messages to each
 * peer and receives everything with any-source receives (req->connection NULL, req->socket
 * set), a window of them outstanding and reposted as they complete (pscom_wait_any). Checks
 * per-peer order, that the source connection is the one we opened to that peer (one
 * connection per pair), data, and that the leftover receives can be cancelled.
 *
 * usage: t_anysrc [nprocs] (default 5)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define M      200
#define WINDOW 32
#define BUFLEN 16384

static size_t msg_len(uint64_t seq)
{
    return seq % 5 == 0 ? 10000 + seq * 3 : seq % 300;
}

static int child(void *arg)
{
    pscom_socket_t *sock = tu_open_socket();
    char **eps = tu_exchange_eps(sock);
    pscom_connection_t **cons = tu_connect_all(sock, eps, PSCOM_CON_FLAG_ONDEMAND);
    int n = tu_nranks, total = (n - 1) * M, got = 0, bad = 0, ncons = 0, cancelled = 0, head = 0;
    pscom_request_t **sends = calloc((size_t)total, sizeof(*sends));
    pscom_request_t *win[WINDOW + 1] = {NULL};
    uint64_t *next = calloc((size_t)n, sizeof(*next));
    (void)arg;

    tu_phase("sending and receiving");
    for (int i = 0; i < WINDOW; i++)
        win[i] = tu_post_recv(NULL, sock, BUFLEN, TU_XH, -1);
    for (int k = 0, s = 0; k < M; k++)
        for (int p = 0; p < n; p++)
            if (p != tu_rank)
                sends[s++] = tu_post_send(cons[p], 3, (uint64_t)k, msg_len((uint64_t)k), TU_XH);

    /* Receives match in the order they were posted: process them in that order (a ring),
       although pscom_wait_any may report any completed one, and they may complete in another
       order. */
    while (got < total) {
        int i = pscom_wait_any(win);
        if (i < 0 || i >= WINDOW || !pscom_req_is_done(win[i])) {
            ok(0, "pscom_wait_any returned %d, not a completed request", i);
            exit(1);
        }
        /* completions may come out of order (a long message matched first can finish last) */
        pscom_wait(win[head]);
        while (got < total && pscom_req_is_done(win[head])) {
            pscom_request_t *r = win[head];
            tu_xh_t xh = {0};
            if (r->xheader_len >= TU_XH)
                memcpy(&xh, r->xheader, TU_XH);
            if (xh.src >= (uint32_t)n || xh.src == (uint32_t)tu_rank) {
                diag("  message from unknown source %u (state %s)", xh.src,
                     pscom_req_state_str(r->state));
                bad++;
            } else if (!tu_recv_good(r, 3, xh.src, (long long)next[xh.src], msg_len(next[xh.src]),
                                     TU_XH) ||
                       r->connection != cons[xh.src]) {
                diag("  ^ message %d from rank %u, expected seq %llu; from our connection: %s", got,
                     xh.src, (unsigned long long)next[xh.src],
                     r->connection == cons[xh.src] ? "yes" : "no");
                bad++;
            }
            if (xh.src < (uint32_t)n)
                next[xh.src] = xh.seq + 1;
            tu_req_free(r);
            win[head] = tu_post_recv(NULL, sock, BUFLEN, TU_XH, -1);
            head = (head + 1) % WINDOW;
            got++;
        }
        if (bad > 10)
            break;
    }
    ok(!bad, "%d messages from %d peers by any-source receives: per-peer order, source, data",
       total, n - 1);

    tu_wait_all(sends, (size_t)total);
    {
        int good = 1;
        for (int s = 0; s < total; s++) {
            good &= pscom_req_successful(sends[s]);
            tu_req_free(sends[s]);
        }
        ok(good, "%d sends successful", total);
    }

    /* the window is still posted; nothing more comes: cancel it */
    for (int i = 0; i < WINDOW; i++) {
        int rc = pscom_cancel_recv(win[i]);
        if (rc == 1 && (win[i]->state & PSCOM_REQ_STATE_CANCELED) && pscom_req_is_done(win[i]))
            cancelled++;
        else if (cancelled == i)
            diag("  cancel returned %d, state %s", rc, pscom_req_state_str(win[i]->state));
        if (!pscom_req_is_done(win[i]))
            pscom_wait(win[i]); /* not cancelled: it must not be freed while posted */
        tu_req_free(win[i]);
    }
    is(cancelled, WINDOW, "the %d leftover any-source receives are cancelled", WINDOW);

    for (pscom_connection_t *c = pscom_get_next_connection(sock, NULL); c;
         c = pscom_get_next_connection(sock, c))
        ncons++;
    is(ncons, n - 1, "one connection per peer");
    for (int p = 0; p < n; p++)
        if (cons[p])
            tu_check_transport(cons[p], "connection to a peer");
    is(tu_error_count, 0, "no connection error");

    tu_barrier();
    pscom_close_socket(sock);
    free(next);
    free(sends);
    free(cons);
    tu_strv_free(eps);
    return 0;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 5;
    if (n < 2 || n > 64)
        n = 5;
    tu_run(n, child, NULL, NULL);
    return tap_done();
}
