/*
 * t_loop.c - a process connected to itself (the loop transport): the connection uses it, and
 * messages of 0 B to 4 MiB go from one end to the other posted and unexpected, and back on the
 * accepting end, all in order and intact. Under PSP_LOOP=0 (T_TRANSPORT names the transport
 * expected instead) the same messages take the next transport.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define TAG 7
static const size_t sizes[] = {0, 1, 100, 4096, 65536, 1u << 20, 4u << 20};
#define N (sizeof(sizes) / sizeof(sizes[0]))

/* n messages from con, received by any-source receives posted before (posted = 1) or after */
static pscom_connection_t *round_trip(pscom_socket_t *sock, pscom_connection_t *con, int posted,
                                      uint64_t base, const char *what)
{
    pscom_request_t *s[N], *r[N];
    pscom_connection_t *from = NULL;
    for (size_t i = 0; posted && i < N; i++)
        r[i] = tu_post_recv(NULL, sock, sizes[N - 1], TU_XH, TAG);
    for (size_t i = 0; i < N; i++)
        s[i] = tu_post_send(con, TAG, base + i, sizes[i], TU_XH);
    /* unexpected: let the eager ones arrive first (a rendezvous send waits for its receive) */
    for (int i = 0; !posted && i < 1000; i++)
        pscom_progress(0);
    for (size_t i = 0; !posted && i < N; i++)
        r[i] = tu_post_recv(NULL, sock, sizes[N - 1], TU_XH, TAG);
    tu_wait_all(s, N);
    tu_wait_all(r, N);
    int good = 1;
    for (size_t i = 0; i < N; i++) {
        good &= pscom_req_successful(s[i]);
        good &= tu_recv_good(r[i], TAG, tu_rank, (long long)(base + i), sizes[i], TU_XH);
        if (!from)
            from = r[i]->connection;
        good &= r[i]->connection == from;
        tu_req_free(s[i]);
        tu_req_free(r[i]);
    }
    ok(good, "%s: %zu messages of 0 B to 4 MiB, in order and intact", what, N);
    return from;
}

static int child(void *arg)
{
    (void)arg;
    pscom_socket_t *sock = tu_open_socket();
    char **eps = tu_exchange_eps(sock);
    pscom_connection_t *con = pscom_open_connection(sock);
    pscom_err_t rc = pscom_connect(con, eps[tu_rank], PSCOM_CON_FLAG_ONDEMAND);
    if (!ok(rc == PSCOM_SUCCESS, "connect to the own socket"))
        diag("  %s", pscom_err_str(rc));
    pscom_connection_t *other = round_trip(sock, con, 1, 0, "to itself, receives posted");
    ok(other && other != con, "the accepting end is a connection of its own");
    round_trip(sock, con, 0, 100, "to itself, unexpected");
    if (other) {
        tu_check_transport(other, "the accepting end");
        ok(round_trip(sock, other, 1, 200, "back from the accepting end") == con,
           "the connecting end receives what the accepting end sends");
    }
    return tu_finish(sock, NULL, eps, con);
}

int main(void)
{
    tu_run(1, child, NULL, NULL);
    return tap_done();
}
