/*
 * t_many.c - thousands of outstanding requests: two processes each post 5000 sends and 5000
 * receives at once in both directions (every 7th message above the forced rendezvous
 * threshold), wait for all, and check per-connection order (seq in the xheader) and data.
 * Round 1: receives that accept anything, posted before the sends: receive i gets message i.
 * Round 2: sends first, then receives that each accept one seq, posted in reverse order.
 */
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

#define N 5000

static size_t msg_len(uint64_t i)
{
    return i % 7 == 0 ? 8192 + i : i % 100;
}

static void check_round(pscom_request_t **reqs, int peer, uint64_t seq0, const char *what)
{
    int bad_recv = 0, bad_send = 0;
    for (int i = 0; i < N; i++) {
        pscom_request_t *r = reqs[i];
        if (!tu_recv_good(r, (long)(seq0 + i), peer, (long long)(seq0 + i), msg_len(seq0 + i),
                          TU_XH)) {
            if (++bad_recv <= 5)
                diag("  ^ receive %d", i);
            else
                break;
        }
    }
    for (int i = N; i < 2 * N; i++) {
        pscom_request_t *r = reqs[i];
        if (!pscom_req_successful(r) || TU_REQ(r)->io_done_calls != 1)
            if (++bad_send <= 5)
                diag("  send %d: %s, io_done %d times", i - N, pscom_req_state_str(r->state),
                     TU_REQ(r)->io_done_calls);
    }
    ok(!bad_recv, "%s: %d receives matched in order, data verified", what, N);
    ok(!bad_send, "%s: %d sends successful", what, N);
    for (int i = 0; i < 2 * N; i++)
        tu_req_free(reqs[i]);
}

static int child(void *arg)
{
    pscom_socket_t *sock = tu_open_socket();
    char **eps = tu_exchange_eps(sock);
    pscom_connection_t **cons = tu_connect_all(sock, eps, PSCOM_CON_FLAG_DIRECT);
    int peer = 1 - tu_rank;
    pscom_connection_t *con = cons[peer];
    pscom_request_t **reqs = calloc(2 * N, sizeof(*reqs));
    (void)arg;

    /* round 1: receives first, accept all */
    tu_phase("round 1");
    for (int i = 0; i < N; i++)
        reqs[i] = tu_post_recv(con, NULL, msg_len((uint64_t)i), TU_XH, -1);
    tu_barrier();
    for (int i = 0; i < N; i++)
        reqs[N + i] = tu_post_send(con, (uint32_t)i, (uint64_t)i, msg_len((uint64_t)i), TU_XH);
    tu_wait_all(reqs, 2 * N);
    check_round(reqs, peer, 0, "pre-posted, accept all");

    /* round 2: sends first, then receives matching one seq each, posted in reverse */
    tu_phase("round 2");
    tu_barrier();
    for (int i = 0; i < N; i++)
        reqs[N + i] = tu_post_send(con, (uint32_t)(N + i), (uint64_t)(N + i),
                                   msg_len((uint64_t)(N + i)), TU_XH);
    for (int i = N - 1; i >= 0; i--)
        reqs[i] = tu_post_recv(con, NULL, msg_len((uint64_t)(N + i)), TU_XH, N + i);
    tu_wait_all(reqs, 2 * N);
    check_round(reqs, peer, N, "sends first, receives by seq in reverse");

    tu_check_transport(con, "the connection");
    is(tu_error_count, 0, "no connection error");
    tu_barrier();
    pscom_close_socket(sock);
    free(reqs);
    free(cons);
    tu_strv_free(eps);
    return 0;
}

int main(void)
{
    tu_run(2, child, NULL, NULL);
    return tap_done();
}
